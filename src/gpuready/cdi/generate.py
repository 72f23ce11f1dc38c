"""Generate an NVIDIA CDI spec, with or without a GPU on this machine.

Where the GPUs come from, first match wins:

1. ``gpus`` and/or an inventory file (:mod:`gpuready.cdi.inventory`): the spec a node *will*
   need, for an air-gapped node before its GPUs are visible or for a build pipeline;
2. NVML, when ``nvidia-ml-py`` is installed and the driver answers;
3. the ``/dev/nvidia<N>`` device nodes (and driver proc files) on the node.

Driver files are searched under ``driver_root`` unless an inventory plans them. Every path in
the spec is the node's own path: the :class:`~gpuready.node.Node` only says where to look.

The spec is built as data (:func:`build_spec`), its ``cdiVersion`` is the minimum its content
needs (the validator's own function), and :func:`render` turns it into YAML or JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from gpuready.cdi import intent, nvml
from gpuready.cdi import node as facts
from gpuready.cdi.intent import GenerateOptions
from gpuready.cdi.inventory import (
    Driver,
    Gpu,
    InventoryFile,
    NodeInventory,
    check_gpu_count,
    default_device_nodes,
    load_inventory,
)
from gpuready.cdi.versions import minimum_version
from gpuready.errors import InputError, UsageError, VerificationError
from gpuready.node import FileKind, Node
from gpuready.paths import CDI_SPEC
from gpuready.plan import Plan

KIND = "nvidia.com/gpu"
HOOK_BINARY = "/usr/bin/nvidia-cdi-hook"
MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "rbind", "rprivate")
# the intent's own names (the record is read without this module)
STRATEGIES = intent.STRATEGIES
DEFAULT_STRATEGIES = intent.DEFAULT_STRATEGIES
FORMATS = intent.FORMATS
PLACEHOLDER_SOURCE = intent.PLACEHOLDER_SOURCE


def collect_inventory(node: Node, *, gpus: int | None = None,
                      inventory: InventoryFile | None = None, driver_root: str = "/",
                      use_nvml: bool = True) -> NodeInventory | None:
    """The GPUs and driver files to write a spec for; None when nothing is found or given."""
    if gpus is not None or inventory is not None:
        return planned_inventory(node, gpus=gpus, inventory=inventory, driver_root=driver_root)
    report = nvml.read_gpus() if use_nvml else None
    if report is not None:
        return _from_nvml(node, report, driver_root)
    found = facts.gpus_from_device_nodes(node)
    if not found:
        return None
    return NodeInventory(found, facts.find_driver(node, driver_root),
                         facts.existing(node, facts.CONTROL_DEVICES), "device nodes")


def planned_inventory(node: Node, *, gpus: int | None,
                      inventory: InventoryFile | None, driver_root: str = "/") -> NodeInventory:
    """The GPUs ``0..gpus-1`` (or those the inventory lists), with the inventory's UUIDs."""
    listed = inventory.gpus if inventory else {}
    if gpus is not None and gpus < 1:
        raise UsageError("--gpus: give 1 or more")
    if gpus is not None:
        check_gpu_count(gpus, "--gpus")
    if gpus is not None and listed and max(listed) >= gpus:
        raise UsageError(f"the inventory lists GPU {max(listed)}, but --gpus is {gpus}")
    indexes = range(gpus) if gpus is not None else sorted(listed)
    planned = []
    for index in indexes:
        uuid, minor = listed.get(index, (None, index))
        planned.append(Gpu(index, minor, uuid, default_device_nodes(minor)))
    driver = ((inventory.planned_driver() if inventory else None)
              or facts.find_driver(node, driver_root))
    control = facts.PLANNED_CONTROL_DEVICES + tuple(
        d for d in facts.existing(node, facts.CONTROL_DEVICES)
        if d not in facts.PLANNED_CONTROL_DEVICES)
    return NodeInventory(tuple(planned), driver, control, "inventory" if inventory else "--gpus")


def _from_nvml(node: Node, report: nvml.NvmlReport, driver_root: str) -> NodeInventory:
    gpus = tuple(
        Gpu(g.index, g.minor, g.uuid, facts.gpu_nodes_for(node, g.minor, g.pci_address),
            facts.mig_devices_for(node, g.minor, list(g.mig)))
        for g in report.gpus)
    driver = facts.find_driver(node, driver_root)
    return NodeInventory(gpus, driver, facts.existing(node, facts.CONTROL_DEVICES), "NVML")


def device_names(gpu: Gpu, strategies: Iterable[str]) -> list[str]:
    """The names a GPU gets: ``0`` (index), ``GPU-…`` (uuid), ``gpu0`` (type-index)."""
    names = []
    for strategy in strategies:
        name = {"index": str(gpu.index), "uuid": gpu.uuid,
                "type-index": f"gpu{gpu.index}"}[strategy]
        if name and name not in names:
            names.append(name)
    return names


