# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""The argument specs of the collection's modules, in one place.

Both sides read them: the module files (for ``ansible-doc`` and ``ansible-test``) and the action
plugins, which validate a task's arguments on the controller before they touch a node.
"""

from __future__ import annotations

CONTAINERD_RUNTIME_SPEC = dict(
    state=dict(type="str", default="present", choices=["present", "absent"]),
    runtime_name=dict(type="str", default="nvidia"),
    binary=dict(type="str", default="/usr/bin/nvidia-container-runtime"),
    systemd_cgroup=dict(type="str", default="true", choices=["true", "false", "inherit"]),
    config=dict(type="str", default="/etc/containerd/config.toml"),
    enable_cdi=dict(type="bool", default=False),
    drop_in=dict(type="str"),
    root=dict(type="str", default="/"),
)

GPUREADY_FACTS_SPEC = dict(
    root=dict(type="str", default="/"),
    runtime_name=dict(type="str", default="nvidia"),
    containerd_version=dict(type="str"),
)

GPUREADY_SETUP_SPEC = dict(
    root=dict(type="str", default="/"),
    runtime_name=dict(type="str", default="nvidia"),
    binary=dict(type="str", default="/usr/bin/nvidia-container-runtime"),
    systemd_cgroup=dict(type="str", default="true", choices=["true", "false", "inherit"]),
    toolkit_dir=dict(type="str", default="/root/toolkit"),
    gpus=dict(type="int"),
)
