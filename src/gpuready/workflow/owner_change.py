"""The registration where the node's owner reads it, as plans: what ``configure`` (without
``--drop-in`` and ``--restart``) writes, and what ``gpuready agent`` writes on every pass.

One place plans it, so the command and the agent meet the same gate and the same writer: a
config containerd reads as it is gets the never-break gate (and, where another tool broke the
node, the repair that is lines added); an owner's input (a template, a drop-in) is judged as the
owner renders it. The record of what gpuready added comes last. Nothing here writes.
"""

from __future__ import annotations

from pathlib import Path

from gpuready.containerd.configure import ConfigureRequest
from gpuready.containerd.gate import Guard, Intent, RefusedError
from gpuready.node import Node
from gpuready.owners.configure import OwnerPlan, plan_for_owner
from gpuready.owners.detect import Detection
from gpuready.owners.table import EditKind
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.workflow.daytwo import NodeConfig, plan_record


class OwnerChange(Record):
    """The planned registration for the node's owner.

    ``plans``: every file to write (the change, the repairs, the record last); ``repairs``: the
    lines added to a node another tool broke (written, never recorded); ``shadowed``: why the
    runtime would not take effect where it was planned (empty when it would); ``guarded``: the
    file is one containerd reads as it is (judged by the gate)."""

    owned: OwnerPlan
    plans: list[Plan]
    repairs: list[Plan]
    shadowed: str
    guarded: bool


def is_in_place(detection: Detection, *, config: Path | None, force: bool) -> bool:
    """True when the runtime goes into a config containerd reads as it is."""
    return bool(config or force) or detection.owner.edit is EditKind.IN_PLACE


def plan_owner_change(
    detection: Detection, *, node: Node, change: ConfigureRequest, force: bool,
    config: Path | None, containerd_version: str | None,
) -> OwnerChange:
    """Plan the registration for ``detection``'s owner (``config``: that file in place).

    Raises :class:`~gpuready.containerd.gate.RefusedError` when the runtime would be shadowed by
    a later file's CRI table and no repair applies."""
    from gpuready.containerd.keep_default import keep_default_runtime, repair_plans
    from gpuready.owners.records import view_for

    owned = plan_for_owner(detection, node=node, request=change, force=force, config=config)
    plans = [owned.plan] if owned.plan is not None else []
    in_place = is_in_place(detection, config=config, force=force)
    target = NodeConfig(owned.target, node.root, major=1)
    guard = owner_guard(owned, change, node=node, containerd_version=containerd_version) \
        if in_place and plans else None
    repairs, shadowed = [], ""
    if guard is not None:
        # a node another tool broke, where the repair is lines added (the model's cause)
        repairs = repair_plans(plans, guard)
        shadowed = shadowed_by(plans, repairs, guard, target=owned.target)
        if shadowed:
            plans = []  # never "registered" where containerd runs another file's table
            owned = owned._replace(plan=owned.plan._replace(
                after=owned.plan.before, notes=(),
                summary=f"runtime {change.runtime.name} not registered here"))
            if not repairs:
                raise RefusedError(f"{owned.target}: refusing the change: {shadowed}; "
                                   "nothing written")
        else:
            plans = keep_default_runtime(plans, guard, beside=change.runtime.name)
            added = tuple(note for note in plans[0].notes if note not in owned.notes)
            owned = owned._replace(plan=plans[0], notes=(*owned.notes, *added))
    if plans:  # the record beside the file written, where unconfigure finds it
        # the repair is not gpuready's to take back: written, never recorded
        plans.append(plan_record(target, plans, request=change, drop_in=None,
                                 folders=not in_place,
                                 view=None if in_place else view_for(detection.owner)))
        plans[-1:-1] = repairs
    elif repairs:
        plans = list(repairs)
    return OwnerChange(owned, plans, repairs, shadowed, guard is not None)


def shadowed_by(plans, repairs, guard: Guard, *, target) -> str:
    """Why the registration planned in ``target`` would not be what containerd runs (empty
    when it would): on 1.x a later file's CRI table replaces the target's whole."""
    from gpuready.containerd.effective import same_file
    from gpuready.containerd.provenance import cri_table_file

    if not guard.line.line.maps_replace_defaults or not any(plan.changes for plan in plans):
        return ""  # 2.x merges every file key by key: nothing to judge (no verdict computed)
    after = guard.verdict([*plans, *repairs], ask_installed=False).after
    winner = cri_table_file(after.sources, guard.line.major)
    if winner is None or same_file(winner, target):
        return ""
    return (f"the runtime's table in {target} would not take effect: {winner} holds the CRI "
            f"table too, and {guard.line.line} replaces the whole table from the later file; "
            f"write it there: gpuready configure --drop-in {_node_path(guard, winner)}")


def _node_path(guard: Guard, path) -> str:
    """``path`` as the node names it (relative to the guard's root)."""
    node = Node(guard.root)
    return str(node.node_path(path)) if node.contains(path) else str(path)


def owner_guard(owned: OwnerPlan, change: ConfigureRequest, *, node: Node,
                containerd_version: str | None) -> Guard:
    """The never-break gate for a config edited in place: containerd reads it as it is."""
    from gpuready.containerd.lines import node_line
    from gpuready.containerd.model import file_version

    line = node_line(root=node.root, flag=containerd_version,
                     config_version=file_version(owned.plan.before))
    return Guard(owned.target, node.root, line,
                 Intent(adds=change.runtime.name, confirmed=change.runtime.default_confirmed))
