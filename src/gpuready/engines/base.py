"""What every container engine offers gpuready: one interface, one table of facts per engine.

An engine plans changes to its own config file (add or remove a runtime, the default runtime,
CDI), reads the default runtime back, lints its files, and (where a daemon runs) asks it what it
loaded. Planning never writes: the command line applies a plan through the one safe writer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from gpuready.engines.facts import EngineFacts
from gpuready.node import Node
from gpuready.plan import Plan
from gpuready.records import Record


class RuntimeChange(Record):
    """What ``configure`` asks of any engine."""

    name: str
    binary: str
    systemd_cgroup: str = "true"  # containerd only: true, false or inherit
    enable_cdi: bool = False
    set_as_default: bool = False


def removing_created(plan: Plan, *, node: Node, empty: tuple[str, ...]) -> Plan:
    """``plan``, or the removal of its file when the edit leaves it ``empty`` and gpuready
    created it (no backup exists: gpuready keeps one of every file that was there before)."""
    from gpuready.fsio import backup_path

    if not plan.changes or (plan.after or "").strip() not in empty:
        return plan
    if node.exists(backup_path(plan.path)):
        return plan
    return Plan(plan.path, plan.before, None, f"{plan.summary}; remove the file gpuready created",
                plan.notes)


@runtime_checkable
class Engine(Protocol):
    """The operations ``configure``, ``unconfigure``, ``lint``, ``doctor`` and ``verify`` use."""

    facts: EngineFacts

    def config_path(self, node: Node) -> Path:
        """The config file this engine edits, on ``node``."""
        ...

    def plan_add_runtime(self, path: Path, change: RuntimeChange, *, node: Node) -> Plan:
        """The plan registering the runtime (and CDI / default runtime when asked)."""
        ...

    def plan_remove_runtime(self, path: Path, name: str, *, node: Node) -> list[Plan]:
        """The plans removing what ``configure`` added for runtime ``name`` (a plan whose
        ``after`` is None removes a file gpuready created)."""
        ...

    def default_runtime(self, path: Path, *, node: Node) -> str | None:
        """The runtime the engine uses when none is asked for, as the file says."""
        ...

    def runtimes(self, path: Path, *, node: Node) -> dict[str, dict]:
        """The runtimes the file registers, by name."""
        ...


# -- records: what configure changed in a Docker or CRI-O file ---------------------------------
#
# The record is containerd's (:mod:`gpuready.containerd.record`, format 2): one entry for the file
# (the SHA-256 before gpuready first changed it and after its last change) and one ``runtime``
# setting per runtime it registered, with the file's own entry of that name from before (None:
# gpuready added it). ``unconfigure`` restores the backup while the file still holds what
# gpuready wrote; once the file was edited it removes only a runtime gpuready added.


def plan_engine_record(path: Path, plan: Plan, *, node: Node, runtime_name: str,
                       previous_runtime: dict | None) -> Plan:
    """The plan writing the record of ``plan`` (merged into the record already there)."""
    from gpuready.containerd.record import (
        FORMAT,
        load_record,
        record_path,
        render_record,
        sha256,
    )
    from gpuready.node import FileKind

    where = record_path(path)
    before = node.read_text_or_none(where, kind=FileKind.NODE_FACT)
    if not plan.changes:
        return Plan(where, before, before, "record unchanged")
    record = load_record(path, node=node) or {
        "format": FORMAT, "config": str(path), "files": {}, "settings": []}
    key = str(path)
    entry = record["files"].setdefault(key, {"original": sha256(plan.before)})
    entry["written"] = sha256(plan.after)
    if not any(s["file"] == key and s["kind"] == "runtime" and s.get("name") == runtime_name
               for s in record["settings"]):
        record["settings"].append({"file": key, "kind": "runtime", "name": runtime_name,
                                   "previous": previous_runtime})
    return Plan(where, before, render_record(record, main=path, node=node),
                "record what gpuready added")


# The engine's plan removing one runtime from the config, read through the node it is given (a
# planned node, when one removal follows another).
Remover = Callable[[Path, str, Node], Plan]


def recorded_engine_runtimes(path: Path, *, node: Node) -> list[str]:
    """The runtimes gpuready's record of ``path`` says it registered there (none: no record)."""
    from gpuready.containerd.record import load_record
    from gpuready.containerd.unconfigure import recorded_runtimes

    record = load_record(path, node=node)
    if record is None:
        return []
    return recorded_runtimes({"settings": [s for s in record["settings"]
                                           if s["file"] == str(path)]})


