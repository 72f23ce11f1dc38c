"""Node paths and the sandbox root that may prefix them."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

CONTAINERD_CONFIG = PurePosixPath("/etc/containerd/config.toml")
CONTAINERD_DROPIN_DIR = PurePosixPath("/etc/containerd/conf.d")
FIXTURE_BASE = PurePosixPath("/opt/fixtures/gpu-airgap/containerd/config.toml.base")
TOOLKIT_DIR = PurePosixPath("/root/toolkit")
CDI_SPEC = PurePosixPath("/etc/cdi/nvidia.yaml")
CDI_DIRS = (PurePosixPath("/etc/cdi"), PurePosixPath("/var/run/cdi"))
KUBELET_CONFIG = PurePosixPath("/var/lib/kubelet/config.yaml")
NVIDIA_RUNTIME_BINARY = PurePosixPath("/usr/bin/nvidia-container-runtime")
CONTAINERD_SOCKET = PurePosixPath("/run/containerd/containerd.sock")


def under_root(root: Path | str, node_path: PurePosixPath | str) -> Path:
    """Map an absolute path on the node to the same path below ``root``.

    ``under_root("/tmp/sandbox", "/etc/cdi")`` is ``/tmp/sandbox/etc/cdi``; with root ``/`` the path
    is unchanged. Relative paths are returned as given (they are the user's own).
    """
    node = PurePosixPath(node_path)
    if not node.is_absolute():
        return Path(node)
    return Path(root).joinpath(*node.parts[1:])
