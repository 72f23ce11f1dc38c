"""Whether a CDI spec still describes its node, judged from the node's files alone (no GPU).

A spec is written once and names host files by path; the node changes under it. A spec is
*stale* when, on a node that shows an NVIDIA driver:

1. a host path it names does not exist: a mount's ``hostPath``, a device node (``hostPath``,
   else ``path``), a hook's ``path``. The CDI library stats every device node and the runtime
   bind-mounts every ``hostPath``, so one missing file fails every container that asks for a
   device of the spec, not only the device that names it (the spec-level edits go to every
   device);
2. the driver version in its library names (``libcuda.so.<version>``,
   ``libnvidia-ml.so.<version>``) is not the node's: ``/sys/module/nvidia/version`` (the loaded
   module), else ``/proc/driver/nvidia/version``, else the newest ``libcuda.so.<version>`` in
   the library folders (found the way ``cdi generate`` finds it);
3. the GPUs it names (``/dev/nvidia<N>`` in a device's edits, ``GPU-<uuid>`` device names) or its
   MIG devices (``<gpu>:<mig>`` names, tied to a GPU instance and compute instance by the
   capability nodes they list) are not those the node shows (``/proc/driver/nvidia/gpus/*``,
   ``/dev/nvidia<N>``, ``/proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/ci<C>``);
4. the node has driver libraries (``libcuda.so.<version>``) and the spec mounts none: it was
   written before the driver was installed.

Device nodes are judged only where the node shows them (``/dev/nvidia*``, or
``/proc/driver/nvidia``): an offline image (``--root /mnt/node-image``) holds the driver's files
but no ``/dev`` nodes, and a fresh spec is not stale there. A missing ``/dev/nvidia-uvm*`` alone
means the ``nvidia-uvm`` module is not loaded yet (it loads on first use, or with
``nvidia-modprobe -u -c=0``): reported with that fix, and not a reason to regenerate the spec,
which would then lack the nodes CUDA needs.

A node with no driver evidence at all (no ``/proc/driver/nvidia``, no ``/sys/module/nvidia``, no
``libcuda.so.*``, no ``/dev/nvidia*``) cannot be judged: a spec written ahead with ``--gpus N``
or ``--inventory`` names files the driver will bring. Such a spec is *not yet verifiable*,
never stale. Unless its intent record (:mod:`gpuready.cdi.intent`) says its GPUs were detected
on the node (NVML, device nodes): then the driver was there and is gone (removed, and the node
rebooted), and the spec is stale.

Every read goes through the :class:`~gpuready.node.Node` (bounded, confined to ``--root``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpuready.cdi import node as facts
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.records import Factory, MutableRecord, Record

SYS_MODULE_VERSION = "/sys/module/nvidia/version"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_DRIVER = "/proc/driver/nvidia"
SYS_MODULE = "/sys/module/nvidia"
PROC_CAPABILITIES = "/proc/driver/nvidia/capabilities"
# The evidence that a driver is (or was just) on the node, as the message names it.
EVIDENCE = (PROC_DRIVER, SYS_MODULE, "libcuda.so.*", "/dev/nvidia*")
GPU_DEVICE = re.compile(r"/dev/nvidia(\d+)")
CAP_DEVICE = re.compile(r"/dev/nvidia-caps/nvidia-cap(\d+)")
MIG_NAME = re.compile(r"(\d+):(\d+)")
FIRMWARE = re.compile(r"/lib/firmware/nvidia/(\d+\.\d+(?:\.\d+)?)/")
MODULE_VERSION_TEXT = re.compile(r"(\d+\.\d+(?:\.\d+)?)")
PROC_VERSION_TEXT = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")
# Where a spec's GPUs came from (its intent record's ``detected.source``, as the generator's
# NodeInventory.source says) when they were detected on the node rather than planned.
DETECTED_SOURCES = ("NVML", "device nodes")
UVM_DEVICE = re.compile(r"/dev/nvidia-uvm(-tools)?")
UVM_FIX = "nvidia-modprobe -u -c=0"
# At most this many vanished paths are named in a message (the count says how many more).
SHOWN_PATHS = 8


class NodeDriver(Record):
    """What the node shows of an NVIDIA driver: its version, where that was read, the evidence."""

    version: str | None = None
    source: str = ""
    evidence: tuple[str, ...] = ()
    library_version: str | None = None  # the newest libcuda.so.<version> the node holds
    shows_devices: bool = False  # /dev/nvidia* or /proc/driver/nvidia: device nodes are judged

    @property
    def present(self) -> bool:
        """True when anything on the node shows a driver."""
        return bool(self.evidence)


def node_driver(node: Node) -> NodeDriver:
    """The node's driver as its files show it (see the module docstring for the order)."""
    evidence = []
    proc = node.is_dir(node.path_text(PROC_DRIVER))
    if proc:
        evidence.append(PROC_DRIVER)
    if node.is_dir(node.path_text(SYS_MODULE)):
        evidence.append(SYS_MODULE)
    library = facts.find_driver(node)  # the generator's own search of the library folders
    if library.version:
        evidence.append(f"libcuda.so.{library.version}")
    devices = _dev_nvidia(node)
    if devices:
        evidence.append(f"/dev/{devices[0]}")
    version, source = _module_version(node)
    if version is None and library.version:
        version, source = library.version, "the driver libraries (libcuda.so.*)"
    return NodeDriver(version, source, tuple(evidence), library.version,
                      proc or bool(devices))


