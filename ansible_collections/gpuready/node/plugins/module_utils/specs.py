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
    restart=dict(type="bool", default=False),
    restart_command=dict(type="str", default="systemctl restart containerd"),
    restart_timeout=dict(type="float", default=60),
    address=dict(type="str", default="unix:///run/containerd/containerd.sock"),
    probe=dict(type="bool", default=False),
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

CRI_CALL_SPEC = dict(
    socket=dict(type="str", default="/run/containerd/containerd.sock"),
    method=dict(type="str", required=True),
    request=dict(type="str", default=""),
    timeout=dict(type="float", default=10),
)

NODE_FILE_SPEC = dict(
    path=dict(type="str", required=True),
    root=dict(type="str", default="/"),
    state=dict(type="str", default="file", choices=["file", "directory", "absent"]),
    content=dict(type="str"),
    checksum=dict(type="str"),
    exclusive=dict(type="bool", default=False),
    mode=dict(type="str", default="0644"),
    backup=dict(type="bool", default=False),
)
