"""Keep a CDI spec true over the node's life: ``gpuready cdi refresh`` and its intent record.

A spec is generated from an *intent*: ``--gpus N``, an ``--inventory`` file, or the GPUs the node
shows (NVML, ``/dev/nvidia<N>``), with device-name strategies, hooks and a driver root.
``cdi generate`` keeps that intent beside the spec, in gpuready's own record
``<spec>.gpuready.intent`` (JSON; the CDI loader reads only ``*.json`` and ``*.yaml``, so it
never sees it), with the SHA-256 of the spec it describes, the inventory file's SHA-256 and
what was detected (where the GPUs came from, how many, the driver version).

The intent is not kept in the spec's own ``annotations``: spec annotations need ``cdiVersion``
0.6.0, which loaders that know only 0.5.0 (the CDI library containerd 1.7's first releases
vendor) refuse, and a spec gpuready writes must load on every containerd that reads CDI.

:func:`plan_refresh` regenerates the spec when, and only when, it is stale
(:mod:`gpuready.cdi.staleness`, told the intent: a spec detected from the node's devices on a node
that now shows no driver is stale, not "not yet verifiable") or the intent changed (an option
given now that differs from the record, or the inventory file's content). A fresh spec is not
rewritten: its bytes and mtime stay. A spec no intent record describes (written by hand or
by another tool, or edited since) is never rewritten without ``--force``. A missing
``/dev/nvidia-uvm*`` alone is no reason to regenerate (the module is not loaded yet).

Every write goes through the one safe writer, as one change (:func:`write_refresh`: lock, atomic
rename, backup of the spec): the spec, its intent record, ``setup``'s record when it lists them
(:func:`_plan_setup_record`), and the units of ``--install-units``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuready.cdi import generate
from gpuready.cdi.intent import (  # noqa: F401  (the record's names, kept here too)
    INTENT_FORMAT,
    INTENT_SUFFIX,
    Intent,
    intent_fields,
    intent_path,
    load_intent,
    recorded_intent,
    require_trusted_intent,
    sha256,
)
from gpuready.errors import ExitCode, InputError, UsageError
from gpuready.node import FileKind, Node
from gpuready.paths import CONTAINERD_CONFIG
from gpuready.plan import Plan


def render_intent(intent: Intent, *, spec: Path, text: str, found: Any,
                  inventory_sha256: str | None, node: Node,
                  replaces: dict[str, str | None] | None = None) -> str:
    """The intent record's text for the spec ``text`` written at ``spec`` from ``found`` (the
    generator's :class:`~gpuready.cdi.inventory.NodeInventory`); ``replaces``: the hashes of the
    spec and of the intent record this refresh writes over (see :func:`write_refresh`)."""
    libraries = found.driver.libraries
    record = {
        "format": INTENT_FORMAT,
        "spec": str(node.node_path(spec)),
        "spec_sha256": sha256(text),
        "intent": intent_fields(intent, node),
        "inventory_sha256": inventory_sha256,
        "detected": {
            "source": found.source,
            "gpus": len(found.gpus),
            "driver_version": found.driver.version,
            "library_dir": str(Path(libraries[0]).parent) if libraries else None,
        },
    }
    if replaces is not None:
        record["replaces"] = replaces
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def inventory_digest(node: Node, path: str | None) -> str | None:
    """The SHA-256 of the inventory file (a path as ``--inventory`` takes it); InputError when it
    cannot be read."""
    if path is None:
        return None
    return sha256(node.read_text(Path(path), kind=FileKind.INVENTORY))


@dataclass(frozen=True)
class RefreshRequest:
    """What ``gpuready cdi refresh`` was asked; None: as the intent record says (or the
    default)."""

    root: str = "/"
    output: str | None = None
    gpus: int | None = None
    inventory_path: str | None = None
    strategies: tuple[str, ...] | None = None
    hooks: bool | None = None
    driver_root: str | None = None
    use_nvml: bool | None = None
    force: bool = False

    def given(self) -> dict[str, Any]:
        """The intent fields given on the command line."""
        found = {"gpus": self.gpus, "inventory": self.inventory_path,
                 "strategies": self.strategies, "hooks": self.hooks,
                 "driver_root": self.driver_root, "use_nvml": self.use_nvml}
        return {key: value for key, value in found.items() if value is not None}


@dataclass
class Refresh:
    """The outcome of a refresh, planned (nothing written yet): the spec's plan and the intent
    record's, why (reasons; empty for a fresh spec), and a finding when the spec stays stale."""

    target: Path
    intent: Intent
    plans: list[Plan] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    still_stale: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verifiable: bool = True
    library_dir: str | None = None
    own: list[Path] = field(default_factory=list)  # written without a backup
    # what the spec and its intent record held before this change (a killed refresh's, when
    # this one finishes it): the hashes a kill between the two files is recognised by
    replaces: dict[str, str | None] | None = None

    @property
    def needed(self) -> bool:
        """True when the spec is to be regenerated."""
        return bool(self.reasons)

    @property
    def spec_plan(self) -> Plan | None:
        """The spec's plan (None when the spec is fresh)."""
        return next((plan for plan in self.plans if plan.path == self.target), None)

    def write_order(self) -> list[Plan]:
        """The plans in the order they are written: the intent record first, as a journal of
        the spec it describes (its hash, and the hashes of the spec and record it replaces), so
        that a run killed before the spec lands leaves a record the next refresh finishes from
        (:func:`interrupted`); then the spec, then the records that list them."""
        records = [plan for plan in self.plans if plan.path.name.endswith(INTENT_SUFFIX)]
        return [*records, *(plan for plan in self.plans if plan not in records)]

    @property
    def exit_code(self) -> int:
        """0 done or nothing to do; 1 the spec is stale and regenerating it does not help."""
        return ExitCode.CHECK_FAILED if self.still_stale else ExitCode.OK