def _dev_nvidia(node: Node) -> list[str]:
    try:
        return sorted(name for name in node.listdir(node.path_text("/dev"))
                      if name.startswith("nvidia"))
    except (OSError, InputError):
        return []


def _module_version(node: Node) -> tuple[str | None, str]:
    """The loaded kernel module's version: ``/sys/module/nvidia/version``, else the proc file."""
    for path, pattern in ((SYS_MODULE_VERSION, MODULE_VERSION_TEXT),
                          (PROC_VERSION, PROC_VERSION_TEXT)):
        try:
            text = node.read_text_or_none(node.path_text(path), kind=FileKind.NODE_FACT)
        except InputError:
            continue
        match = pattern.search(text or "")
        if match:
            return match.group(1), path
    return None, ""


class HostPath(Record):
    """A host path a spec names, and what names it (``mount``, ``device node``, ``hook``)."""

    path: str
    what: str


class Staleness(MutableRecord):
    """The verdict on one spec file: stale (and why), not yet verifiable, or current."""

    file: Path
    verifiable: bool
    driver: NodeDriver
    vanished: list[HostPath] = Factory(list)
    spec_version: str | None = None
    gpus_gone: list[str] = Factory(list)
    gpus_new: list[str] = Factory(list)
    mig_gone: list[str] = Factory(list)
    mig_new: list[str] = Factory(list)
    absent: int = 0  # host paths missing on a node that cannot be judged
    driver_gone: str = ""  # where the GPUs were detected, when the node shows no driver now
    no_libraries: bool = False  # the node has libcuda.so.<version>, the spec mounts none
    uvm_missing: list[str] = Factory(list)  # /dev/nvidia-uvm* (module not loaded)

    @property
    def version_differs(self) -> bool:
        """True when the spec's libraries are of another driver version than the node's."""
        return bool(self.spec_version and self.driver.version
                    and self.spec_version != self.driver.version)

    @property
    def stale(self) -> bool:
        """True when the spec no longer describes the node."""
        return self.verifiable and bool(self.uvm_missing or self.regenerate)

    @property
    def regenerate(self) -> bool:
        """True when regenerating the spec is the fix (stale for another reason than an
        ``nvidia-uvm`` module not loaded yet)."""
        return self.verifiable and bool(
            self.vanished or self.version_differs or self.gpus_gone or self.gpus_new
            or self.mig_gone or self.mig_new or self.driver_gone or self.no_libraries)

    @property
    def only_uvm(self) -> bool:
        """True when the one reason is the missing ``/dev/nvidia-uvm*`` nodes."""
        return self.stale and not self.regenerate

    def reasons(self) -> list[str]:
        """One clause per reason, in the order they were checked."""
        found = []
        if self.driver_gone:
            found.append(f"its GPUs were detected on the node ({self.driver_gone}), and the node "
                         "shows no NVIDIA driver now (no /proc/driver/nvidia, /sys/module/nvidia, "
                         "libcuda.so.* or /dev/nvidia*: removed?)")
        if self.version_differs:
            found.append(f"it was written for driver {self.spec_version}, but the node has "
                         f"{self.driver.version} ({self.driver.source})")
        if self.no_libraries:
            found.append(f"the node has driver libraries (libcuda.so.{self.driver.library_version})"
                         " and it mounts none (written before the driver was installed?)")
        if self.vanished:
            shown = ", ".join(f"{p.path} ({p.what})" for p in self.vanished[:SHOWN_PATHS])
            more = len(self.vanished) - SHOWN_PATHS
            found.append(f"{len(self.vanished)} host path(s) it names are gone: {shown}"
                         + (f" and {more} more" if more > 0 else ""))
        if self.gpus_gone:
            found.append("it names GPU(s) the node no longer shows: " + ", ".join(self.gpus_gone))
        if self.gpus_new:
            found.append("the node shows GPU(s) it does not name: " + ", ".join(self.gpus_new))
        if self.mig_gone:
            found.append("its MIG device(s) are gone (the GPU was re-partitioned): "
                         + ", ".join(self.mig_gone))
        if self.mig_new:
            found.append("the node has MIG device(s) it does not list: " + ", ".join(self.mig_new))
        if self.uvm_missing:
            found.append(f"{', '.join(self.uvm_missing)} (device node) missing: the nvidia-uvm "
                         f"module is not loaded ({UVM_FIX} loads it and makes the nodes)")
        return found


