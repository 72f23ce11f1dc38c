"""How GPUs reach pods besides a RuntimeClass, as the kubelet's folders on a node show it.

- NVIDIA's DRA driver (k8s-dra-driver-gpu) runs kubelet plugins named after its drivers
  (``gpu.nvidia.com``, ``compute-domain.nvidia.com``); each keeps its folder, with its socket
  and checkpoint, under the kubelet's plugin folder (``DriverPluginPath`` =
  ``/var/lib/kubelet/plugins/<driver>``, the chart's ``kubeletPluginsDirectoryPath``), and
  writes a CDI spec per claim in ``/var/run/cdi`` (its ``CDI_ROOT``).
- NVIDIA's device plugin (k8s-device-plugin) serves ``/var/lib/kubelet/device-plugins/
  nvidia-<resource>.sock`` (``nvidia-gpu.sock`` for ``nvidia.com/gpu``) while it runs.

Only the kubelet's default root folder (``/var/lib/kubelet``) is looked at.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuready.node import Node

KUBELET_ROOT = PurePosixPath("/var/lib/kubelet")
PLUGINS_DIR = KUBELET_ROOT / "plugins"
DEVICE_PLUGINS_DIR = KUBELET_ROOT / "device-plugins"
GPU_DRIVER = "gpu.nvidia.com"
DRA_DRIVERS = (GPU_DRIVER, "compute-domain.nvidia.com")
DEVICE_PLUGIN_SOCKETS = "nvidia-*.sock"
DRA_CDI_DIR = PurePosixPath("/var/run/cdi")


def dra_driver_folders(node: Node) -> list[PurePosixPath]:
    """The NVIDIA DRA drivers' kubelet plugin folders on the node (node paths)."""
    folders = [PLUGINS_DIR / name for name in DRA_DRIVERS]
    return [folder for folder in folders if node.is_dir(node.path_text(folder))]


def device_plugin_sockets(node: Node) -> list[PurePosixPath]:
    """The sockets NVIDIA's device plugin serves on the node while it runs (node paths)."""
    found = node.glob(node.path(DEVICE_PLUGINS_DIR / DEVICE_PLUGIN_SOCKETS))
    return [PurePosixPath(str(node.node_path(path))) for path in found if node.is_socket(path)]