def effective_intent(request: RefreshRequest, record: dict[str, Any] | None) -> Intent:
    """The intent to regenerate from: each option given now, else the recorded one, else the
    default (the node's GPUs)."""
    base = record["parsed"] if record else Intent()
    given = request.given()
    if "gpus" in given or "inventory" in given:  # a new plan replaces the recorded one whole
        base = base._replace(gpus=given.get("gpus"), inventory=given.get("inventory"))
    return base._replace(**{k: v for k, v in given.items() if k not in ("gpus", "inventory")})


def intent_changes(request: RefreshRequest, record: dict[str, Any] | None, intent: Intent,
                   node: Node) -> list[str]:
    """Why the intent differs from the record: options given now, or the inventory's content."""
    if record is None:
        return []
    recorded: Intent = record["parsed"]
    changes = [f"{name} is now {_shown(getattr(intent, attr))} "
               f"(was {_shown(getattr(recorded, attr))})"
               for name, attr in (("--gpus", "gpus"), ("--inventory", "inventory"),
                                  ("--device-name-strategy", "strategies"), ("--hooks", "hooks"),
                                  ("--driver-root", "driver_root"), ("NVML use", "use_nvml"))
               if getattr(intent, attr) != getattr(recorded, attr)]
    if intent.inventory and intent.inventory == recorded.inventory and \
            inventory_digest(node, intent.inventory) != record.get("inventory_sha256"):
        changes.append(f"the inventory {intent.inventory} changed since the spec was generated")
    return changes


