#!/usr/bin/python
# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Write, make or remove one of the node's files so that no symbolic link can redirect it.

Every write of the collection's action plugins on a node goes through this module, with the
node's OS Python alone; the walk itself is in ``module_utils/node_files.py``.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_file
short_description: Write, make or remove a node's file without following a link swapped in
description:
  - Writes a file on the node (O(state=file)), makes a folder and the folders above it
    (O(state=directory)), or removes a file or an empty folder (O(state=absent)), the way
    gpuready's own writer does on the command line.
  - The node path O(path) is looked up under O(root) and its links are followed as the node's
    own reads follow them; a link that leads out of O(root) fails the task and nothing is
    written through it.
  - Then the root is opened and each folder of the resolved path from the one above it without
    following a link (C(O_NOFOLLOW), C(O_DIRECTORY)), and the file is read, created, renamed and
    removed by name inside the last folder. A folder swapped for a symbolic link meanwhile fails
    the task with one line naming the path; nothing is written outside O(root).
  - A new file is written beside its target in the same folder, C(fsync)ed, given the old
    file's mode and owner, and exchanged with the old one in one step (C(renameat2)); when what
    came out is not what the controller read, it is exchanged back and the task fails.
  - The action plugins of M(gpuready.node.containerd_runtime), M(gpuready.node.gpuready_setup)
    and M(gpuready.node.gpuready_facts) write through it; it needs only the node's OS Python
    (3.9 and newer) on Linux.
version_added: 0.1.0
author:
  - gpuready maintainers (@gpuready)
options:
  path:
    description:
      - The node path (absolute), looked up under O(root).
    type: str
    required: true
  root:
    description:
      - The folder the node's files are looked up under; C(/) for the node itself.
    type: str
    default: /
  state:
    description:
      - V(file) writes O(content); V(directory) makes the folder and the folders above it;
        V(absent) removes the file, or the folder while it is empty (a folder that holds
        anything is left, unchanged).
    type: str
    default: file
    choices: [file, directory, absent]
  content:
    description:
      - The file's new bytes, base64 encoded. Required with O(state=file).
    type: str
  checksum:
    description:
      - The SHA-1 of the file as the controller read it. With it, the file is written or
        removed only while it is still that file; a file changed or gone since fails the task.
    type: str
  exclusive:
    description:
      - Write a new file only; a file already there fails the task.
    type: bool
    default: false
  mode:
    description:
      - The permission bits of a new file (an existing file keeps its own, and its owner).
    type: str
    default: "0644"
  backup:
    description:
      - Keep the file as it is in C(FILE.gpuready.bak) before writing, only when no such backup
        exists yet (it keeps the file as it was before gpuready first changed it).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: The file is read and the checks made; nothing is written.
  diff_mode:
    support: none
    description: The action plugins that write through it show the differences.
notes:
  - Linux only (C(renameat2) through the C library, C(dir_fd) calls). Without C(renameat2) the
    file is checked and then renamed.
seealso:
  - module: gpuready.node.containerd_runtime
"""

EXAMPLES = r"""
- name: Write a file over the one the controller read, keeping gpuready's backup
  gpuready.node.node_file:
    root: /
    path: /etc/containerd/config.toml
    content: "{{ 'version = 2\n' | b64encode }}"
    checksum: 0b6bd9e8fc4e5b4e4bb4fa5d0d38ea4c33d59e14
    backup: true

- name: Make a folder inside a node's tree
  gpuready.node.node_file:
    root: /srv/node-image
    path: /etc/containerd/conf.d
    state: directory
"""

RETURN = r"""
node_path:
  description: Where the file is on the node, O(path) under O(root), as given.
  returned: always
  type: str
  sample: /srv/node-image/etc/containerd/config.toml
"""

import base64  # noqa: E402 (after the documentation)
import binascii  # noqa: E402
import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpuready.node.plugins.module_utils.node_files import (  # noqa: E402
    NodeFileError,
    Target,
    make_folders,
    remove,
    write_file,
)
from ansible_collections.gpuready.node.plugins.module_utils.specs import (  # noqa: E402
    NODE_FILE_SPEC,
)


def act(params, check_mode):
    """Do what the task asks; its ``changed``. Every failure is :class:`NodeFileError`."""
    target = Target(params["root"], params["path"])
    try:
        if params["state"] == "directory":
            return make_folders(target, check_mode=check_mode)
        if params["state"] == "absent":
            return remove(target, checksum=params["checksum"], check_mode=check_mode)
        return write_file(target, _content(params, target), checksum=params["checksum"],
                          exclusive=params["exclusive"], mode=_mode(params, target),
                          backup=params["backup"], check_mode=check_mode)
    except OSError as error:
        raise NodeFileError(f"{target.shown}: {error.strerror or error}") from None


def _content(params, target):
    if params["content"] is None:
        raise NodeFileError(f"{target.shown}: state=file needs content")
    try:
        return base64.b64decode(params["content"], validate=True)
    except (binascii.Error, ValueError):
        raise NodeFileError(f"{target.shown}: content is not base64") from None


def _mode(params, target):
    try:
        return int(params["mode"], 8) & 0o7777
    except ValueError:
        raise NodeFileError(f"{target.shown}: mode {params['mode']} is not octal") from None


def main():
    """The module's entry point."""
    module = AnsibleModule(argument_spec=NODE_FILE_SPEC, supports_check_mode=True)
    # not returned as "path": Ansible would add that path's owner and mode, looked up outside
    # the root
    shown = os.path.join(module.params["root"], module.params["path"].lstrip("/"))
    try:
        changed = act(module.params, module.check_mode)
    except NodeFileError as error:
        module.fail_json(msg=" ".join(str(error).split()), node_path=shown)
    module.exit_json(changed=changed, node_path=shown)


if __name__ == "__main__":
    main()
