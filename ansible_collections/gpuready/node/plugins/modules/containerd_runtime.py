#!/usr/bin/python
# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the containerd_runtime action; the work happens on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: containerd_runtime
short_description: Register the NVIDIA container runtime in a node's containerd config, or remove it
description:
  - With O(state=present), adds the NVIDIA runtime to the runtime table that the config's
    C(version) reads (1 C(plugins.cri), 2 C(plugins."io.containerd.grpc.v1.cri"), 3 and 4
    C(plugins."io.containerd.cri.v1.runtime")), starting from runc's table, then sets
    C(options.BinaryName) and C(options.SystemdCgroup), exactly as
    C(gpuready configure --config CONFIG) does; with O(drop_in), as
    C(gpuready configure --drop-in [PATH]) does.
  - With O(state=absent), takes back exactly what gpuready added, as C(gpuready unconfigure)
    does, from gpuready's record beside the config (C(CONFIG.gpuready.json)). A file unchanged
    since gpuready wrote it gets its original bytes back (a drop-in gpuready created is removed,
    and so is the backup, and the folders gpuready created for the drop-in once they are empty);
    in a file edited since, only gpuready's own settings go. Without a
    record there is nothing to do.
  - The edit is computed on the controller with the gpuready library, so the node needs only its
    OS Python (3.9 and newer) and nothing installed. The node's files are read with
    M(ansible.builtin.stat), M(ansible.builtin.find) and M(ansible.builtin.slurp) and written back
    or removed with M(gpuready.node.node_file) as gpuready's own writer does it. It walks folder
    by folder from O(root) without following a link, so a link swapped in meanwhile fails the
    task and nothing is written outside O(root); a temporary file beside the original is
    exchanged with it, mode and owner kept.
  - Comments, key order and formatting of the config are kept; only the runtime's lines are added.
  - The first change keeps the original as C(FILE.gpuready.bak); later runs keep that copy.
    The record of what gpuready added is kept in C(CONFIG.gpuready.json), naming the files by
    their paths under O(root), as the command line does.
  - C(default_runtime_name) is never changed; GPU pods opt in through a RuntimeClass.
  - A config that is not valid TOML, has an unknown C(version), or is missing, a drop-in path that
    holds a file gpuready did not write, or an unreadable record fails the host with gpuready's
    own message (file, line and column), and nothing is written.
version_added: 0.1.0
author:
  - gpuready maintainers (@gpuready)
requirements:
  - gpuready on the controller (not on the node)
