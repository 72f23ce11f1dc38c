"""``gpuready setup``: the contract's eight steps, each one parsing what the step before wrote."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready.changeset import apply_all, locked_all
from gpuready.containerd import facts
from gpuready.containerd.base import choose_base
from gpuready.containerd.configure import ConfigureRequest, plan_configure
from gpuready.containerd.document import load_config_text
from gpuready.containerd.gate import Guard, Intent
from gpuready.containerd.keep_default import keep_default_runtime
from gpuready.containerd.lines import node_line
from gpuready.containerd.model import file_version
from gpuready.containerd.record import record_path
from gpuready.containerd.register import CGROUP_NOTE, CgroupMode, RuntimeRequest
from gpuready.fsio import backup_path
from gpuready.kubernetes import runtimeclass
from gpuready.node import Node
from gpuready.owners.detect import Detection
from gpuready.plan import Plan
from gpuready.workflow import contract
from gpuready.workflow.contract import Check, NodeFiles
from gpuready.workflow.daytwo import NodeConfig, is_record, journal_order, plan_record
from gpuready.workflow.staging import Staging
from gpuready.yamlfile import load_mapping


@dataclass(frozen=True)
class SetupOptions:
    """Everything ``setup`` needs to know."""

    node: Node
    request: RuntimeRequest
    toolkit_dir: PurePosixPath
    base: Path | None = None
    gpus: int | None = None
    dry_run: bool = False
    enable_cri: bool = False
    detection: Detection | None = None  # who owns containerd (None: plain containerd)
    containerd_version: str | None = None  # --containerd-version: the line reading the files
    # the operator chose the GPU runtime's SystemdCgroup (--systemd-cgroup); when not, the node
    # decides where it shows no systemd (see choose_cgroup)
    cgroup_given: bool = True
    systemd: Any = None  # whether systemd runs (gpuready.init_system.SystemdFact), once read

    def __post_init__(self) -> None:
        # The toolkit folder is a node path: a relative one is taken from the node's top, so
        # it never lands beside the current folder, outside the root.
        anchored = PurePosixPath("/") / PurePosixPath(self.toolkit_dir)
        object.__setattr__(self, "toolkit_dir", anchored)

    @property
    def owned(self) -> bool:
        """True when an owner other than plain containerd decides where the runtime goes."""
        return self.detection is not None and not self.detection.owner.owns_runtime_config


@dataclass(frozen=True)
class Step:
    """One step's outcome, as one line of output."""

    number: int
    title: str
    path: Path
    outcome: str


def planned_outcome(plan: Plan, *, dry_run: bool) -> str:
    """A plan's summary as a step shows it: ``would ...`` in a dry run when it changes the file."""
    return f"would {plan.summary}" if dry_run and plan.changes else plan.summary


@dataclass
class SetupResult:
    """The steps taken, the plans behind them, notes, and the final contract checks."""

    steps: list[Step] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    without_effect: list[str] = field(default_factory=list)
    # configs whose changes are recorded setting by setting (edited in place, or created from a
    # base); every other file setup writes is recorded as a whole file
    edited_configs: list[Path] = field(default_factory=list)
    record: Path | None = None  # the record this run wrote, when it changed
    # on an owned node, the owner's input written (the record goes beside it, where unconfigure
    # finds it through the owner table); None: beside containerd's config
    record_beside: Path | None = None

    @property
    def ok(self) -> bool:
        """True when every contract check passed and containerd will load the runtime."""
        return all(check.ok for check in self.checks) and not self.without_effect


def run_setup(options: SetupOptions) -> SetupResult:
    """Run the eight steps in order and verify the result; writes nothing in a dry run.

    Every step is first planned in memory (each parsing what the step before would write), so
    bad input stops the run before anything is written. A real run then writes every planned
    file as one transaction (:func:`gpuready.changeset.apply_all`: on a failure, such as a full
    disk, the files already written get their previous bytes back) and checks the contract on
    the files as they are on disk.

    The transaction also keeps the record of what it changed (:mod:`gpuready.containerd.record`)
    beside the config, or on an owned node beside the owner's input it wrote, so ``unconfigure``
    can take it back; a dry run writes no record.
    """
    options, cgroup_note = choose_cgroup(options)
    result = _run_steps(options)
    if cgroup_note:
        result.notes.insert(0, cgroup_note)
    if options.dry_run:
        from gpuready.changeset import check

        check(result.plans)  # the never-break gate's verdict, as a real run would meet it
        return result
    files, read = NodeFiles.on(options.node, options.toolkit_dir), None
    _write(options, result, config=result.record_beside or files.config)
    if options.detection is not None:
        from gpuready.owners.effective import contract_view

        files, read = contract_view(options.detection.owner, options.node, files)
    result.checks = contract.contract_checks(files, options.request.name, read or files.read,
                                             containerd_version=options.containerd_version,
                                             detection=options.detection)
    return result


