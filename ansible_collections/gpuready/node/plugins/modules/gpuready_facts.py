#!/usr/bin/python
# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the gpuready_facts action; the work happens on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpuready_facts
short_description: The node's gpuready doctor result as facts
description:
  - Runs C(gpuready doctor) on the node's files and returns its result as the C(gpuready) fact.
  - The controller copies the files doctor reads (the containerd config and every file its
    C(imports) name, the CDI specs in C(/etc/cdi) and C(/var/run/cdi), the kubelet's config, the
    toolkit's RuntimeClass) into a temporary folder and runs doctor there with the node's own
    containerd release. The node needs only its OS Python and nothing installed.
  - Problems name the files where they are on the node.
  - The owner of containerd's configuration (k3s, RKE2, the GPU Operator, plain containerd) is
    detected from the node's marker files, and doctor reads the config that owner makes
    containerd read.
  - A node whose config is missing or unreadable is reported with verdict V(unreadable); a file the
    node cannot hand over (too large, not a regular file) fails the host with gpuready's message.
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
      - The NVIDIA runtime's name in containerd.
    type: str
    default: nvidia
  containerd_version:
    description:
      - The containerd release whose rules apply (C(1.7), C(2.1)). Default is the node's own, from
        C(containerd --version) on the node, else the config's version.
    type: str
attributes:
  check_mode:
    support: full
    description: Only reads; the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
  facts:
    support: full
    description: Sets the C(gpuready) fact.
  action:
    support: full
    description: Runs on the controller as an action plugin.
seealso:
  - module: gpuready.node.containerd_runtime
"""

EXAMPLES = r"""
- name: Read each node's doctor result
  gpuready.node.gpuready_facts:

- name: Stop on nodes with errors
  ansible.builtin.assert:
    that: gpuready.verdict in ['clean', 'warnings']
    fail_msg: "{{ gpuready.problems | map(attribute='message') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts set.
  returned: success
  type: complex
  contains:
    gpuready:
      description: The doctor result of the node.
      returned: success
      type: complex
      contains:
        verdict:
          description: V(clean), V(warnings), V(errors) or V(unreadable).
          type: str
          sample: clean
        errors:
          description: The number of error-level problems.
          type: int
          sample: 0
        warnings:
          description: The number of warnings.
          type: int
          sample: 1
        error:
          description: Why the node could not be read (verdict V(unreadable)), else null.
          type: str
        problems:
          description: Each problem, as C(gpuready doctor --format json) gives it.
          type: list
          elements: dict
        files:
          description: The node paths of the files doctor read.
          type: list
          elements: str
        containerd_version:
          description: The containerd release whose rules were applied, or null for the config's.
          type: str
          sample: "1.6"
        owner:
          description:
            - Who owns containerd's configuration on the node (C(containerd), C(k3s), C(rke2),
              C(gpu-operator), ...), as C(gpuready doctor) detects it, with the evidence
              (C(why)), the config containerd reads (C(config)) and where to edit (C(edit_paths)).
          type: dict
        root:
          description: The O(root) the node paths were looked up under.
          type: str
          sample: /
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 (after the documentation)

from ansible_collections.gpuready.node.plugins.module_utils.specs import (  # noqa: E402
    GPUREADY_FACTS_SPEC,
)


def main():
    """Refuse to run on a node: the action plugin of the same name does the work."""
    module = AnsibleModule(argument_spec=GPUREADY_FACTS_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuready.node.gpuready_facts runs on the controller as an action")


if __name__ == "__main__":
    main()