def _shown(value: Any) -> str:
    if value is None:
        return "not given"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def plan_refresh(request: RefreshRequest) -> Refresh:
    """Judge the spec and plan its regeneration (nothing is written here).

    Raises :class:`UsageError` for ``--output -`` and :class:`InputError` for a spec that is not
    a CDI spec gpuready can read, an unreadable inventory, or no GPU to regenerate from where
    nothing says the GPUs were detected on the node.
    """
    from gpuready.cdi import staleness

    if request.output == "-":
        raise UsageError("cdi refresh keeps a spec file true: give --output PATH, not '-'")
    if request.inventory_path is not None:  # kept absolute: a refresh runs from any folder
        request = replace(request, inventory_path=os.path.abspath(request.inventory_path))
    node = Node(request.root)
    target = generate.output_path(node, request.output)
    require_trusted_intent(node, target)
    before = node.read_text_or_none(target, kind=FileKind.CDI_SPEC)
    record = recorded_intent(node, target, before) if before is not None else None
    pending = interrupted(node, target, before) if record is None else None
    intent = effective_intent(request, record or pending)
    found = Refresh(target, intent)
    _resume(found, node, record, pending, before)
    if before is None:
        if pending is None:
            found.reasons.append(f"there is no spec at {target}")
    else:
        decoded = staleness.read_decoded(node, target)
        if decoded is None:
            raise InputError(target, "not a CDI spec gpuready can read; nothing written (see "
                             "'gpuready cdi validate'; 'gpuready cdi generate --force' replaces "
                             "it)")
        if record is None and pending is None and load_intent(node, target) is not None:
            found.notes.append(f"{intent_path(target)} describes another text of the spec "
                               "(rewritten since): the spec is judged alone")
        verdict = staleness.assess(node, target, decoded, intent=record)
        found.verifiable = verdict.verifiable
        if verdict.regenerate:
            found.reasons += ["stale: " + reason for reason in verdict.reasons()]
        elif verdict.only_uvm:
            found.notes.append(f"{target}: " + verdict.reasons()[-1] + "; the spec is kept as "
                               "it is")
        found.reasons += intent_changes(request, record or pending, intent, node)
        if record is None and request.given() and not found.reasons:
            found.reasons.append("no record of the intent it was generated with, and "
                                 f"{intent.described()} was given")
        if record is None and pending is None and found.needed and not request.force:
            why = found.reasons[0]
            raise InputError(target, f"{why}, but no intent record of gpuready's describes it "
                             "(written by hand or by another tool): nothing written; "
                             "'gpuready cdi refresh --force' regenerates it")
    if not found.needed:
        return found
    _plan_regeneration(found, request, node, before, record or pending)
    return found


def _resume(found: Refresh, node: Node, record: dict[str, Any] | None,
            pending: dict[str, Any] | None, text: str | None) -> None:
    """Take up what a killed refresh left: the spec it did not write (``pending``, see
    :func:`interrupted`), or ``setup``'s record it did not update (the spec and its ``record``
    written)."""
    if pending is not None:
        found.replaces = pending["replaces"]
        found.reasons.append(f"a refresh was killed after recording its intent "
                             f"({pending['parsed'].described()}) and before writing the spec: "
                             "finishing it")
    elif record is not None and text is not None:
        _finish_setup_record(found, node, record, text)


def interrupted(node: Node, spec: Path, text: str | None) -> dict[str, Any] | None:
    """The intent record of a refresh killed between its two files, or None.

    :func:`write_refresh` writes the intent record first, with the SHA-256 of the spec it is
    about to write and of the spec it replaces. A spec that still holds the replaced text (or
    is still missing, when the killed run created it) next to such a record is the spec that
    run was told to replace: gpuready wrote the record moments before, and nothing but that run
    was to change the spec. A spec holding any other text (edited by hand since) is not
    recognised, and is refused without ``--force`` as ever. This is why the record is written
    first and not the spec: a spec alone carries no mark of gpuready's (no annotations on
    ``cdiVersion`` 0.5.0, no comments in JSON), so a spec written before its record could not
    be told from one written by hand."""
    record = load_intent(node, spec)
    replaces = record.get("replaces") if record else None
    if not isinstance(replaces, dict) or "spec_sha256" not in replaces:
        return None
    if replaces["spec_sha256"] != sha256(text) or record.get("spec_sha256") == sha256(text):
        return None
    return record


def _finish_setup_record(found: Refresh, node: Node, record: dict[str, Any],
                         text: str) -> None:
    """A refresh killed after the spec and its intent record, before ``setup``'s record: plan
    that record's update (the spec and intent record as they are now), with a note saying so."""
    replaces = record.get("replaces")
    if not isinstance(replaces, dict):
        return
    path = intent_path(found.target)
    intent_text = node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    files = [(found.target, text, text, replaces.get("spec_sha256")),
             (path, intent_text, intent_text, replaces.get("record_sha256"))]
    if _plan_setup_record(found, node, files):
        found.notes.append(f"a refresh was killed before it updated setup's record: finishing "
                           f"it ({found.plans[-1].path} lists {found.target} as rewritten, for "
                           "'gpuready unconfigure')")


