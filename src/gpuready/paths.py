"""The node paths gpuready knows (looked up on the node through :class:`gpuready.node.Node`)."""

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


# Folders whose every file the engine reads as config, whatever its name (crio.conf.d(5): every
# file in /etc/crio/crio.conf.d, in lexical order): a backup or a record kept there would be read
# as CRI-O config (the backup undoing the change it backs up, a JSON record stopping CRI-O).
READ_WHOLE_FOLDERS = frozenset({"crio.conf.d"})

# gpuready's backup of a file it changed, kept beside it (:func:`kept_beside`).
BACKUP_SUFFIX = ".gpuready.bak"


def kept_beside(path: Path, suffix: str) -> Path:
    """Where gpuready keeps its own file (backup, record) for ``path``: beside it
    (``config.toml.gpuready.bak``), or for a file in a folder read whole, in the folder above,
    named after both (``/etc/crio/crio.conf.d.99-nvidia.toml.gpuready.bak``)."""
    folder = path.parent
    if folder.name in READ_WHOLE_FOLDERS:
        return folder.parent / f"{folder.name}.{path.name}{suffix}"
    return path.with_name(path.name + suffix)
