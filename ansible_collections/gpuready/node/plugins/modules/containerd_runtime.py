#!/usr/bin/python
# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the containerd_runtime action; the work happens on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: containerd_runtime
short_description: Register the NVIDIA container runtime in a node's containerd config
description:
  - Adds the NVIDIA runtime to the runtime table that the config's C(version) reads
    (1 C(plugins.cri), 2 C(plugins."io.containerd.grpc.v1.cri"), 3 and 4
    C(plugins."io.containerd.cri.v1.runtime")), starting from runc's table, then sets
    C(options.BinaryName) and C(options.SystemdCgroup), exactly as C(gpuready configure) does.
  - The edit is computed on the controller with the gpuready library, so the node needs only its
    OS Python (3.9 and newer) and nothing installed. The node's file is read with
    M(ansible.builtin.stat) and M(ansible.builtin.slurp) and written back with
    M(ansible.builtin.copy) (a temporary file renamed over the original, mode and owner kept).
  - Comments, key order and formatting of the config are kept; only the runtime's lines are added.
  - The first change keeps the original as C(FILE.gpuready.bak); later runs keep that copy.
  - C(default_runtime_name) is never changed; GPU pods opt in through a RuntimeClass.
  - A config that is not valid TOML, has an unknown C(version), or is missing fails the host with
    gpuready's own message (file, line and column), and nothing is written.
version_added: 0.1.0
author:
  - gpuready contributors
requirements:
  - gpuready on the controller (not on the node)
options:
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
  root:
    description:
      - Look every node path up under this folder on the node, as C(gpuready --root) does.
    type: str
    default: /
attributes:
  check_mode:
    support: full
    description: Reads the node's file and reports what would change; writes nothing.
  diff_mode:
    support: full
    description: Shows the config's lines as they are and as they will be.
  action:
    support: full
    description: Runs on the controller as an action plugin.
notes:
  - A second run with the same options reports C(changed=false) and leaves the file untouched.
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

- name: Show what would change on each node
  gpuready.node.containerd_runtime:
  check_mode: true
  diff: true
"""

RETURN = r"""
path:
  description: The node path of the config that was checked.
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
  description: Whether the file on the node was replaced (never in check mode).
  returned: success
  type: bool
  sample: true
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