def plan_engine_unconfigure(path: Path, remover: Remover, name: str | None, *,
                            node: Node) -> list[Plan]:
    """Take back what the record of ``path`` says gpuready changed: the file's plan first, then
    its backup's and the record's. ``name`` (``--runtime-name``): that runtime alone, refused
    (exit 2) when the record does not name it; None: every runtime recorded. ``remover`` plans
    the removal of one runtime (for a file edited since gpuready wrote it, and for one runtime
    alone). Without a record, one plan that changes nothing: gpuready never guesses what it
    added."""
    from gpuready.containerd.record import load_record, record_path
    from gpuready.containerd.unconfigure import require_recorded
    from gpuready.node import FileKind

    record = load_record(path, node=node)
    entry = None if record is None else record["files"].get(str(path))
    current = node.read_text_or_none(path, kind=FileKind.CONFIG)
    if entry is None:
        return [_not_recorded(path, current, remover, name, node=node)]
    settings = [s for s in record["settings"] if s["file"] == str(path) and s["kind"] == "runtime"]
    names = list(dict.fromkeys(s["name"] for s in settings))
    if name is not None:
        require_recorded(name, names, where=record_path(path))
        if names != [name]:  # the last recorded runtime goes with everything else
            return _take_back_one(path, record, name, current, remover, node=node)
    ours = [s["name"] for s in settings if s["previous"] is None]
    removal = _removals(path, current, ours, remover, node=node)
    restored = None if current is None else _restore(path, current, entry, node=node)
    if restored is not None:
        plans = restored
        first = plans[0]
        if removal.changes and first.changes:
            summary = (removal.summary if first.summary in removal.summary
                       else f"{removal.summary}; {first.summary}")
            plans[0] = Plan(first.path, first.before, first.after, summary, first.notes)
    elif current is None:
        plans = [Plan(path, None, None, "already removed")]
    elif ours:
        plans = [removal]
    else:
        shown = ", ".join(names)
        plans = [Plan(path, current, current, f"runtime {shown} was not added by gpuready "
                      "(or the file was edited since): left as it is")]
    where = record_path(path)
    before = node.read_text(where, kind=FileKind.NODE_FACT)
    return [*plans, Plan(where, before, None, "remove gpuready's record")]


def _not_recorded(path: Path, current: str | None, remover: Remover, name: str | None, *,
                  node: Node) -> Plan:
    """The one plan, changing nothing, of a file gpuready has no record of; it says what the
    file holds of runtime ``name`` (None: the name gpuready registers by default)."""
    name = name or "nvidia"
    removal = remover(path, name, node)
    why = ("nothing recorded: gpuready did not register it here; left as it is"
           if removal.changes else "nothing recorded")
    shown = removal.summary if not removal.changes else f"runtime {name}"
    return Plan(path, current, current, f"{shown}; {why}")


def _removals(path: Path, current: str | None, names: list[str], remover: Remover, *,
              node: Node) -> Plan:
    """One plan removing each runtime of ``names`` in turn, each planned on the text the one
    before left."""
    from gpuready.containerd.gate import planned_node

    text, summaries = current, []
    for name in names:
        plan = remover(path, name, planned_node(node.root, {path: text}))
        if plan.changes:
            text = plan.after
            summaries.append(plan.summary)
    summary = "; ".join(summaries) or f"runtime {', '.join(names) or 'none'} not registered"
    return Plan(path, current, text, summary)


def _take_back_one(path: Path, record: dict, name: str, current: str | None,
                   remover: Remover, *, node: Node) -> list[Plan]:
    """Remove runtime ``name`` alone while the record names others too: the file keeps the
    others (and its backup, for the later ``unconfigure`` that restores the original), and the
    record loses only ``name``'s setting; it is written after the file."""
    import json

    from gpuready.containerd.record import record_path, render_record, sha256
    from gpuready.node import FileKind

    entry = record["files"][str(path)]
    ours = any(s["file"] == str(path) and s["kind"] == "runtime" and s["name"] == name
               and s["previous"] is None for s in record["settings"])
    if current is None:
        return [Plan(path, None, None, "already removed")]
    if not ours:  # the operator's runtime, whose path gpuready changed: its original has it
        return [Plan(path, current, current, f"runtime {name} was there before gpuready "
                     "changed it: left as it is ('unconfigure' without --runtime-name gives "
                     "the original back)")]
    plan = remover(path, name, node)
    kept = json.loads(json.dumps(record))
    kept["settings"] = [s for s in kept["settings"] if not (
        s["file"] == str(path) and s["kind"] == "runtime" and s["name"] == name)]
    if plan.changes and sha256(current) == entry["written"]:
        # still what gpuready wrote, so is the text without the runtime; a file edited since
        # keeps the old hash, so that the operator's edit is never undone by a later restore
        kept["files"][str(path)]["written"] = sha256(plan.after)
    where = record_path(path)
    before = node.read_text(where, kind=FileKind.NODE_FACT)
    summary = f"{plan.summary} (the other runtimes gpuready added stay)"
    return [Plan(path, plan.before, plan.after, summary, plan.notes),
            Plan(where, before, render_record(kept, main=path, node=node),
                 f"remove runtime {name} from gpuready's record")]


def _restore(path: Path, current: str, entry: dict, *, node: Node) -> list[Plan] | None:
    """The plans giving back the original of ``path`` (and removing its backup), or None when
    the file no longer holds what gpuready wrote or its original is no longer in the backup."""
    from gpuready.containerd.record import read_backup, sha256
    from gpuready.fsio import backup_path

    backup = backup_path(node.writable(path))  # the writer keeps it beside the link's target
    original = read_backup(backup, node=node)
    drop = [Plan(backup, original, None, "remove the backup (the file is the original again)")]
    if sha256(current) == entry["written"]:
        if entry["original"] is None:
            from gpuready.containerd.unconfigure import created_backup

            return [Plan(path, current, None, "remove the file gpuready created"),
                    *created_backup(path, node=node)]
        if sha256(original) == entry["original"]:
            return [Plan(path, current, original, "restore the original, byte for byte"), *drop]
    if entry["original"] is not None and sha256(current) == entry["original"]:
        return [Plan(path, current, current, "already the original"),
                *(drop if original == current else [])]
    return None
