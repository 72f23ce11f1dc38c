"""What a spec is generated from: the GPUs and driver files of a node, found or described.

An *inventory file* describes a node that cannot be asked (its GPUs are not visible yet, or the
spec is built elsewhere). It is YAML or JSON::

    driverVersion: "550.54.15"            # optional; with it, libraries are planned, not searched
    libraryDir: /usr/lib/x86_64-linux-gnu # optional; where the node keeps the driver libraries
    libraries: [libcuda.so, libnvidia-ml.so, libnvidia-ptxjitcompiler.so]   # optional
    binaries: [/usr/bin/nvidia-smi]       # optional; node paths mounted read-only
    gpus:                                 # required (may be empty with --gpus N)
      - index: 0                          # required, unique, 0 or more
        uuid: GPU-8f6c1a3e-...            # optional; needed for names by UUID
        minor: 0                          # optional; /dev/nvidia<minor>, default the index

At most :data:`MAX_GPUS` GPUs, with indexes and minors below it (``--gpus`` too): the driver
numbers GPU device nodes ``/dev/nvidia0`` to ``/dev/nvidia254``; a larger count is refused
rather than turned into a spec nobody can load.

Every library is mounted as ``<libraryDir>/<name>.<driverVersion>``; the default list holds the
three libraries every driver release ships. A planned spec names files the node must have:
a mount whose host file is missing makes every GPU container fail to start.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready import yamlfile
from gpuready.cdi.names import device_name_problem
from gpuready.errors import InputError, UsageError
from gpuready.node import HOST, FileKind, Node
from gpuready.records import Record

DEFAULT_LIBRARY_DIR = "/usr/lib/x86_64-linux-gnu"
CORE_LIBRARIES = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so")
INVENTORY_KEYS = ("driverVersion", "libraryDir", "libraries", "binaries", "gpus")
GPU_KEYS = ("index", "uuid", "minor")


class MigDevice(Record):
    """A MIG device of a GPU: its index on the GPU, UUID, and the device nodes it needs."""

    index: int
    uuid: str | None
    device_nodes: tuple[str, ...]


class Gpu(Record):
    """One GPU as the spec names it: NVML index, UUID when known, device nodes (node paths)."""

    index: int
    minor: int
    uuid: str | None = None
    device_nodes: tuple[str, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()


class Driver(Record):
    """The driver files containers get: library and other files (node paths), and the version."""

    version: str | None = None
    libraries: tuple[str, ...] = ()
    other_files: tuple[str, ...] = ()


class NodeInventory(Record):
    """Everything the generator needs; ``source`` says where it came from (for messages)."""

    gpus: tuple[Gpu, ...]
    driver: Driver
    control_devices: tuple[str, ...]
    source: str


class InventoryFile(Record):
    """A parsed inventory file: GPU indexes with their UUID and minor, and the driver plan."""

    gpus: dict[int, tuple[str | None, int]]
    driver_version: str | None
    library_dir: str
    libraries: tuple[str, ...]
    binaries: tuple[str, ...]

    def planned_driver(self) -> Driver | None:
        """The driver files the node will have, or None when the file gives no version."""
        if not self.driver_version:
            return None
        libraries = tuple(str(PurePosixPath(self.library_dir) / f"{name}.{self.driver_version}")
                          for name in self.libraries)
        return Driver(self.driver_version, libraries, self.binaries)


MAX_GPUS = 255  # /dev/nvidia255 is the driver's control device, nvidiactl


def check_gpu_count(count: int, where: str) -> None:
    """Refuse a GPU count (or index) above the documented maximum, naming where it came from."""
    if count > MAX_GPUS:
        raise UsageError(f"{where}: at most {MAX_GPUS} GPUs per node (the driver's "
                         f"/dev/nvidia0 to /dev/nvidia{MAX_GPUS - 1}); got {count}")


def default_device_nodes(minor: int) -> tuple[str, ...]:
    """The device node of GPU ``minor``: ``/dev/nvidia<minor>``."""
    return (f"/dev/nvidia{minor}",)


def load_inventory(path: Path, *, node: Node = HOST) -> InventoryFile:
    """Read and check an inventory file; every mistake is an InputError naming the field."""
    text = node.read_text(path, kind=FileKind.INVENTORY)
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                path, f"invalid JSON: {error.msg}", line=error.lineno, column=error.colno
            ) from None
    else:
        data = yamlfile.load(text, path)
    return parse_inventory(data, path)


def parse_inventory(data: Any, path: Path | str) -> InventoryFile:
    """Check parsed inventory data (see the module docstring for the format)."""
    if not isinstance(data, dict):
        raise InputError(path, "an inventory is a mapping with a 'gpus' list")
    _only_keys(data, INVENTORY_KEYS, "", path)
    gpus = _gpus(data.get("gpus") or [], path)
    version = data.get("driverVersion")
    if version is not None and not (isinstance(version, str) and version.strip()):
        raise InputError(path, "driverVersion: write it as a quoted string, e.g. \"550.54.15\"")
    library_dir = _absolute(data.get("libraryDir", DEFAULT_LIBRARY_DIR), "libraryDir", path)
    libraries = _names(data.get("libraries", list(CORE_LIBRARIES)), "libraries", path)
    binaries = tuple(_absolute(item, "binaries", path)
                     for item in _names(data.get("binaries", []), "binaries", path))
    return InventoryFile(gpus, version, library_dir, libraries, binaries)


def _gpus(items: Any, path: Path | str) -> dict[int, tuple[str | None, int]]:
    if not isinstance(items, list):
        raise InputError(path, "gpus: expected a list")
    gpus: dict[int, tuple[str | None, int]] = {}
    if len(items) > MAX_GPUS:
        raise InputError(path, f"gpus: {len(items)} listed; at most {MAX_GPUS} per node")
    for position, item in enumerate(items):
        where = f"gpus[{position}]"
        if not isinstance(item, dict):
            raise InputError(path, f"{where}: expected a mapping with index and uuid")
        _only_keys(item, GPU_KEYS, where, path)
        index = _count(item.get("index"), f"{where}.index", path, below=MAX_GPUS)
        if index in gpus:
            raise InputError(path, f"{where}.index: GPU {index} is listed twice")
        uuid = item.get("uuid")
        if uuid is not None and (not isinstance(uuid, str) or device_name_problem(uuid)):
            raise InputError(path, f"{where}.uuid: {uuid!r} is not a usable UUID (GPU-...)")
        minor = _count(item.get("minor", index), f"{where}.minor", path, below=MAX_GPUS)
        gpus[index] = (uuid, minor)
    return gpus


def _only_keys(data: dict[str, Any], allowed: tuple[str, ...], where: str, path) -> None:
    for key in data:
        if key not in allowed:
            place = f"{where}." if where else ""
            raise InputError(path, f"{place}{key}: unknown key (known: {', '.join(allowed)})")


def _count(value: Any, where: str, path: Path | str, *, below: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(path, f"{where}: expected a whole number, 0 or more")
    if value >= below:
        raise InputError(path, f"{where}: {value} is too large (at most {below - 1})")
    return value


def _names(value: Any, where: str, path: Path | str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InputError(path, f"{where}: expected a list of names")
    return tuple(value)


def _absolute(value: Any, where: str, path: Path | str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise InputError(path, f"{where}: expected an absolute node path, got {value!r}")
    return value