def choose_cgroup(options: SetupOptions) -> tuple[SetupOptions, str | None]:
    """The node's facts before the contract's defaults: on a node that shows no systemd
    (:func:`gpuready.init_system.systemd_fact`), the GPU runtime gets ``SystemdCgroup = false``
    unless ``--systemd-cgroup`` chose, and a base config setup stages has its runc runtimes'
    ``SystemdCgroup = true`` turned false too (unless ``--systemd-cgroup true`` asked for
    systemd's driver). Where systemd runs, or nothing says (a sandbox root), the contract's
    values stay exactly as they are. Also the note that says what was chosen, and why."""
    from gpuready.init_system import systemd_fact

    fact = systemd_fact(options.node)
    options = replace(options, systemd=fact)
    if not fact.absent or options.cgroup_given:
        return options, None
    request = options.request._replace(systemd_cgroup=CgroupMode.FALSE)
    return replace(options, request=request), (
        f"systemd does not run on this node ({fact.evidence}): runtime {request.name} gets "
        "SystemdCgroup = false (the cgroupfs driver); --systemd-cgroup true keeps systemd's")


BASE_ON_CGROUPFS = ("the staged base's runc runtimes get SystemdCgroup = false as well (systemd "
                    "does not run on this node)")


def _cgroupfs_base(options: SetupOptions) -> bool:
    """True when a base config staged on this node gets its runc runtimes on cgroupfs."""
    return (options.systemd is not None and options.systemd.absent
            and options.request.systemd_cgroup is not CgroupMode.TRUE)


def runc_on_cgroupfs(text: str, path: Path) -> str:
    """``text`` with every runc runtime's ``SystemdCgroup = true`` set to false (each a one-value
    edit: every other byte kept). A table written in a way that cannot be edited safely is left
    as it is: the cgroup check then says what to change."""
    from gpuready.containerd.edit import UneditableTableError, set_value
    from gpuready.containerd.runc_options import is_runc
    from gpuready.containerd.versions import spec_of
    from gpuready.textfile import restyle, without_bom

    edited = bare = without_bom(text)  # what the parser and the editor see, as configure does
    data = load_config_text(bare, path).data
    spec = spec_of(data, path=path)
    for name, entry in facts.runtimes(data, spec).items():
        if (isinstance(entry, dict) and is_runc(entry)
                and facts.runtime_options(entry).get("SystemdCgroup") is True):
            try:
                edited = set_value(edited, (*spec.options_path(name), "SystemdCgroup"),
                                   False).text
            except UneditableTableError:
                continue
    return text if edited == bare else restyle(text, edited)


def _write(options: SetupOptions, result: SetupResult, *, config: Path | None) -> None:
    """Write every planned file as one transaction, with the record of ``config`` (None: no
    record) first: it is the journal of what the other files are about to become."""
    plans = list(result.plans)
    paths = [plan.path for plan in plans] + ([record_path(config)] if config else [])
    with locked_all(paths, node=options.node):
        if config is not None:
            plans.insert(0, plan_setup_record(options, result, config))
        apply_all(journal_order(plans), node=options.node,
                  own=[plan.path for plan in plans if is_record(plan)])
    record = next((plan for plan in plans if is_record(plan) and plan.changes), None)
    if record is not None:
        result.plans.append(record)
        result.record = record.path


def plan_setup_record(options: SetupOptions, result: SetupResult, config: Path) -> Plan:
    """The record of what this run changes, merged into the one already beside ``config``."""
    from gpuready.owners.records import view_for

    whole = {plan.path for plan in result.plans} - set(result.edited_configs)
    view = view_for(options.detection.owner) if options.owned else None
    return plan_record(NodeConfig(config, options.node.root, major=1), result.plans,
                       request=ConfigureRequest(options.request), drop_in=None, whole=whole,
                       folders=True, view=view)  # the folders setup creates go with unconfigure


