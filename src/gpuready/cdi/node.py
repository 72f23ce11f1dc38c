"""Facts read from a node's files under ``--root``: GPU device nodes, DRI nodes, driver files.

Only reads; every path returned is the node's path (``/dev/nvidia0``), never the ``root``-prefixed
one, so a spec generated from a sandbox names what the node will have.

How DRI nodes are tied to a GPU (they are added to that GPU's device only):

1. ``/sys/class/drm/<card|renderD>N/device/driver`` is a link whose last part is ``nvidia``, and
   ``/sys/class/drm/<name>/device`` is a link whose last part is the GPU's PCI address;
2. otherwise ``/dev/dri/by-path/pci-<address>-card`` (or ``-render``) links to the node.

The PCI address of a GPU, its UUID and its minor number come from
``/proc/driver/nvidia/gpus/<address>/information``. Links are read, never followed, so absolute
link targets inside a sandbox do not escape it. A DRI node that cannot be tied to a GPU is left
out, and only nodes that exist under ``/dev/dri`` are named.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpuready.cdi.inventory import Driver, Gpu, MigDevice
from gpuready.paths import under_root

GPU_NODE = re.compile(r"nvidia(\d+)")
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                   "/dev/nvidia-modeset")
PLANNED_CONTROL_DEVICES = CONTROL_DEVICES[:3]
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                "/usr/lib", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64")
DRIVER_LIBRARIES = (
    "libcuda.so", "libcudadebugger.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so", "libnvidia-opencl.so", "libnvidia-gpucomp.so",
    "libnvidia-allocator.so", "libnvidia-cfg.so", "libnvidia-pkcs11.so",
    "libnvidia-pkcs11-openssl3.so", "libnvcuvid.so", "libnvidia-encode.so",
    "libnvidia-opticalflow.so",
)
DRIVER_BINARIES = ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump",
                   "/usr/bin/nvidia-persistenced", "/usr/bin/nvidia-cuda-mps-control",
                   "/usr/bin/nvidia-cuda-mps-server")
VERSIONED = re.compile(r"(libcuda|libnvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)")
PROC_GPUS = "/proc/driver/nvidia/gpus"
MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"


@dataclass(frozen=True)
class ProcGpu:
    """What the driver's proc file says about one GPU."""

    pci_address: str
    minor: int
    uuid: str | None


def gpu_minors(root: Path | str) -> list[int]:
    """Minor numbers of the ``/dev/nvidia<N>`` nodes under ``root``, ascending."""
    dev = under_root(root, "/dev")
    try:
        entries = os.listdir(dev)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(GPU_NODE.fullmatch, entries) if m)


def proc_gpus(root: Path | str) -> dict[int, ProcGpu]:
    """GPUs described in ``/proc/driver/nvidia/gpus/*/information``, by minor number."""
    folder = under_root(root, PROC_GPUS)
    found: dict[int, ProcGpu] = {}
    for entry in sorted(folder.glob("*/information")):
        fields = _colon_fields(entry)
        minor = fields.get("Device Minor", "")
        if minor.isdigit():
            uuid = fields.get("GPU UUID") or None
            found[int(minor)] = ProcGpu(entry.parent.name.lower(), int(minor), uuid)
    return found


