"""The changes ``configure``, ``unconfigure`` and ``migrate`` make to a node, as plans.

Each function reads the node and returns every file's plan (the record of what gpuready added
last); nothing here writes. The command line shows the plans or hands them to
:func:`gpuready.changeset.apply_all`, or to the restart transaction in
:mod:`gpuready.workflow.transaction`.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.changeset import apply_all, with_link_notes
from gpuready.containerd.configure import ConfigureRequest, plan_configure
from gpuready.containerd.document import load_config
from gpuready.containerd.gate import Guard, Intent
from gpuready.containerd.lines import NodeLine
from gpuready.containerd.record import (
    is_record,
    load_record,
    record_changes,
    record_path,
    render_record,
)
from gpuready.node import FileKind, Node
from gpuready.plan import Plan
from gpuready.records import Record

if TYPE_CHECKING:  # drop-ins and unconfigure are imported by the runs that use them
    from gpuready.containerd.dropin import DropIn


class NodeConfig(Record):
    """The main config gpuready works on, the node root, and the containerd line reading it
    (``line``: None where no change to containerd's files is judged)."""

    config: Path
    root: Path
    major: int
    line: NodeLine | None = None

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
        from gpuready.containerd.dropin import plan_drop_in

        plans = plan_drop_in(main, drop_in, request, root=node.root, major=node.major)
    guard = configure_guard(node, request)
    if guard is not None:
        from gpuready.containerd.keep_default import keep_default_runtime, repair_plans

        repairs = repair_plans(plans, guard)
        plans = keep_default_runtime(plans, guard, beside=request.runtime.name)
        # the repair is written with the change (the gate judges them together) but not
        # recorded: unconfigure takes back gpuready's runtime and keeps the node repaired
        plans = [*plans, *repairs,
                 plan_record(node, plans, request=request, drop_in=drop_in, folders=True)]
    else:
        plans = [*plans, plan_record(node, plans, request=request, drop_in=drop_in, folders=True)]
    return with_link_notes(plans, node=node.node)


def configure_guard(node: NodeConfig, request: ConfigureRequest) -> Guard | None:
    """The never-break gate for registering ``request`` on ``node`` (None: no line decided)."""
    if node.line is None:
        return None
    confirmed = request.runtime.default_confirmed
    return Guard(node.config, node.root, node.line,
                 Intent(adds=request.runtime.name, confirmed=confirmed))


def guarded(plans: list[Plan], guard: Guard | None) -> list[Plan]:
    """``plans`` carrying ``guard``: the one writer checks it before writing any of them."""
    if guard is None:
        return plans
    return [plan._replace(guard=guard) for plan in plans]


def plan_record(
    node: NodeConfig, plans: list[Plan], *, request: ConfigureRequest, drop_in: DropIn | None,
    whole: Collection[Path] = (), folders: bool = False, view=None,
) -> Plan:
    """The record of what ``plans`` add, merged into the record already there (the files in
    ``whole`` recorded as whole files, see :mod:`gpuready.containerd.record`).

    With ``folders``, a file the plans create also records the folders its write creates (the
    node must be the one written, not a copy of it), for ``unconfigure`` to remove. ``view``:
    how the settings are read from a plan's texts (see :func:`record_changes`)."""
    config = node.config
    path = record_path(config)
    before = node.node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    if not any(plan.changes for plan in plans):
        return Plan(path, before, before, "record unchanged") if before is not None else Plan(
            path, None, None, "nothing to record")
    record = record_changes(
        load_record(config, node=node.node), plans, main=config, runtime_name=request.runtime.name,
        drop_in=drop_in.path if drop_in else None, whole=whole,
        node=node.node if folders else None, view=view,
    )
    return Plan(path, before, render_record(record, main=config, node=node.node),
                "record what gpuready added")


def plan_unconfigure_node(node: NodeConfig, *, runtime: str | None = None) -> list[Plan]:
    """Take back what the record says gpuready added (an empty list: nothing recorded); with
    ``runtime`` (``--runtime-name``), that runtime alone, refused (exit 2) when the record does
    not name it.

    The gate lets the runtimes taken back go, and nothing else: an operator who made
    ``nvidia`` the default by hand is not left with a default that names no runtime."""
    from gpuready.containerd.unconfigure import plan_unconfigure

    plans = plan_unconfigure(node.config, node=node.node, runtime=runtime)
    if node.line is None or not plans or not node.node.is_file(node.config):
        return plans
    record = load_record(node.config, node=node.node) or {"settings": []}
    intent = restore_intent(record, runtime=runtime)
    return with_link_notes(guarded(plans, Guard(node.config, node.root, node.line, intent)),
                           node=node.node)


def restore_intent(record: dict, *, runtime: str | None = None) -> Intent:
    """What ``unconfigure`` may do to containerd's runtimes, as gpuready's (loaded) record says:
    take away the runtimes it registered or changed (only ``runtime`` when one is named), and
    give the default runtime back its value from before gpuready (``runc``, every line's
    default, where it was unset)."""
    settings = record.get("settings", [])
    removes = frozenset(setting.get("name") for setting in settings
                        if setting.get("kind") == "runtime" and setting.get("name")
                        and runtime in (None, setting.get("name")))
    defaults = frozenset(_named(setting.get("previous")) for setting in settings
                         if setting.get("kind") == "default_runtime_name")
    return Intent(removes=removes, restores=True, defaults=defaults)


def _named(previous: object) -> str:
    """The default runtime a recorded ``default_runtime_name`` had: its value, or ``runc``
    (containerd's default) where it was unset."""
    return previous if isinstance(previous, str) and previous else "runc"


def write(plans: list[Plan], *, node: NodeConfig) -> list[Plan]:
    """Write ``plans`` all or nothing (the record without a backup); the caller holds
    :func:`gpuready.changeset.locked_all` for their paths. Returns the plans written, in the
    order given.

    The record is the journal of what gpuready changed: it is written before the files it
    describes and removed after them, so a run killed in between (no transaction survives a
    SIGKILL) leaves a record from which the next ``configure`` or ``unconfigure`` completes.
    Written last, a kill after the config would lose it, and with it ``unconfigure``.
    """
    own = [plan.path for plan in plans if is_record(plan)]
    folders = folders_to_remove(plans, node=node)
    if not folders:
        written = apply_all(journal_order(plans), node=node.node, own=own)
        return [plan for plan in plans if plan in written]
    # unconfigure of files in folders gpuready created: the files, then the empty folders, then
    # the record naming them (and last the folder that held only the record), so that a run
    # killed in between leaves the record the next run completes from, folders included
    from gpuready.changeset import check
    from gpuready.containerd.unconfigure import remove_empty_folders

    check(plans)  # the gate judges the whole change once, before any part of it is written
    unguarded = [plan._replace(guard=None) for plan in plans]  # so no half is judged again
    removals = [plan for plan in unguarded if is_record(plan) and plan.after is None]
    written = apply_all(journal_order([p for p in unguarded if p not in removals]),
                        node=node.node, own=own)
    remove_empty_folders(folders, node=node.node)
    written += apply_all(removals, node=node.node, own=own)
    remove_empty_folders(folders, node=node.node)  # the record's own folder, now empty
    return [plan for plan in plans if plan in written]


def folders_to_remove(plans: list[Plan], *, node: NodeConfig) -> list[Path]:
    """The folders gpuready created that ``unconfigure``'s ``plans`` leave to remove: those the
    record names when the plans remove it, those it stops naming when they rewrite it (a drop-in
    taken back with its runtime), none otherwise."""
    rewritten = next((plan for plan in plans if is_record(plan) and plan.changes), None)
    if rewritten is None:
        return []
    from gpuready.containerd.unconfigure import recorded_folders

    record = load_record(node.config, node=node.node)
    folders = recorded_folders(record) if record else []
    if rewritten.after is None:
        return folders
    # a runtime taken back alone: the folders of a drop-in that went, which the record (now
    # without it) no longer names
    import json

    kept = {str(node.node.path(folder)) for entry in json.loads(rewritten.after)["files"].values()
            for folder in entry.get("folders") or ()}
    return [folder for folder in folders if str(folder) not in kept]


def journal_order(plans: list[Plan]) -> list[Plan]:
    """``plans`` in the order to write them: the record first when it grows, last when it is
    removed or shrinks (``unconfigure --runtime-name``), so that it always names at least what
    the files hold (see :func:`write`)."""
    records = [plan for plan in plans if is_record(plan)]
    last = [plan for plan in records if plan.after is None or _shrinks(plan)]
    return [
        *(plan for plan in records if plan not in last),
        *(plan for plan in plans if not is_record(plan)),
        *last,
    ]


def _shrinks(plan: Plan) -> bool:
    """True for a record's plan that takes settings out of it (a runtime taken back)."""
    import json

    if plan.before is None or plan.after is None:
        return False
    try:
        before, after = json.loads(plan.before), json.loads(plan.after)
        return len(after["settings"]) < len(before["settings"])
    except (ValueError, KeyError, TypeError):
        return False


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
    return with_link_notes(guarded(plans, migrate_guard(node, to=to)), node=node.node)


def migrate_guard(node: NodeConfig, *, to: int) -> Guard | None:
    """The gate for a migration: judged by the line that will read version ``to`` (the node's
    when it reads it, else the first line that does), it must load every runtime loaded now."""
    from gpuready.containerd.lines import LINE_OF_CONFIG_VERSION, LINES, NodeLine

    if node.line is None:
        return None
    line = node.line
    if line.line.max_config_version < to and line.release is None:
        # only the file's version spoke for the line: judge by the first line that reads ``to``
        line = NodeLine(LINES[LINE_OF_CONFIG_VERSION[to]], None,
                        f"the line that reads version {to}")
    return Guard(node.config, node.root, line)