def _plan_regeneration(found: Refresh, request: RefreshRequest, node: Node, before: str | None,
                       record: dict[str, Any] | None) -> None:
    """The spec's plan and the intent record's plan; ``still_stale`` when the new spec (from
    the same intent) would be stale too."""
    from gpuready.cdi import staleness

    intent = found.intent
    spec_request = generate.SpecRequest(
        request.root, output=request.output, fmt=intent.fmt, gpus=intent.gpus,
        inventory_path=intent.inventory, options=intent.options(), use_nvml=intent.use_nvml)
    try:
        prepared = generate.prepare(spec_request)
    except InputError as error:
        planned = intent.gpus is not None or intent.inventory is not None
        if before is None or planned or not staleness.detected_on_node(record):
            raise
        found.still_stale = [f"it cannot be regenerated from {intent.described()}: "
                             f"{error.reason}"]
        return
    if prepared.plan is None or prepared.found is None:  # not reached: a file target
        return
    spec_found = prepared.found
    found.notes += list(prepared.notes)
    libraries = spec_found.driver.libraries
    found.library_dir = str(Path(libraries[0]).parent) if libraries else None
    summary = generate.spec_summary(_decoded(prepared.text, found.target), spec_found)
    found.plans.append(Plan(prepared.plan.path, before, prepared.text,
                            f"regenerated from {intent.described()}: {summary}"
                            if before != prepared.text else
                            f"regenerating from {intent.described()} gives the same spec"))
    path = intent_path(found.target)
    old_record = node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    if found.replaces is None and before != prepared.text:
        found.replaces = {"spec_sha256": sha256(before), "record_sha256": sha256(old_record)}
    elif found.replaces is None and record is not None and isinstance(
            record.get("replaces"), dict):  # the spec stays: so does what its record says
        found.replaces = record["replaces"]
    record_text = render_intent(intent, spec=found.target, text=prepared.text, found=spec_found,
                                inventory_sha256=inventory_digest(node, intent.inventory),
                                node=node, replaces=found.replaces)
    found.plans.append(Plan(path, old_record, record_text,
                            "record the intent the spec was generated from"))
    new_record = json.loads(record_text)
    after = staleness.assess(node, found.target, _decoded(prepared.text, found.target),
                             intent=new_record)
    if after.regenerate:
        found.still_stale = after.reasons()
    found.own.append(path)
    replaces = found.replaces or {}
    _plan_setup_record(found, node, [
        (plan.path, plan.before, plan.after,
         replaces.get("spec_sha256" if plan is found.plans[0] else "record_sha256"))
        for plan in found.plans])


def _plan_setup_record(found: Refresh, node: Node,
                       files: list[tuple[Path, str | None, str | None, str | None]]) -> bool:
    """When ``setup``'s record (beside the containerd config) lists the spec or its intent
    record as a whole file holding what gpuready wrote, the record's plan (last), so that it
    goes on describing the files as rewritten and ``unconfigure`` still takes them back. A spec
    the record says gpuready created is rewritten without a backup: ``unconfigure`` removes it,
    and nothing of gpuready's is left beside it. True when the record is to change.

    ``files``: each file's path, its text now and after this change, and the hash it had
    before the refresh this one finishes (a killed run may have written the file and not the
    record: the record still names that hash)."""
    from gpuready.containerd.record import load_record, record_path, render_record

    config = node.path(CONTAINERD_CONFIG)
    try:
        record = load_record(config, node=node)
    except InputError:
        return False  # a record gpuready cannot read: unconfigure refuses it and says why
    if record is None:
        return False
    changed = False
    for path, before, after, replaced in files:
        entry = record["files"].get(str(path))
        written = entry.get("written") if entry else None
        if not (entry and entry.get("whole_file") and written != sha256(after)
                and written in {sha256(before), replaced} - {None}):
            continue
        entry["written"] = sha256(after)
        changed = True
        if entry.get("original") is None and path not in found.own:
            found.own.append(path)
    if not changed:
        return False
    path = record_path(config)
    before = node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    after = render_record(record, main=config, node=node)
    found.plans.append(Plan(path, before, after, "record the rewritten spec for "
                            "'gpuready unconfigure'"))
    found.own.append(path)
    return True


