"""The changes ``configure``, ``unconfigure`` and ``migrate`` make to a node, as plans.

Each function reads the node and returns every file's plan (the record of what gpuready added
last); nothing here writes. The command line shows the plans or hands them to
:func:`gpuready.changeset.apply_all`, or to the restart transaction in
:mod:`gpuready.workflow.transaction`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuready.changeset import apply_all
from gpuready.containerd.configure import ConfigureRequest, plan_configure
from gpuready.containerd.document import load_config
from gpuready.containerd.dropin import DropIn, plan_drop_in
from gpuready.containerd.record import (
    RECORD_SUFFIX,
    load_record,
    record_changes,
    record_path,
    render_record,
)
from gpuready.containerd.unconfigure import plan_unconfigure
from gpuready.fsio import BACKUP_SUFFIX
from gpuready.node import FileKind, Node
from gpuready.plan import Plan


@dataclass(frozen=True)
class NodeConfig:
    """The main config gpuready works on, the node root, and the containerd line reading it."""

    config: Path
    root: Path
    major: int

    @property
    def node(self) -> Node:
        """The node the root names: every file is read and written through it."""
        return Node(self.root)


def plan_configure_node(
    node: NodeConfig, request: ConfigureRequest, *, drop_in: DropIn | None = None
) -> list[Plan]:
    """Register the runtime in place, or in ``drop_in``; the record's plan comes last."""
    main = load_config(node.config, node=node.node)
    if drop_in is None:
        plans = [plan_configure(main, request)]
    else:
        plans = plan_drop_in(main, drop_in, request, root=node.root, major=node.major)
    return [*plans, plan_record(node, plans, request=request, drop_in=drop_in)]


def plan_record(
    node: NodeConfig, plans: list[Plan], *, request: ConfigureRequest, drop_in: DropIn | None
) -> Plan:
    """The record of what ``plans`` add, merged into the record already there."""
    config = node.config
    path = record_path(config)
    before = node.node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    if not any(plan.changes for plan in plans):
        return Plan(path, before, before, "record unchanged") if before is not None else Plan(
            path, None, None, "nothing to record")
    record = record_changes(
        load_record(config, node=node.node), plans, main=config, runtime_name=request.runtime.name,
        drop_in=drop_in.path if drop_in else None,
    )
    return Plan(path, before, render_record(record), "record what gpuready added")


def plan_unconfigure_node(node: NodeConfig) -> list[Plan]:
    """Take back what the record says gpuready added (an empty list: nothing recorded)."""
    return plan_unconfigure(node.config, node=node.node)


def write(plans: list[Plan], *, node: NodeConfig) -> list[Plan]:
    """Write ``plans`` all or nothing (the record without a backup); the caller holds
    :func:`gpuready.changeset.locked_all` for their paths. Returns the plans written, in the
    order given.

    The record is the journal of what gpuready changed: it is written before the files it
    describes and removed after them, so a run killed in between (no transaction survives a
    SIGKILL) leaves a record from which the next ``configure`` or ``unconfigure`` completes.
    Written last, a kill after the config would lose it, and with it ``unconfigure``.
    """
    written = apply_all(journal_order(plans), node=node.node,
                        own=[plan.path for plan in plans if is_record(plan)])
    return [plan for plan in plans if plan in written]


def journal_order(plans: list[Plan]) -> list[Plan]:
    """``plans`` in the order to write them: the record first when it is written, last when it
    is removed (see :func:`write`)."""
    records = [plan for plan in plans if is_record(plan)]
    return [
        *(plan for plan in records if plan.after is not None),
        *(plan for plan in plans if not is_record(plan)),
        *(plan for plan in records if plan.after is None),
    ]


def is_record(plan: Plan) -> bool:
    """True for the record's plan (shown as one line, never as a diff)."""
    return plan.path.name.endswith(RECORD_SUFFIX)


def is_bookkeeping(plan: Plan) -> bool:
    """True for gpuready's own files beside the config (the record, a backup): their changes
    are reported in one line each, without a diff."""
    return is_record(plan) or plan.path.name.endswith(BACKUP_SUFFIX)


def plan_migrate_node(node: NodeConfig, *, to: int) -> list[Plan]:
    """Migrate the main config and every file it imports to version ``to`` (``containerd config
    migrate`` leaves imports alone: a drop-in above or below the main file's version is then
    refused or left unmigrated by containerd 2.x)."""
    from gpuready.containerd.effective import load_effective
    from gpuready.containerd.migrate import migrate_text
    from gpuready.textfile import restyle, without_bom

    plans = []
    for file in load_effective(node.config, root=node.root, major=2).files:
        before = node.node.read_text(file.path, kind=FileKind.CONFIG)
        version = file.version
        if version == to:
            plans.append(Plan(file.path, before, before, f"already version {to}"))
            continue
        after = restyle(before, migrate_text(without_bom(before), file.path, to=to))
        plans.append(Plan(file.path, before, after, f"migrate version {version} to {to}"))
    return plans