def _colon_fields(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    pairs = (line.partition(":") for line in lines)
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def existing(root: Path | str, node_paths: tuple[str, ...]) -> tuple[str, ...]:
    """The node paths among ``node_paths`` that exist under ``root``."""
    return tuple(p for p in node_paths if os.path.lexists(under_root(root, p)))


def dri_nodes_by_pci(root: Path | str) -> dict[str, list[str]]:
    """DRI nodes (``/dev/dri/card1``, ``/dev/dri/renderD128``) of NVIDIA GPUs, by PCI address."""
    found: dict[str, list[str]] = {}
    drm = under_root(root, "/sys/class/drm")
    for entry in sorted(drm.glob("*")) if drm.is_dir() else []:
        if not re.fullmatch(r"card\d+|renderD\d+", entry.name):
            continue
        if _link_name(entry / "device" / "driver") != "nvidia":
            continue
        address = _link_name(entry / "device")
        if address:
            found.setdefault(address.lower(), []).append(f"/dev/dri/{entry.name}")
    return {pci: [n for n in nodes if os.path.lexists(under_root(root, n))]
            for pci, nodes in found.items()}


def dri_nodes_by_path(root: Path | str, pci_address: str) -> list[str]:
    """DRI nodes named by ``/dev/dri/by-path/pci-<address>-{card,render}`` links."""
    nodes = []
    for suffix in ("card", "render"):
        link = under_root(root, f"/dev/dri/by-path/pci-{pci_address}-{suffix}")
        name = _link_name(link)
        if name and os.path.lexists(under_root(root, f"/dev/dri/{name}")):
            nodes.append(f"/dev/dri/{name}")
    return nodes


def _link_name(path: Path) -> str | None:
    try:
        return PurePosixPath(os.readlink(path)).name
    except OSError:
        return None


def mig_cap_minors(root: Path | str) -> dict[str, int]:
    """``gpu0/gi1/access`` → cap minor, from the driver's ``mig-minors`` table."""
    try:
        text = under_root(root, MIG_MINORS).read_text(encoding="utf-8")
    except OSError:
        return {}
    table = {}
    for line in text.splitlines():
        name, _, minor = line.strip().rpartition(" ")
        if minor.isdigit():
            table[name] = int(minor)
    return table


def mig_device_nodes(caps: dict[str, int], gpu_minor: int, gpu_instance: int,
                     compute_instance: int) -> tuple[str, ...]:
    """The parent GPU node and the two capability nodes a MIG device needs (those known)."""
    nodes = [f"/dev/nvidia{gpu_minor}"]
    for key in (f"gpu{gpu_minor}/gi{gpu_instance}/access",
                f"gpu{gpu_minor}/gi{gpu_instance}/ci{compute_instance}/access"):
        if key in caps:
            nodes.append(f"/dev/nvidia-caps/nvidia-cap{caps[key]}")
    return tuple(nodes)


def gpus_from_device_nodes(root: Path | str) -> tuple[Gpu, ...]:
    """The GPUs whose ``/dev/nvidia<N>`` nodes exist under ``root``.

    Indexes follow PCI address order when the driver's proc files give every address (that is
    the order NVML numbers GPUs in), else minor-number order.
    """
    minors = gpu_minors(root)
    proc = proc_gpus(root)
    if minors and all(m in proc for m in minors):
        minors.sort(key=lambda m: proc[m].pci_address)
    dri = dri_nodes_by_pci(root)
    gpus = []
    for index, minor in enumerate(minors):
        info = proc.get(minor)
        nodes = [f"/dev/nvidia{minor}"]
        if info:
            nodes += dri.get(info.pci_address) or dri_nodes_by_path(root, info.pci_address)
        gpus.append(Gpu(index, minor, info.uuid if info else None, tuple(nodes)))
    return tuple(gpus)


def gpu_nodes_for(root: Path | str, minor: int, pci_address: str | None) -> tuple[str, ...]:
    """``/dev/nvidia<minor>`` and, when they can be tied to it, the GPU's DRI nodes."""
    nodes = [f"/dev/nvidia{minor}"]
    if pci_address:
        nodes += (dri_nodes_by_pci(root).get(pci_address.lower())
                  or dri_nodes_by_path(root, pci_address.lower()))
    return tuple(nodes)


def mig_devices_for(root: Path | str, minor: int,
                    records: list[tuple[int, str | None, int, int]]) -> tuple[MigDevice, ...]:
    """MIG devices from (index, uuid, gpu instance, compute instance) records."""
    caps = mig_cap_minors(root)
    return tuple(MigDevice(index, uuid, mig_device_nodes(caps, minor, gi, ci))
                 for index, uuid, gi, ci in records)


def find_driver(root: Path | str, driver_root: str = "/") -> Driver:
    """The driver's libraries, binaries and firmware under ``driver_root`` (itself under root).

    The version is read from the file names (``libcuda.so.550.54.15``); only libraries of that
    version are taken, so a left-over older library is not mounted.
    """
    base = under_root(root, driver_root)
    version, folder = _driver_version(base)
    if version is None:
        return Driver()
    libraries = tuple(f"{folder}/{name}.{version}" for name in DRIVER_LIBRARIES
                      if (under_root(base, folder) / f"{name}.{version}").is_file())
    firmware = sorted(str(PurePosixPath("/lib/firmware/nvidia", version, p.name)) for p in
                      under_root(base, f"/lib/firmware/nvidia/{version}").glob("*.bin"))
    binaries = existing(base, DRIVER_BINARIES)
    return Driver(version, libraries, binaries + tuple(firmware))


def _driver_version(base: Path) -> tuple[str | None, str]:
    for folder in LIBRARY_DIRS:
        path = under_root(base, folder)
        if path.is_symlink() or not path.is_dir():
            continue  # /lib64 -> /usr/lib64 on merged-/usr systems: read it once
        versions = sorted((m.group(2) for m in map(VERSIONED.fullmatch, os.listdir(path))
                           if m), key=_numeric)
        if versions:
            return versions[-1], folder
    return None, ""


def _numeric(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
