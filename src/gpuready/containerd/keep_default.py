"""Keep the default runtime loadable where containerd 1.x would lose it.

containerd 1.x fills in ``runc`` from its built-in defaults only while no file writes a
``runtimes`` table: the first runtime a file names replaces the whole default map (recorded on
1.6.20 and 1.7.34), ``default_runtime_name = "runc"`` then names nothing, and the CRI plugin does
not load. Debian's own ``/etc/containerd/config.toml`` and Docker's ``containerd.io`` config have
no ``runtimes`` table, so registering the GPU runtime alone there takes every pod's runtime away.

Here the default runtime's table is written too, from the line's own recorded ``config default``
(its settings that differ from Go's zero values: ``runtime_type``, and on 1.7 ``sandbox_mode``),
into the file whose CRI table the line reads, next to the GPU runtime: the diff stays lines added.
containerd 2.x merges a file's map into the defaults and needs nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from gpuready.containerd.gate import Guard
from gpuready.containerd.model import NO_RUNTIME_ERROR, Loaded, without_zero_values
from gpuready.plan import Plan


def keep_default_runtime(plans: Sequence[Plan], guard: Guard, *, beside: str) -> list[Plan]:
    """``plans`` of a registration as the one writer takes them: each carrying ``guard``, and
    with the default runtime's table added where the line would lose it (unchanged otherwise:
    nothing lost, 2.x, or the table that wins is not one the plans write)."""
    kept = _kept(list(plans), guard, beside=beside)
    return [plan._replace(guard=guard) for plan in kept]


def _kept(plans: list[Plan], guard: Guard, *, beside: str) -> list[Plan]:
    if not guard.line.line.maps_replace_defaults:
        return plans
    after = guard.verdict(plans, ask_installed=False).after
    name = after.default_runtime
    if after.refused or after.cri_error != NO_RUNTIME_ERROR.format(name=name):
        return plans
    entry = _default_entry(after, name)
    winner = _cri_winner(plans, after) if entry is not None else None
    if winner is None:
        return plans
    return [_with_runtime(plan, name, entry, beside=beside) if plan is winner else plan
            for plan in plans]


def _default_entry(after: Loaded, name: str) -> dict[str, Any] | None:
    """The line's recorded default table of runtime ``name`` without its zero values."""
    defaults = after.line.line.defaults()
    cri = defaults.get("plugins", {}).get(after.cri_path[1], {})
    entry = cri.get("containerd", {}).get("runtimes", {}).get(name)
    return copy.deepcopy(without_zero_values(entry)) if isinstance(entry, dict) else None


def _cri_winner(plans: Sequence[Plan], after: Loaded) -> Plan | None:
    """The plan of the last file holding a CRI table (on 1.x that file's table wins whole)."""
    from gpuready.containerd.document import load_config_text
    from gpuready.containerd.effective import same_file
    from gpuready.containerd.versions import spec_of

    by_path = {plan.path: plan for plan in plans if plan.after is not None}
    for path in reversed(after.files):
        plan = next((p for p in by_path.values() if same_file(p.path, path)), None)
        text = plan.after if plan else None
        if text is None:
            continue
        data = load_config_text(text, plan.path).data
        if spec_of(data, path=plan.path).cri_path[1] in data.get("plugins", {}):
            return plan
    return None


def _with_runtime(plan: Plan, name: str, entry: dict[str, Any], *, beside: str) -> Plan:
    """``plan`` whose result also holds runtime ``name`` = ``entry``, next to ``beside``."""
    from gpuready.containerd.document import load_config_text
    from gpuready.containerd.edit import add_table
    from gpuready.containerd.versions import spec_of
    from gpuready.textfile import restyle, without_bom

    data = load_config_text(plan.after, plan.path).data
    spec = spec_of(data, path=plan.path)
    edit = add_table(without_bom(plan.after), spec.runtime_path(name), entry, sibling=beside)
    after = restyle(plan.after, edit.text)
    note = (f"also wrote runtime {name} (containerd 1.x drops its built-in {name} once a file "
            f"names any runtime, and default_runtime_name = \"{name}\" would then name nothing)")
    return plan._replace(after=after, summary=f"{plan.summary}; keep the default runtime {name}",
                   notes=(*plan.notes, note))


def repair_plans(plans: Sequence[Plan], guard: Guard) -> list[Plan]:
    """Plans that repair a node another tool already broke, where the repair is lines added.

    On 1.x a file whose ``runtimes`` table replaced the line's built-in map (nvidia-ctk 1.20's
    drop-in on Debian 12's packaged config) leaves ``default_runtime_name = "runc"`` naming
    nothing: the CRI plugin does not load before gpuready changes anything. The repair writes
    runc's recorded default table back into that file (the model's cause names it); the gate
    then judges the repaired node. A file ``plans`` already change is left to
    :func:`keep_default_runtime`. The repair is the node's own fix, not gpuready's runtime: it
    is not recorded, so ``unconfigure`` keeps it.
    """
    from gpuready.containerd.effective import same_file
    from gpuready.containerd.model import load_node
    from gpuready.node import FileKind, Node

    if not guard.line.line.maps_replace_defaults:
        return []
    node = Node(guard.root)
    if not node.is_file(guard.main):
        return []
    before = load_node(guard.main, node=node, line=guard.line)
    cause = before.cause
    if cause is None or cause.kind != "map-replaced" or cause.file is None:
        return []
    if any(same_file(plan.path, cause.file) for plan in plans if plan.after is not None):
        return []
    name = before.default_runtime
    entry = _default_entry(before, name)
    if entry is None:
        return []
    text = node.read_text(cause.file, kind=FileKind.CONFIG)
    current = Plan(cause.file, text, text, "")
    # the file's map is the one the line reads: any runtime left in it lies in that file
    repaired = _with_runtime(current, name, entry, beside=next(iter(before.runtimes), ""))
    why = (f"repair: write runtime {name}'s table back into {cause.file} (its runtimes table "
           f"replaced {guard.line.line}'s built-in {name}, so the CRI plugin did not load; "
           "unconfigure keeps this repair)")
    return [repaired._replace(summary=why, notes=(why,), guard=guard)]