def _decoded(text: str, path: Path) -> dict[str, Any]:
    """The generated spec ``text`` decoded as the loader decodes it."""
    from gpuready.cdi.document import parse_spec_text
    from gpuready.cdi.validate import decode_spec

    spec, _ = decode_spec(parse_spec_text(text, path).data, file=str(path))
    return spec


def write_refresh(found: Refresh, *, node: Node, units: list[Plan] | None = None,
                  own: list[Path] | None = None) -> list[Plan]:
    """Write the spec, its intent record, the records that list them and ``units`` (the
    plans of :func:`gpuready.cdi.units.plan_units`, their record among them, named in ``own``)
    as one change: all of them or none (gpuready's own records without a backup). Return the
    plans written."""
    from gpuready.changeset import apply_all, locked_all

    plans = [*found.write_order(), *(units or [])]
    if not any(plan.changes for plan in plans):
        return []
    with locked_all([plan.path for plan in plans], node=node):
        return apply_all(plans, node=node, own=[*found.own, *(own or [])])


def setup_spec(node: Node, spec: Path, *, gpus: int | None) -> tuple[str, str, bool]:
    """The spec ``gpuready setup`` writes at ``spec`` (a host path), its intent record, and
    whether it is a placeholder: the node's GPUs, or ``gpus`` planned. With neither, one GPU is
    planned (the placeholder): the intent records only what was given (no ``--gpus``) and that
    no GPU was detected, so a refresh after the driver came regenerates from the GPUs it then
    shows."""
    data, found = generate.spec_for_node(node, gpus)
    text = generate.render(data, "yaml")
    return text, render_intent(Intent(gpus=gpus, fmt="yaml"), spec=spec, text=text, found=found,
                               inventory_sha256=None, node=node), \
        found.source == generate.PLACEHOLDER_SOURCE


def intent_plan_for_generate(node: Node, prepared: generate.Prepared,
                             request: generate.SpecRequest) -> Plan | None:
    """The intent record ``cdi generate`` writes beside the spec it writes (None for standard
    output)."""
    if prepared.plan is None or prepared.found is None:
        return None
    require_trusted_intent(node, prepared.plan.path)  # written over with its owner and mode
    inventory = None if request.inventory_path is None else os.path.abspath(
        request.inventory_path)
    intent = Intent(request.gpus, inventory, request.options.strategies,
                    request.options.hooks, request.options.driver_root, request.use_nvml,
                    request.fmt)
    path = intent_path(prepared.plan.path)
    text = render_intent(intent, spec=prepared.plan.path, text=prepared.text,
                         found=prepared.found,
                         inventory_sha256=inventory_digest(node, intent.inventory), node=node)
    return Plan(path, node.read_text_or_none(path, kind=FileKind.NODE_FACT), text,
                "record the intent the spec was generated from")


def report(found: Refresh, written: list[Plan], *, dry_run: bool,
           units: list[Plan] | None = None, node: Node | None = None) -> dict[str, Any]:
    """The outcome as data (the JSON document; the text lines are made from it)."""
    from gpuready.cdi.units import is_unit

    spec = found.spec_plan
    changed = bool(spec and spec.changes)
    if not found.needed:
        action = "none"
    elif not changed:
        action = "unchanged"
    elif dry_run:
        action = "would-rewrite"
    else:
        action = "rewritten"
    code = int(found.exit_code)
    return {
        "status": "ok" if code == 0 else "failed",
        "exit_code": code,
        "file": str(found.target),
        "action": action,
        "fresh": not found.needed,
        "verifiable": found.verifiable,
        "intent": intent_fields(found.intent, node),
        "reasons": found.reasons,
        "still_stale": found.still_stale,
        "changed": changed,
        "written": bool(spec and spec in written),
        "summary": spec.summary if spec else "fresh: nothing to do",
        "diff": spec.diff() if spec and dry_run else "",
        "notes": found.notes,
        "units": [{"file": str(plan.path), "changed": plan.changes,
                   "written": plan in written, "summary": plan.summary,
                   "diff": plan.diff() if dry_run else ""}
                  for plan in (units or []) if is_unit(plan.path)],
    }