def _run_steps(options: SetupOptions) -> SetupResult:
    files = NodeFiles.on(options.node, options.toolkit_dir)
    if options.owned:  # the contract's other files stay where the contract puts them
        files = files._replace(config=options.node.path(options.detection.owner.config))
    # every file is planned in memory first, even for real: the writes come after, all at once
    staging = Staging(node=options.node, kind_of=files.kind_of, dry_run=True,
                      preview=options.dry_run)
    result = SetupResult(plans=staging.plans)
    register = _register_for_owner if options.owned else _stage_and_register
    config = register(options, files, staging, result)
    _write_default(files, staging, result, config)
    _write_parsed(files, staging, result, config)
    _write_cdi(options, files, staging, result)
    _write_runtimeclass(files, staging, result, config)
    _write_report(files, staging, result, config)
    result.checks = contract.contract_checks(files, options.request.name, staging.read,
                                             containerd_version=options.containerd_version,
                                             detection=options.detection)
    result.without_effect = _without_effect(options, files, staging)
    return result


def _without_effect(options: SetupOptions, files: NodeFiles, staging: Staging) -> list[str]:
    """Why containerd will not load the registered runtime (the CRI plugin disabled)."""
    from gpuready.rules.effect import without_effect

    return without_effect(files.config, staging.read(files.config), node=options.node,
                          runtime_name=options.request.name)


def _stage_and_register(
    options: SetupOptions, files: NodeFiles, staging: Staging, result: SetupResult
) -> contract.ConfigFacts:
    """Steps 1-3: stage the base config and register the runtime with its options."""
    told = node_line(root=options.node.root, flag=options.containerd_version,
                     config_version=None)
    base = choose_base(node=options.node, config_path=files.config, base=options.base,
                       release=told.release)
    origin_path = options.base or files.config
    cgroupfs_notes: list[str] = []
    fixed_notes: list[str] = []

    def compute(current: str | None) -> Plan:
        text = current if base.keeps_existing and current is not None else base.text
        if _cgroupfs_base(options) and not base.keeps_existing:
            on_cgroupfs = runc_on_cgroupfs(text, origin_path)  # no systemd: see choose_cgroup
            if on_cgroupfs != text:
                cgroupfs_notes[:] = [BASE_ON_CGROUPFS]
            text = on_cgroupfs
        text = _fixed(options, text, origin_path, fixed_notes)
        request = ConfigureRequest(options.request, enable_cri=options.enable_cri)
        planned = plan_configure(load_config_text(text, origin_path), request)
        plan = Plan(files.config, current, planned.after, planned.summary, planned.notes)
        line = told if told.release else node_line(
            root=options.node.root, flag=None, config_version=file_version(planned.after))
        # --base replacing a config is the operator's choice of the whole file: how the
        # default runtime runs may change with it, but no runtime may be lost
        confirmed = options.request.default_confirmed or (
            options.base is not None and not base.keeps_existing)
        guard = Guard(files.config, options.node.root, line, Intent(
            adds=options.request.name, confirmed=confirmed))
        return keep_default_runtime([plan], guard, beside=options.request.name)[0]

    plan = staging.edit(files.config, compute)
    if base.keeps_existing or plan.before is None:  # not a file replaced by the base
        result.edited_configs.append(files.config)
    # The cgroup verdict is a check of its own (the same as doctor's), not a note.
    result.notes.extend(n for n in plan.notes if not n.startswith(CGROUP_NOTE))
    result.notes.extend(cgroupfs_notes)
    result.notes.extend(fixed_notes)
    staged = _staged(base, plan, dry_run=options.dry_run)
    result.steps.append(Step(1, "base config", files.config, staged))
    result.steps.append(Step(2, "runtime section", files.config,
                             planned_outcome(plan, dry_run=options.dry_run)))
    config = contract.read_config_facts(
        staging.read(files.config), files.config, options.request.name
    )
    options_table = facts.runtime_options(config.runtime)
    written = ", ".join(
        f"{key} = {_toml_value(options_table[key])}"
        for key in ("BinaryName", "SystemdCgroup")
        if key in options_table
    )
    result.steps.append(Step(3, "runtime options", files.config, written or "none"))
    return config


def _fixed(options: SetupOptions, text: str, path: Path, notes: list[str]) -> str:
    """``text`` with its booleans written as strings repaired (runc's ``SystemdCgroup =
    "true"`` too: the default runtime counts as much as the GPU runtime, and the config setup
    leaves must pass the checks doctor makes). An error on the default runtime whose repair
    changes how it runs stops setup (exit 1, nothing written) unless
    ``--confirm-every-pod-uses-it``, which lets every ``lint --fix`` repair be made
    (:func:`gpuready.rules.fix.fix_for_setup`). ``notes`` gets what was repaired."""
    from gpuready.rules.context import Options
    from gpuready.rules.fix import fix_for_setup

    load_config_text(text, path)  # a file no parser should meet is refused here, as it was
    checked = Options(runtime_name=options.request.name, root=options.node.root)
    fixed, summary = fix_for_setup(path, text, options=checked,
                                   confirmed=options.request.default_confirmed)
    verb = "would fix" if options.dry_run else "fixed"
    notes[:] = [f"{path}: {verb} {summary} before registering (the "
                 "repairs of gpuready lint --fix)"
                ] if summary else []
    return fixed