options:
  state:
    description:
      - V(present) registers the runtime; V(absent) removes exactly what gpuready added (as its
        record says), whatever the other options say.
    type: str
    choices: ["present", "absent"]
    default: present
  runtime_name:
    description:
      - The runtime's name in containerd, which is also the RuntimeClass C(handler).
    type: str
    default: nvidia
  binary:
    description:
      - The runtime's executable, written as C(options.BinaryName).
    type: str
    default: /usr/bin/nvidia-container-runtime
  systemd_cgroup:
    description:
      - C(options.SystemdCgroup) of the runtime. V(inherit) keeps runc's setting.
    type: str
    choices: ["true", "false", "inherit"]
    default: "true"
  config:
    description:
      - The containerd config to edit, a node path (looked up under O(root)).
    type: str
    default: /etc/containerd/config.toml
  enable_cdi:
    description:
      - Also set C(enable_cdi = true) and C(cdi_spec_dirs) on the CRI table (containerd 1.7 and
        later read them).
    type: bool
    default: false
  drop_in:
    description:
      - Register the runtime in a drop-in file the config imports instead of in the config
        itself, as C(gpuready configure --drop-in) does. V(true) names gpuready's default,
        C(/etc/containerd/conf.d/99-nvidia.toml); an absolute node path names another file.
      - The config gets an C(imports) entry naming the drop-in only when no entry (such as the
        glob C(conf.d/*.toml)) already covers it. On containerd 1.x, which replaces a whole
        plugin table from an imported file, the drop-in carries a copy of the CRI table; the
        node's C(containerd --version) decides, else the config's C(version).
      - A file at that path that gpuready did not write fails the host; nothing is written.
      - Unset (or V(false)), the runtime goes into the config itself.
    type: str
  restart:
    description:
      - Run the change as gpuready's restart transaction, as C(gpuready configure --restart) (or
        C(unconfigure --restart)) does, once per host, driven from the controller
        (pre-flight, write, restart, verify, roll back).
      - "Pre-flight: the candidate files are copied into a temporary folder on the node and the
        node's own C(containerd config dump) must load them with the runtime (or, for
        O(state=absent), without it) and lose no other runtime; otherwise nothing is written."
      - Then the files are written and, only when the effective config changed, O(restart_command)
        runs on the node; the CRI at O(address) must answer again, and what containerd loaded is
        compared with the files (C(gpuready verify --live)), then O(probe) if asked.
      - On any failure after the write, every file is put back as it was, containerd is restarted
        on them, and the host fails saying so.
      - The CRI is asked from the controller through M(gpuready.node.cri_call) on the node.
      - In check mode only the pre-flight runs.
    type: bool
    default: false
  restart_command:
    description:
      - The shell command that restarts containerd on the node (O(restart=true) only).
    type: str
    default: systemctl restart containerd
  restart_timeout:
    description:
      - Seconds the restart command, and the CRI's coming back, may take (O(restart=true) only).
    type: float
    default: 60
  address:
    description:
      - The CRI socket of the node's containerd, a node path (not looked up under O(root))
        (O(restart=true) only).
    type: str
    default: unix:///run/containerd/containerd.sock
  probe:
    description:
      - After the restart, also start and remove a pod sandbox through the runtime's handler,
        as C(gpuready verify --live --probe) does (O(restart=true) only). The node's pause image
        must be present or pullable.
    type: bool
    default: false
  root:
    description:
      - Look every node path up under this folder on the node, as C(gpuready --root) does.
    type: str
    default: /
attributes:
  check_mode:
    support: full
    description: Reads the node's files and reports what would change; writes nothing.
  diff_mode:
    support: full
    description: Shows each changed file (config, drop-in) as it is and as it will be.
  action:
    support: full
    description: Runs on the controller as an action plugin.
notes:
  - A second run with the same options reports C(changed=false) and leaves the files untouched;
    so does a second run with O(state=absent).
seealso:
  - module: gpuready.node.gpuready_facts
"""

EXAMPLES = r"""
- name: Register the NVIDIA runtime with containerd
  gpuready.node.containerd_runtime:

- name: Register it under another name, keeping runc's cgroup driver, with CDI enabled
  gpuready.node.containerd_runtime:
    runtime_name: nvidia-cdi
    systemd_cgroup: inherit
    enable_cdi: true

- name: Register it in /etc/containerd/conf.d/99-nvidia.toml, imported by the config
  gpuready.node.containerd_runtime:
    drop_in: true

- name: Show what would change on each node
  gpuready.node.containerd_runtime:
  check_mode: true
  diff: true

- name: Take back exactly what gpuready added
  gpuready.node.containerd_runtime:
    state: absent

- name: Register, restart containerd, verify what it loaded, roll back on any failure
  gpuready.node.containerd_runtime:
    restart: true
    probe: true
"""

RETURN = r"""
path:
  description: The node path of the main config.
  returned: success
  type: str
  sample: /etc/containerd/config.toml
summary:
  description: What was done, or why nothing had to be done.
  returned: success
  type: str
  sample: runtime nvidia already registered at [plugins.cri.containerd.runtimes.nvidia]
notes:
  description: Things to know either way, such as a cgroup driver that differs from runc's.
  returned: success
  type: list
  elements: str
written:
  description: Whether any file on the node was written or removed (never in check mode).
  returned: success
  type: bool
  sample: true
files:
  description:
    - Each file gpuready planned for (the config, the drop-in, backups it takes back), in the
      order they are written; gpuready's record is left out.
  returned: success
  type: list
  elements: dict
  contains:
    path:
      description: The file's node path (under O(root)).
      type: str
      sample: /etc/containerd/conf.d/99-nvidia.toml
    changed:
      description: Whether the file changes.
      type: bool
    written:
      description: Whether it was written or removed.
      type: bool
    removed:
      description: Whether the change removes the file.
      type: bool
    summary:
      description: What changes in it, or why nothing does.
      type: str
      sample: write drop-in with runtime nvidia
restart:
  description: The restart transaction's steps and how it ended (O(restart=true) only).
  returned: when O(restart=true)
  type: dict
  contains:
    steps:
      description: Each step in order (C(pre-flight), C(write), C(restart), C(cri),
        C(verify --live), C(probe), C(roll back), C(restart again), ...).
      type: list
      elements: dict
      sample:
        - name: pre-flight
          ok: true
          detail: "containerd's config dump of the new files loads nvidia, runc"
    written:
      description: Whether the files were written.
      type: bool
    restarted:
      description: Whether containerd was restarted on the change.
      type: bool
    rolled_back:
      description: Whether every file was put back and containerd restarted on them.
      type: bool
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 (after the documentation)

from ansible_collections.gpuready.node.plugins.module_utils.specs import (  # noqa: E402
    CONTAINERD_RUNTIME_SPEC,
)


def main():
    """Refuse to run on a node: the action plugin of the same name does the work."""
    module = AnsibleModule(argument_spec=CONTAINERD_RUNTIME_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuready.node.containerd_runtime runs on the controller as an action")


if __name__ == "__main__":
    main()