def host_paths(spec: dict[str, Any]) -> list[HostPath]:
    """Every host path ``spec`` (decoded, as :func:`gpuready.cdi.validate.decode_spec` gives
    it) names, each once, in the order the spec names them."""
    found: dict[str, HostPath] = {}
    for edits in _all_edits(spec):
        for mount in edits["mounts"]:
            found.setdefault(mount["hostPath"], HostPath(mount["hostPath"], "mount"))
        for node in edits["deviceNodes"]:
            path = node["hostPath"] or node["path"]
            found.setdefault(path, HostPath(path, "device node"))
        for hook in edits["hooks"]:
            found.setdefault(hook["path"], HostPath(hook["path"], "hook"))
    return [p for p in found.values() if p.path.startswith("/")]


def _all_edits(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec["containerEdits"]] + [d["containerEdits"] for d in spec["devices"]]


def spec_driver_version(spec: dict[str, Any]) -> str | None:
    """The driver version the spec's library (else firmware) file names encode, if any."""
    mounts = [m["hostPath"] for edits in _all_edits(spec) for m in edits["mounts"]]
    for path in mounts:
        match = facts.VERSIONED.fullmatch(path.rsplit("/", 1)[-1])
        if match:
            return match.group(2)
    for path in mounts:
        match = FIRMWARE.match(path)
        if match:
            return match.group(1)
    return None


def detected_on_node(intent: dict[str, Any] | None) -> bool:
    """True when an intent record says the spec's GPUs were detected on the node."""
    detected = intent.get("detected") if isinstance(intent, dict) else None
    return isinstance(detected, dict) and detected.get("source") in DETECTED_SOURCES


def assess(node: Node, file: Path, spec: dict[str, Any],
           driver: NodeDriver | None = None, *, intent: dict[str, Any] | None = None
           ) -> Staleness:
    """Judge the decoded ``spec`` read from ``file`` against ``node``; ``intent`` is the spec's
    intent record when one describes it (:func:`gpuready.cdi.intent.recorded_intent`)."""
    driver = driver or node_driver(node)
    missing = [p for p in host_paths(spec) if not node.lexists(node.path_text(p.path))]
    if not driver.present:
        if detected_on_node(intent):
            return Staleness(file, True, driver, vanished=missing,
                             driver_gone=str(intent["detected"]["source"]))
        return Staleness(file, False, driver, absent=len(missing))
    if not driver.shows_devices:  # an offline image: no /dev to judge
        missing = [p for p in missing if p.what != "device node"]
    uvm = [p.path for p in missing if p.what == "device node" and UVM_DEVICE.fullmatch(p.path)]
    missing = [p for p in missing if p.path not in uvm]
    found = Staleness(file, True, driver, vanished=missing,
                      spec_version=spec_driver_version(spec), uvm_missing=uvm)
    found.no_libraries = bool(driver.library_version) and not any(
        m["hostPath"].rsplit("/", 1)[-1].startswith("libcuda.so")
        for edits in _all_edits(spec) for m in edits["mounts"])
    _compare_gpus(node, spec, found)
    _compare_mig(node, spec, found)
    return found