def mig_names(gpu: Gpu, strategies: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(name, device nodes) of each MIG device: ``0:1``, ``MIG-…``, ``mig0:1``."""
    found = []
    for mig in gpu.mig_devices:
        for strategy in strategies:
            name = {"index": f"{gpu.index}:{mig.index}", "uuid": mig.uuid,
                    "type-index": f"mig{gpu.index}:{mig.index}"}[strategy]
            if name:
                found.append((name, mig.device_nodes))
    return found


def build_spec(inventory: NodeInventory,
               options: GenerateOptions = GenerateOptions(),  # noqa: B008 (frozen)
               *, hook_binary_present: bool = False) -> dict[str, Any]:
    """The spec as data: one device per GPU and name, ``all``, and the shared edits."""
    devices: list[dict[str, Any]] = []
    every_node: list[str] = []
    for gpu in inventory.gpus:
        every_node += [n for n in gpu.device_nodes if n not in every_node]
        devices += [_device(name, gpu.device_nodes)
                    for name in device_names(gpu, options.strategies)]
        devices += [_device(name, nodes) for name, nodes in mig_names(gpu, options.strategies)]
    if every_node:
        devices.append(_device("all", tuple(every_node)))
    with_hooks = options.hooks if options.hooks is not None else hook_binary_present
    spec: dict[str, Any] = {"cdiVersion": "", "kind": KIND, "devices": devices,
                            "containerEdits": _shared_edits(inventory, options.driver_root,
                                                            with_hooks=with_hooks)}
    spec["cdiVersion"] = minimum_version(spec)
    return spec


def _device(name: str, nodes: Sequence[str]) -> dict[str, Any]:
    return {"name": name, "containerEdits": {"deviceNodes": [{"path": p} for p in nodes]}}


def _shared_edits(inventory: NodeInventory, driver_root: str, *,
                  with_hooks: bool) -> dict[str, Any]:
    edits: dict[str, Any] = {"env": ["NVIDIA_VISIBLE_DEVICES=void"]}
    if inventory.control_devices:
        edits["deviceNodes"] = [{"path": p} for p in inventory.control_devices]
    driver = inventory.driver
    files = driver.libraries + driver.other_files
    if files:
        edits["mounts"] = [_mount(path, driver_root) for path in files]
    hooks = _hooks(driver) if with_hooks else []
    if hooks:
        edits["hooks"] = hooks
    return edits


def _mount(path: str, driver_root: str) -> dict[str, Any]:
    host = str(PurePosixPath(driver_root, path.lstrip("/"))) if driver_root != "/" else path
    return {"hostPath": host, "containerPath": path, "options": list(MOUNT_OPTIONS)}


def _hooks(driver: Driver) -> list[dict[str, Any]]:
    folders = sorted({str(PurePosixPath(lib).parent) for lib in driver.libraries})
    hooks = []
    libcuda = next((lib for lib in driver.libraries
                    if PurePosixPath(lib).name.startswith("libcuda.so.")), None)
    if libcuda:
        link = f"libcuda.so.1::{PurePosixPath(libcuda).parent}/libcuda.so"
        hooks.append(_hook(["create-symlinks", "--link", link]))
    if folders:
        hooks.append(_hook(["update-ldcache"] + [a for f in folders for a in ("--folder", f)]))
    return hooks


def _hook(args: list[str]) -> dict[str, Any]:
    return {"hookName": "createContainer", "path": HOOK_BINARY,
            "args": ["nvidia-cdi-hook", *args]}


def render(spec: dict[str, Any], fmt: str = "yaml") -> str:
    """The spec as text: YAML starting with ``---`` (``safe_dump``), or indented JSON."""
    if fmt == "json":
        return json.dumps(spec, indent=2) + "\n"
    if fmt != "yaml":
        raise UsageError(f"unknown format {fmt!r}; use yaml or json")
    return yaml.safe_dump(spec, sort_keys=False, explicit_start=True, default_flow_style=False,
                          width=1000)


def hook_binary_present(node: Node) -> bool:
    """True when ``/usr/bin/nvidia-cdi-hook`` exists on the node."""
    return node.exists(node.path(HOOK_BINARY))


def generate_spec(node: Node = "/", *, gpus: int | None = None,
                  inventory_path: Path | str | None = None,
                  options: GenerateOptions = GenerateOptions(),  # noqa: B008 (frozen)
                  use_nvml: bool = True) -> tuple[dict[str, Any], NodeInventory]:
    """Collect the node's GPUs (or plan them) and build the spec; InputError when there are none.

    Raises :class:`InputError` when no GPU is found on the node and neither ``gpus`` nor an
    inventory was given.
    """
    planned = load_inventory(Path(inventory_path), node=node) if inventory_path else None
    found = collect_inventory(node, gpus=gpus, inventory=planned,
                              driver_root=options.driver_root, use_nvml=use_nvml)
    if found is None:
        raise InputError(node.path("/dev"), "no GPU device node (/dev/nvidia0, ...) "
                         "found; pass --gpus N or --inventory FILE to plan the spec")
    return build_spec(found, options, hook_binary_present=hook_binary_present(node)), found


def spec_text_for_node(node: Node = "/", gpus: int | None = None, *,
                       fmt: str = "yaml", use_nvml: bool = True) -> str:
    """The spec text for ``node``: from its GPUs, or planned for ``gpus`` of them.

    What ``gpuready setup`` calls to create ``/etc/cdi/nvidia.yaml``: with ``gpus`` None it uses
    the GPUs found on the node and, when there are none, plans one GPU.
    """
    spec, _ = spec_for_node(node, gpus, use_nvml=use_nvml)
    return render(spec, fmt)


def spec_for_node(node: Node, gpus: int | None, *,
                  use_nvml: bool = True) -> tuple[dict[str, Any], NodeInventory]:
    """The spec and inventory of :func:`spec_text_for_node`: the node's GPUs, else ``gpus``
    planned, else one planned GPU: a placeholder, its source :data:`PLACEHOLDER_SOURCE` (no
    GPU was detected and none was asked for)."""
    try:
        return generate_spec(node, gpus=gpus, use_nvml=use_nvml)
    except InputError:
        if gpus is not None:
            raise
        spec, found = generate_spec(node, gpus=1, use_nvml=use_nvml)
        return spec, found._replace(source=PLACEHOLDER_SOURCE)


@dataclass(frozen=True)
class SpecRequest:
    """What ``gpuready cdi generate`` was asked: where to look, what to plan, where to write."""

    root: str = "/"
    output: str | None = None
    fmt: str | None = None
    gpus: int | None = None
    inventory_path: str | None = None
    options: GenerateOptions = GenerateOptions()
    use_nvml: bool = True


@dataclass(frozen=True)
class Prepared:
    """The spec text, the plan to write it (None for standard output), notes for the user, and
    the GPUs and driver files it was built from (a :class:`NodeInventory`)."""

    text: str
    plan: Plan | None
    notes: tuple[str, ...]
    found: NodeInventory | None = None


def output_path(node: Node, output: str | None) -> Path | None:
    """Where the spec goes: ``/etc/cdi/nvidia.yaml`` on the node by default; None for ``-``."""
    if output == "-":
        return None
    return node.path(output or CDI_SPEC)


def prepare(request: SpecRequest) -> Prepared:
    """Build, render and self-check the spec, and plan the write (nothing is written here)."""
    from gpuready.cdi.validate import validate_spec
    from gpuready.problems import has_errors

    node = Node(request.root)
    spec, found = generate_spec(node, gpus=request.gpus,
                                inventory_path=request.inventory_path, options=request.options,
                                use_nvml=request.use_nvml)
    target = output_path(node, request.output)
    fmt = request.fmt or ("json" if target is not None and target.suffix == ".json" else "yaml")
    text = render(spec, fmt)
    problems = validate_spec(spec, file=str(target or "<stdout>"))
    if has_errors(problems):
        raise VerificationError(f"the generated spec is refused: {problems[0].message}")
    notes = tuple(generation_notes(found, request.options))
    if target is None:
        return Prepared(text, None, notes, found)
    before = node.read_text_or_none(target, kind=FileKind.CDI_SPEC)
    summary = spec_summary(spec, found)
    if before == text:
        summary = f"already up to date ({summary})"
    return Prepared(text, Plan(target, before, text, summary), notes, found)


def check_replace(plan: Plan, *, force: bool) -> None:
    """Refuse to replace an existing, different spec unless ``force`` is set."""
    if plan.before is not None and plan.changes and not force:
        raise UsageError(f"{plan.path} exists and differs; pass --force to replace it "
                         "(--dry-run shows the difference)")


def spec_summary(spec: dict[str, Any], found: NodeInventory) -> str:
    """One line: how many GPUs, from where, which devices, which cdiVersion."""
    names = [d["name"] for d in spec["devices"]]
    shown = ", ".join(names) if len(names) <= 6 else ", ".join(names[:3] + ["...", names[-1]])
    return (f"{len(found.gpus)} GPU(s) from {found.source}; devices {KIND}={{{shown}}}; "
            f"cdiVersion {spec['cdiVersion']}")


def generation_notes(found: NodeInventory, options: GenerateOptions) -> list[str]:
    """What the user should know about the spec: names left out, no driver files found."""
    notes = []
    asked_for_uuids = options.strategies != DEFAULT_STRATEGIES and "uuid" in options.strategies
    if asked_for_uuids and any(g.uuid is None for g in found.gpus):
        notes.append("names by UUID left out for GPUs with no known UUID (list them in an "
                     "--inventory file)")
    if not found.driver.libraries:
        notes.append("no driver libraries found or planned: the spec mounts none (give "
                     "driverVersion in an --inventory file, or install the driver first)")
    return notes

