"""Facts read from a node's files under ``--root``: GPU device nodes, DRI nodes, driver files.

Only reads; every path returned is the node's path (``/dev/nvidia0``), never the ``root``-prefixed
one, so a spec generated from a sandbox names what the node will have.

How DRI nodes are tied to a GPU (they are added to that GPU's device only):

1. ``/sys/class/drm/<card|renderD>N/device/driver`` is a link whose last part is ``nvidia``, and
   ``/sys/class/drm/<name>/device`` is a link whose last part is the GPU's PCI address;
2. otherwise ``/dev/dri/by-path/pci-<address>-card`` (or ``-render``) links to the node.

The PCI address of a GPU, its UUID and its minor number come from
``/proc/driver/nvidia/gpus/<address>/information``. Every path is looked up through the
:class:`~gpuready.node.Node`, so absolute link targets inside a sandbox do not escape it. A
DRI node that cannot be tied to a GPU is left out, and only nodes that exist under ``/dev/dri``
are named.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from gpuready.cdi.inventory import Driver, Gpu, MigDevice
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.records import Record

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


class ProcGpu(Record):
    """What the driver's proc file says about one GPU."""

    pci_address: str
    minor: int
    uuid: str | None


def gpu_minors(node: Node) -> list[int]:
    """Minor numbers of the ``/dev/nvidia<N>`` nodes on the node, ascending."""
    try:
        entries = node.listdir(node.path("/dev"))
    except (OSError, InputError):
        return []
    return sorted(int(m.group(1)) for m in map(GPU_NODE.fullmatch, entries) if m)


def proc_gpus(node: Node) -> dict[int, ProcGpu]:
    """GPUs described in ``/proc/driver/nvidia/gpus/*/information``, by minor number."""
    found: dict[int, ProcGpu] = {}
    for entry in node.glob(node.path(PROC_GPUS) / "*" / "information"):
        fields = _colon_fields(node, entry)
        minor = fields.get("Device Minor", "")
        if minor.isdigit():
            uuid = fields.get("GPU UUID") or None
            found[int(minor)] = ProcGpu(entry.parent.name.lower(), int(minor), uuid)
    return found


def _colon_fields(node: Node, path: Path) -> dict[str, str]:
    try:
        lines = node.read_text(path, kind=FileKind.NODE_FACT).splitlines()
    except InputError:
        return {}
    pairs = (line.partition(":") for line in lines)
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def existing(node: Node, node_paths: tuple[str, ...]) -> tuple[str, ...]:
    """The node paths among ``node_paths`` that exist on the node."""
    return tuple(p for p in node_paths if node.lexists(node.path(p)))


def dri_nodes_by_pci(node: Node) -> dict[str, list[str]]:
    """DRI nodes (``/dev/dri/card1``, ``/dev/dri/renderD128``) of NVIDIA GPUs, by PCI address."""
    found: dict[str, list[str]] = {}
    for entry in node.glob(node.path("/sys/class/drm") / "*"):
        if not re.fullmatch(r"card\d+|renderD\d+", entry.name):
            continue
        if node.readlink_name(entry / "device" / "driver") != "nvidia":
            continue
        address = node.readlink_name(entry / "device")
        if address:
            found.setdefault(address.lower(), []).append(f"/dev/dri/{entry.name}")
    return {pci: [n for n in nodes if node.lexists(node.path(n))]
            for pci, nodes in found.items()}


def dri_nodes_by_path(node: Node, pci_address: str) -> list[str]:
    """DRI nodes named by ``/dev/dri/by-path/pci-<address>-{card,render}`` links."""
    nodes = []
    for suffix in ("card", "render"):
        name = node.readlink_name(node.path(f"/dev/dri/by-path/pci-{pci_address}-{suffix}"))
        if name and node.lexists(node.path(f"/dev/dri/{name}")):
            nodes.append(f"/dev/dri/{name}")
    return nodes


def mig_cap_minors(node: Node) -> dict[str, int]:
    """``gpu0/gi1/access`` → cap minor, from the driver's ``mig-minors`` table."""
    try:
        text = node.read_text(node.path(MIG_MINORS), kind=FileKind.NODE_FACT)
    except InputError:
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


def gpus_from_device_nodes(node: Node) -> tuple[Gpu, ...]:
    """The GPUs whose ``/dev/nvidia<N>`` nodes exist on the node.

    Indexes follow PCI address order when the driver's proc files give every address (that is
    the order NVML numbers GPUs in), else minor-number order.
    """
    minors = gpu_minors(node)
    proc = proc_gpus(node)
    if minors and all(m in proc for m in minors):
        minors.sort(key=lambda m: proc[m].pci_address)
    dri = dri_nodes_by_pci(node)
    gpus = []
    for index, minor in enumerate(minors):
        info = proc.get(minor)
        nodes = [f"/dev/nvidia{minor}"]
        if info:
            nodes += dri.get(info.pci_address) or dri_nodes_by_path(node, info.pci_address)
        gpus.append(Gpu(index, minor, info.uuid if info else None, tuple(nodes)))
    return tuple(gpus)


def gpu_nodes_for(node: Node, minor: int, pci_address: str | None) -> tuple[str, ...]:
    """``/dev/nvidia<minor>`` and, when they can be tied to it, the GPU's DRI nodes."""
    nodes = [f"/dev/nvidia{minor}"]
    if pci_address:
        nodes += (dri_nodes_by_pci(node).get(pci_address.lower())
                  or dri_nodes_by_path(node, pci_address.lower()))
    return tuple(nodes)


def mig_devices_for(node: Node, minor: int,
                    records: list[tuple[int, str | None, int, int]]) -> tuple[MigDevice, ...]:
    """MIG devices from (index, uuid, gpu instance, compute instance) records."""
    caps = mig_cap_minors(node)
    return tuple(MigDevice(index, uuid, mig_device_nodes(caps, minor, gi, ci))
                 for index, uuid, gi, ci in records)


def find_driver(node: Node, driver_root: str = "/") -> Driver:
    """The driver's libraries, binaries and firmware under ``driver_root`` (itself on the node).

    The version is read from the file names (``libcuda.so.550.54.15``); only libraries of that
    version are taken, so a left-over older library is not mounted. The driver root is a root of
    its own (a driver container's file system): its absolute links stay inside it.
    """
    # "/" is the node's own root: its memory of what each path is (inside Node.reading) serves
    # the search too
    base = node if driver_root == "/" else Node(node.resolve(node.path(driver_root)))
    version, folder = _driver_version(base)
    if version is None:
        return Driver()
    libraries = tuple(f"{folder}/{name}.{version}" for name in DRIVER_LIBRARIES
                      if base.is_file(base.path(folder) / f"{name}.{version}"))
    firmware = sorted(str(PurePosixPath("/lib/firmware/nvidia", version, p.name)) for p in
                      base.glob(base.path(f"/lib/firmware/nvidia/{version}") / "*.bin"))
    binaries = existing(base, DRIVER_BINARIES)
    return Driver(version, libraries, binaries + tuple(firmware))


def _driver_version(base: Node) -> tuple[str | None, str]:
    for folder in LIBRARY_DIRS:
        path = base.path_text(folder)
        if base.is_link(path) or not base.is_dir(path):
            continue  # /lib64 -> /usr/lib64 on merged-/usr systems: read it once
        versions = sorted((m.group(2) for m in map(VERSIONED.fullmatch, base.listdir(path))
                           if m), key=_numeric)
        if versions:
            return versions[-1], folder
    return None, ""


def _numeric(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
