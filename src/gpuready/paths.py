"""The node paths gpuready knows (looked up on the node through :class:`gpuready.node.Node`)."""

from __future__ import annotations

from pathlib import PurePosixPath

CONTAINERD_CONFIG = PurePosixPath("/etc/containerd/config.toml")
CONTAINERD_DROPIN_DIR = PurePosixPath("/etc/containerd/conf.d")
FIXTURE_BASE = PurePosixPath("/opt/fixtures/gpu-airgap/containerd/config.toml.base")
TOOLKIT_DIR = PurePosixPath("/root/toolkit")
CDI_SPEC = PurePosixPath("/etc/cdi/nvidia.yaml")
CDI_DIRS = (PurePosixPath("/etc/cdi"), PurePosixPath("/var/run/cdi"))
KUBELET_CONFIG = PurePosixPath("/var/lib/kubelet/config.yaml")
NVIDIA_RUNTIME_BINARY = PurePosixPath("/usr/bin/nvidia-container-runtime")
CONTAINERD_SOCKET = PurePosixPath("/run/containerd/containerd.sock")

