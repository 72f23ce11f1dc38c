#!/usr/bin/python
# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the gpuready_setup action; the work happens on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpuready_setup
short_description: The registration contract's eight steps on a node, as gpuready setup runs them
description:
  - Runs C(gpuready setup) for the node - stage the base config, register the runtime with its
    options, record the default runtime (C(default.txt)), validate the TOML (C(parsed.txt)), keep
    or generate the CDI spec (C(cdi-keys.txt)), write the RuntimeClass and the five-line
    C(report.txt) - and checks the result. Every value in the report files is parsed from that
    node's own files.
  - The files setup reads are copied from the node into a temporary folder on the controller,
    setup runs there with the gpuready library, and each file it changed is written back with
    M(gpuready.node.node_file), which follows no link out of O(root), not even one swapped in
    while it writes. The node needs only its OS Python and nothing installed.
  - The base config is the node's existing config, else the air-gap base
    C(/opt/fixtures/gpu-airgap/containerd/config.toml.base) on the node, else the node's own
    C(containerd config default), else gpuready's built-in version 2 base.
  - The CDI spec describes O(gpus) GPUs, else one per C(/dev/nvidia<N>) on the node, else one.
    Driver libraries on the node are not looked for; an existing spec is kept (and checked).
  - A failed contract check fails the host with what was found.
version_added: 0.1.0
author:
  - gpuready maintainers (@gpuready)
requirements:
  - gpuready on the controller (not on the node)
options:
  root:
    description:
      - Look every node path up under this folder on the node, as C(gpuready --root) does.
    type: str
    default: /
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
  toolkit_dir:
    description:
      - The node folder for the contract's report files.
    type: str
    default: /root/toolkit
  gpus:
    description:
      - How many GPUs a generated CDI spec describes.
    type: int
attributes:
  check_mode:
    support: full
    description: Computes every step and check; writes nothing.
  diff_mode:
    support: full
    description: One diff per file that would change.
  action:
    support: full
    description: Runs on the controller as an action plugin.
notes:
  - A second run reports C(changed=false) and writes nothing.
seealso:
  - module: gpuready.node.containerd_runtime
  - module: gpuready.node.gpuready_facts
"""

EXAMPLES = r"""
- name: The contract on every GPU node
  gpuready.node.gpuready_setup:
  register: contract

- name: Show the steps
  ansible.builtin.debug:
    var: contract.steps
"""

RETURN = r"""
steps:
  description: One line per step, as C(gpuready setup) prints it.
  returned: always
  type: list
  elements: str
  sample: ["[8/8] verification report: /root/toolkit/report.txt: created"]
checks:
  description: The contract's checks of the result, each with C(name), C(ok) and C(detail).
  returned: always
  type: list
  elements: dict
changed_files:
  description: The node paths that were (in check mode, would be) written.
  returned: always
  type: list
  elements: str
notes:
  description: Things to know either way, such as a cgroup driver that differs from runc's.
  returned: always
  type: list
  elements: str
runtimeclass:
  description: The RuntimeClass manifest for the cluster, as written on the node.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 (after the documentation)

from ansible_collections.gpuready.node.plugins.module_utils.specs import GPUREADY_SETUP_SPEC  # noqa: E402


def main():
    """Refuse to run on a node: the action plugin of the same name does the work."""
    module = AnsibleModule(argument_spec=GPUREADY_SETUP_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuready.node.gpuready_setup runs on the controller as an action")


if __name__ == "__main__":
    main()