def _compare_gpus(node: Node, spec: dict[str, Any], found: Staleness) -> None:
    """GPUs by minor number (``/dev/nvidia<N>``) and by UUID (``GPU-…`` device names)."""
    named = {int(m.group(1)) for device in spec["devices"]
             for n in device["containerEdits"]["deviceNodes"]
             for m in [GPU_DEVICE.fullmatch(n["path"])] if m}
    proc = facts.proc_gpus(node)
    if node.is_dir(node.path(facts.PROC_GPUS)):
        shown: set[int] | None = set(proc)
    else:
        shown = set(facts.gpu_minors(node)) or None  # no GPU evidence at all: not judged
    if shown is not None and named:
        found.gpus_gone += [f"/dev/nvidia{m}" for m in sorted(named - shown)]
        found.gpus_new += [f"/dev/nvidia{m}" for m in sorted(shown - named)]
    uuids = {gpu.uuid for gpu in proc.values() if gpu.uuid}
    if uuids:
        found.gpus_gone += [d["name"] for d in spec["devices"]
                            if d["name"].startswith("GPU-") and d["name"] not in uuids]


def node_mig_instances(node: Node) -> set[str] | None:
    """``gpu0/gi1/ci0`` for every compute instance the driver shows; None when the node has no
    MIG capability folder (nothing to compare with)."""
    base = node.path(PROC_CAPABILITIES)
    if not node.is_dir(base):
        return None
    return {"/".join(p.relative_to(base).parts[i] for i in (0, 2, 3))
            for p in node.glob(base / "gpu*" / "mig" / "gi*" / "ci*" / "access")}


def _compare_mig(node: Node, spec: dict[str, Any], found: Staleness) -> None:
    """MIG devices: those the spec lists (``0:1``), tied by their capability nodes to the
    driver's ``gpu<N>/gi<G>/ci<C>`` (its ``mig-minors`` table), against what the node shows."""
    shown = node_mig_instances(node)
    if shown is None:
        return
    by_minor = {minor: key.rsplit("/", 1)[0] for key, minor in facts.mig_cap_minors(node).items()
                if key.count("/") == 3}  # gpu0/gi1/ci0/access: a compute instance
    listed: dict[str, str] = {}
    for device in spec["devices"]:
        if not MIG_NAME.fullmatch(device["name"]):
            continue
        keys = [by_minor.get(int(m.group(1))) for n in device["containerEdits"]["deviceNodes"]
                for m in [CAP_DEVICE.fullmatch(n["path"])] if m]
        key = next((k for k in keys if k), None)
        listed[device["name"]] = key or ""
    for name, key in sorted(listed.items()):
        if not key or key not in shown:
            found.mig_gone.append(f"{name} ({key})" if key else name)
    keys_listed = set(listed.values())
    if listed or shown:
        found.mig_new += sorted(shown - keys_listed)


def read_decoded(node: Node, file: Path) -> dict[str, Any] | None:
    """The spec at ``file`` decoded as the loader decodes it; None when it cannot be read."""
    from gpuready.cdi.document import parse_spec_text
    from gpuready.cdi.validate import decode_spec, recent_spec

    try:
        text = node.read_text(file, kind=FileKind.CDI_SPEC)
    except InputError:
        return None
    decoded = recent_spec(text, as_json=file.suffix == ".json")
    if decoded is not None:  # the scan of this run decoded it a moment ago
        return decoded
    document = parse_spec_text(text, file)
    if document.data is None:
        return None
    spec, _ = decode_spec(document.data, file=str(file))
    return spec