def _register_for_owner(
    options: SetupOptions, files: NodeFiles, staging: Staging, result: SetupResult
) -> contract.ConfigFacts:
    """Steps 1-3 on a node whose containerd config belongs to an owner (k3s, k0s, ...): nothing is
    staged; the runtime goes where the owner reads it, and later steps read the config the owner
    will generate from it."""
    from gpuready.containerd.configure import ConfigureRequest
    from gpuready.owners.configure import plan_for_owner
    from gpuready.owners.effective import effective_config

    node, owner = options.node, options.detection.owner

    def plan_now():
        request = ConfigureRequest(runtime=options.request, enable_cri=options.enable_cri)
        return plan_for_owner(options.detection, node=node, request=request)

    owned = plan_now()
    result.steps.append(Step(1, "base config", files.config,
                             f"owned by {owner.name}, rewritten {owner.regenerated}: not staged"))
    if owned.plan is not None:
        plan = staging.edit(owned.target, lambda current: plan_now().plan)
        result.edited_configs.append(owned.target)
        result.record_beside = owned.target
        where = f"{plan.summary} ({owner.name} reads it; {owner.apply})"
        result.steps.append(Step(2, "runtime section", owned.target, where))
    else:
        result.steps.append(Step(2, "runtime section", owned.target,
                                 f"not written: {owner.name} rewrites it; set the values below"))
        result.notes.append(owned.advice)
    result.notes.extend(note for note in owned.notes if note not in result.notes)
    staging.overlay(files.config, effective_config(owned, node))
    config = contract.read_config_facts(staging.read(files.config), files.config,
                                        options.request.name)
    options_table = facts.runtime_options(config.runtime)
    written = ", ".join(f"{key} = {_toml_value(options_table[key])}"
                        for key in ("BinaryName", "SystemdCgroup") if key in options_table)
    result.steps.append(Step(3, "runtime options", files.config,
                             (written or "none") + f" (as {owner.name} will generate it)"))
    return config


def _staged(base, plan: Plan, *, dry_run: bool) -> str:
    if base.keeps_existing:
        return f"kept (base: {base.origin})"
    if plan.before is not None and plan.changes:
        return f"replaced the existing file (base: {base.origin}; backup: {backup_path(plan.path)})"
    return f"{'would be staged' if dry_run else 'staged'} (base: {base.origin})"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if not isinstance(value, str) else f'"{value}"'


def _write_default(files, staging, result, config: contract.ConfigFacts) -> None:
    """Step 4: record the default runtime (which gpuready never changes) and why."""
    plan = staging.write(files.default_txt, contract.default_txt(config), "default runtime")
    verdict = "runc, left as it is" if config.default_runtime == "runc" else (
        f"{config.default_runtime!r}, NOT runc: every pod without a RuntimeClass runs through it")
    written = written_outcome(plan, dry_run=staging.preview)
    result.steps.append(Step(4, "default runtime", plan.path, f"{verdict} ({written})"))


def _write_parsed(files, staging, result, config: contract.ConfigFacts) -> None:
    """Step 5: the version and runtime names, as tomllib reads the written config."""
    plan = staging.write(files.parsed_txt, contract.parsed_txt(config), "parsed config")
    detail = f"version {config.version}, runtimes {', '.join(config.runtimes)}"
    written = written_outcome(plan, dry_run=staging.preview)
    result.steps.append(Step(5, "TOML validated", plan.path, f"{detail} ({written})"))


def _write_cdi(options: SetupOptions, files, staging, result) -> None:
    """Step 6: keep an existing CDI spec (checked) or generate one; record its top-level keys."""
    kept = staging.exists(files.cdi_spec)
    if kept:
        complete_interrupted_cdi_spec(options.node, files.cdi_spec, staging, gpus=options.gpus)
    else:
        placeholder = stage_new_cdi_spec(options.node, files.cdi_spec, staging, gpus=options.gpus)
    spec = load_mapping(staging.read(files.cdi_spec), files.cdi_spec)
    kind = spec.get("kind")
    outcome = kept_outcome(options.node, files.cdi_spec, kind) if kept else generated_outcome(
        placeholder, preview=staging.preview, kind=kind)
    result.steps.append(Step(6, "CDI spec", files.cdi_spec, outcome))
    staging.write(files.cdi_keys_txt, contract.cdi_keys_txt(spec), "CDI keys")


def _write_runtimeclass(files, staging, result, config: contract.ConfigFacts) -> None:
    """Step 7: the RuntimeClass whose handler is the runtime name read back from config.toml."""
    handler = config.runtime_name
    registered = "registered" if handler in config.runtimes else "NOT registered in config.toml"
    text = runtimeclass.render(config.runtime_name, handler)
    plan = staging.write(files.runtimeclass, text, "RuntimeClass")
    outcome = f"handler {handler}, {registered} ({written_outcome(plan, dry_run=staging.preview)})"
    result.steps.append(Step(7, "RuntimeClass", plan.path, outcome))


def _write_report(files, staging, result, config: contract.ConfigFacts) -> None:
    """Step 8: the report, every value parsed back from the files just written."""
    text = staging.read(files.config)
    written = contract.read_config_facts(text, files.config, config.runtime_name)
    manifest = load_mapping(staging.read(files.runtimeclass), files.runtimeclass)
    plan = staging.write(files.report_txt, contract.report_txt(written, manifest.get("handler")),
                         "report")
    written = written_outcome(plan, dry_run=staging.preview)
    result.steps.append(Step(8, "verification report", plan.path, written))


def written_outcome(plan: Plan, *, dry_run: bool) -> str:
    """What the step did to its file; in a dry run, what it would do."""
    if not plan.changes:
        return "unchanged"
    done = "created" if plan.before is None else "updated"
    return f"would be {done}" if dry_run else done


PLACEHOLDER_WHY = (
    "no GPU detected and no --gpus given, so it names one planned GPU (/dev/nvidia0); the real "
    "spec: 'gpuready cdi refresh' once the driver is loaded (it regenerates from the GPUs the "
    "node then shows), or 'gpuready cdi refresh --gpus N' (or --inventory FILE) now")


def generated_outcome(placeholder: bool, *, preview: bool, kind: object) -> str:
    """Step 6's outcome for a spec setup generates, of ``kind``: a placeholder is called one,
    with why and how to make the real spec."""
    outcome = "would be generated" if preview else "generated"
    if placeholder:
        outcome += " as a placeholder"
    outcome += kind_outcome(kind)
    return f"{outcome}: {PLACEHOLDER_WHY}" if placeholder else outcome


def kept_outcome(node: Node, spec: Path, kind: object) -> str:
    """Step 6's outcome for a spec kept as it is: still a placeholder when its intent record
    (describing it as it is) says no GPU was detected."""
    from gpuready.cdi.intent import PLACEHOLDER_SOURCE, recorded_intent

    record = recorded_intent(node, spec)
    detected = record.get("detected") if record else None
    if isinstance(detected, dict) and detected.get("source") == PLACEHOLDER_SOURCE:
        return f"kept existing spec (a placeholder){kind_outcome(kind)}: {PLACEHOLDER_WHY}"
    return "kept existing spec" + kind_outcome(kind)


def kind_outcome(kind: object) -> str:
    """``, kind nvidia.com/gpu``, or the wrong kind said so."""
    return f", kind {kind}" if kind == contract.NVIDIA_CDI_KIND else f", WRONG kind {kind!r}"


def stage_new_cdi_spec(node: Node, spec, staging, *, gpus: int | None) -> bool:
    """Stage a CDI spec for this node's NVIDIA GPUs, or for ``gpus`` planned ones (one when none
    are visible and no number is given: a placeholder, and then True), with the intent record
    beside it that ``gpuready cdi refresh`` regenerates it from."""
    from gpuready.cdi.refresh import intent_path, require_trusted_intent, setup_spec

    require_trusted_intent(node, spec)  # written over with its owner and mode
    text, intent, placeholder = setup_spec(node, spec, gpus=gpus)
    staging.write(spec, text, "CDI spec")
    staging.write(intent_path(spec), intent, "CDI spec's intent")
    return placeholder


def complete_interrupted_cdi_spec(node: Node, spec, staging, *, gpus: int | None) -> None:
    """Write the intent record a killed ``setup`` left unwritten: the spec exists, no record
    does, and the spec holds exactly the text this run would generate, so it is setup's own.
    Any other spec without a record (written by hand or by another tool) is left as it is."""
    from gpuready.cdi.refresh import intent_path, setup_spec

    record = intent_path(spec)
    if staging.exists(record):
        return
    text, intent, _ = setup_spec(node, spec, gpus=gpus)
    if staging.read(spec) == text:
        staging.write(record, intent, "CDI spec's intent")
