"""Plan the registration where the node's owner reads it, not where it would be thrown away.

One function per kind of owner input (see :class:`~gpuready.owners.table.EditKind`): the config
itself, a k3s/RKE2 template, a k0s drop-in, MicroK8s's template, and, for owners whose files are
rewritten from data that is not on the node (kubespray's inventory, the GPU Operator's
ClusterPolicy), the values to set there instead of an edit. Every planner returns an
:class:`OwnerPlan` and writes nothing; the command applies the plan with the one safe writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.configure import ConfigureRequest, plan_configure
from gpuready.containerd.document import ConfigFile, load_config, load_config_text
from gpuready.containerd.versions import render_key_path, spec_of
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.owners.detect import Detection
from gpuready.owners.table import EditKind, Owner
from gpuready.owners.template import (
    GoTemplate,
    new_template,
    parse_template,
    render,
    template_version,
)
from gpuready.plan import Plan
from gpuready.records import Record


class OwnerPlan(Record):
    """Where the runtime goes for this owner, and the change (or the values to set instead)."""

    owner: Owner
    target: Path
    plan: Plan | None
    advice: str = ""
    notes: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        """True when a file would change."""
        return self.plan is not None and self.plan.changes

    @property
    def summary(self) -> str:
        """One line: what is (or would be) done."""
        return self.plan.summary if self.plan else self.advice.splitlines()[0]


def plan_for_owner(
    detection: Detection,
    *,
    node: Node,
    request: ConfigureRequest,
    force: bool = False,
    config: Path | None = None,
) -> OwnerPlan:
    """The registration for the node's owner (``config`` edits that file in place instead)."""
    owner = detection.owner
    if config is not None:
        return _in_place(owner, config, request, notes=_explicit_config_notes(owner, config, node),
                         node=node)
    path = node.path(owner.config)
    if owner.edit in (EditKind.INVENTORY, EditKind.OPERATOR):
        if force:
            return _in_place(owner, path, request, node=node, notes=(
                f"--force: {path} is rewritten {owner.regenerated}; this edit lasts until then",))
        return _advice(owner, node, request)
    planner = {
        EditKind.IN_PLACE: lambda: _in_place(owner, path, request, node=node),
        EditKind.TEMPLATE_FILE: lambda: _template_file(owner, node, request),
        EditKind.GO_TEMPLATE: lambda: _go_template(owner, node, request),
        EditKind.DROP_IN: lambda: _drop_in(owner, node, request),
    }[owner.edit]
    return planner()


def target_for_owner(detection: Detection, *, node: Node, request: ConfigureRequest,
                     force: bool = False, config: Path | None = None) -> Path:
    """The file :func:`plan_for_owner` edits (its ``target``), found without planning the edit
    where the owner edits a file it names (a config in place, MicroK8s's template): what a
    writer locks before it plans under the lock."""
    owner = detection.owner
    if config is not None:
        return config
    if owner.edit is EditKind.IN_PLACE or (
            force and owner.edit in (EditKind.INVENTORY, EditKind.OPERATOR)):
        return node.path(owner.config)
    if owner.edit is EditKind.TEMPLATE_FILE:
        return node.path(owner.edit_paths[0])
    return plan_for_owner(detection, node=node, request=request, force=force).target


def _explicit_config_notes(owner: Owner, config: Path, node: Node) -> tuple[str, ...]:
    if owner.owns_runtime_config or config != node.path(owner.config):
        return ()
    return (f"{config} is rewritten by {owner.name} {owner.regenerated}: this edit will not last "
            f"('gpuready configure' without --config writes where {owner.name} reads)",)


def _in_place(
    owner: Owner, path: Path, request: ConfigureRequest, *, node: Node,
    notes: tuple[str, ...] = ()
) -> OwnerPlan:
    plan = plan_configure(load_config(path, node=node), request)
    return OwnerPlan(owner, path, plan, notes=notes + plan.notes)


def _template_file(owner: Owner, node: Node, request: ConfigureRequest) -> OwnerPlan:
    """MicroK8s: its template is TOML with ${VARS} in strings; edit it like a config."""
    template = node.path(owner.edit_paths[0])
    plan = plan_configure(load_config(template, node=node), request)
    note = (f"{owner.name} writes {owner.config} from {template.name} at its next start "
            f"({owner.apply})")
    return OwnerPlan(owner, template, plan, notes=plan.notes + (note,))


# ---- k3s / RKE2 ------------------------------------------------------------------------------


def template_target(owner: Owner, node: Node, generated: ConfigFile | None) -> Path:
    """The template the owner reads: the first that exists (k3s reads config-v3.toml.tmpl first),
    else the one for the generated config's version (3: config-v3.toml.tmpl)."""
    v3, v2 = (node.path(p) for p in owner.edit_paths)
    for candidate in (v3, v2):
        if node.is_file(candidate):
            return candidate
    version = generated.data.get("version") if generated else None
    return v3 if version == 3 else v2


def _go_template(owner: Owner, node: Node, request: ConfigureRequest) -> OwnerPlan:
    generated_path = node.path(owner.config)
    generated = load_config(generated_path, node=node) if node.is_file(generated_path) else None
    target = template_target(owner, node, generated)
    before = node.read_text(target, kind=FileKind.CONFIG) if node.is_file(target) else None
    template = parse_template(before, target) if before is not None else None
    if template is not None and not template.has_base:
        plan = plan_configure(load_config_text(template.body, target), request)
        return OwnerPlan(owner, target, Plan(target, before, plan.after, plan.summary, plan.notes),
                         notes=plan.notes + (_render_note(owner, target),))
    version = template_version(target)
    body = template.body if template else "\n"
    own = _owner_added_runtime(owner, generated, body, version, request.runtime.name)
    if own is not None:
        return OwnerPlan(owner, target, Plan(target, before or "", before or "", own))
    offset = (template.prefix + template.action).count("\n") if template else 0
    planned = _plan_body(body, version, target, request, offset=offset)
    after = (template.text(planned.after) if template else new_template(planned.after.lstrip("\n")))
    plan = Plan(target, before, after if planned.changes else (before or ""), planned.summary,
                planned.notes)
    if plan.changes and template is None and generated is not None:
        _check_rendered(after, target, generated, version, request.runtime.name)
    summary = plan.summary + (f" in {target.name}" if plan.changes else "")
    plan = Plan(plan.path, plan.before, plan.after, summary, plan.notes)
    return OwnerPlan(owner, target, plan, notes=plan.notes + (_render_note(owner, target),))


def _render_note(owner: Owner, target: Path) -> str:
    return (f"{owner.name} renders {target.name} into {owner.config} {owner.regenerated} "
            f"({owner.apply})")


def _plan_body(
    body: str, version: int, target: Path, request: ConfigureRequest, *, offset: int
) -> Plan:
    """Plan the edit of a template body as a config of ``version`` (a version line is added for
    the planning and taken off again: the base config already has one)."""
    header = f"version = {version}\n"
    try:
        config = load_config_text(header + body, target)
    except InputError as error:  # positions are the template's: one line less than planned
        line = error.line - 1 + offset if error.line else None
        raise InputError(target, error.reason, line=line, column=error.column) from None
    planned = plan_configure(config, request)
    if not planned.after.startswith(header):
        raise InputError(target, "the template body sets its own version; remove it")
    return Plan(target, body, planned.after[len(header):], planned.summary, planned.notes)


def _owner_added_runtime(
    owner: Owner, generated: ConfigFile | None, body: str, version: int, name: str
) -> str | None:
    """Why nothing is added when the owner registers the runtime itself (k3s adds 'nvidia' when
    it finds nvidia-container-runtime): a second table of the same name would make the rendered
    config invalid TOML."""
    if generated is None:
        return None
    spec = spec_of(generated.data, path=generated.path)
    in_body = name in facts.runtimes(load_config_text(f"version = {version}\n" + body).data,
                                     spec)
    entry = facts.runtime(generated.data, spec, name)
    if entry is None or in_body:
        return None
    binary = facts.runtime_options(entry).get("BinaryName", "?")
    return (f"{owner.name} already registers runtime {name} itself (BinaryName {binary}, at "
            f"[{render_key_path(spec.runtime_path(name))}] of {owner.config}): not adding a "
            "second one, which would make the rendered config invalid")


def _check_rendered(text: str, target: Path, generated: ConfigFile, version: int,
                    name: str) -> None:
    """Render the new template against the current generated config, as the owner will."""
    rendered = render(parse_template(text, target), generated.text)
    config = load_config_text(rendered, f"{target} (rendered)")
    if facts.runtime(config.data, spec_of(config.data), name) is None:
        raise InputError(target, f"the rendered template does not register runtime {name}")


# ---- k0s -------------------------------------------------------------------------------------


def _drop_in(owner: Owner, node: Node, request: ConfigureRequest) -> OwnerPlan:
    folder = node.path(owner.edit_paths[0])
    name = request.runtime.name
    notes = (f"k0s imports {folder}/*.toml; a drop-in with a CRI plugin section is merged into its "
             "CRI config, and imports inside a drop-in are not followed (k0sproject/k0s#6547); "
             f"{owner.apply}",)
    existing = _drop_in_with_runtime(node, folder, name)
    target = existing or folder / f"{name}.toml"
    if node.is_file(target):
        plan = plan_configure(load_config(target, node=node), request)
        return OwnerPlan(owner, target, plan, notes=plan.notes + notes)
    main = node.path(owner.config)
    version = (load_config(main, node=node).data.get("version", 2) if node.is_file(main)
               else 2)
    planned = plan_configure(load_config_text(f"version = {version}\n", target), request)
    plan = Plan(target, None, planned.after, f"{planned.summary} in drop-in {target.name}",
                planned.notes)
    return OwnerPlan(owner, target, plan, notes=plan.notes + notes)


def _drop_in_with_runtime(node: Node, folder: Path, name: str) -> Path | None:
    if not node.is_dir(folder):
        return None
    for path in node.glob(folder / "*.toml"):
        try:
            config = load_config(path, node=node)
            if facts.runtime(config.data, spec_of(config.data, path=path), name) is not None:
                return path
        except InputError:
            continue
    return None


# ---- kubespray and the GPU Operator: values, not edits ----------------------------------------


def _advice(owner: Owner, node: Node, request: ConfigureRequest) -> OwnerPlan:
    path = node.path(owner.config)
    if owner.edit is EditKind.OPERATOR:
        drop_in = node.path(owner.edit_paths[0])
        path = drop_in if node.is_file(drop_in) else path
    config = load_config(path, node=node)
    present = facts.runtime(config.data, spec_of(config.data, path=path), request.runtime.name)
    edited = load_config_text(plan_configure(config, request).after, path)
    entry = facts.runtime(edited.data, spec_of(edited.data, path=path), request.runtime.name)
    if owner.edit is EditKind.INVENTORY:
        advice = inventory_variables(request, entry or {}, enable_cdi=request.enable_cdi)
    else:
        advice = operator_values(request)
    state = "is registered there" if present else "is not registered there"
    head = (f"{path} is rewritten by {owner.name} {owner.regenerated}: no file changed "
            f"(runtime {request.runtime.name} {state}); set these values instead, or pass "
            "--force to edit the file anyway")
    return OwnerPlan(owner, path, None, advice=f"{head}\n{advice}")


def inventory_variables(request: ConfigureRequest, entry: Mapping[str, Any], *,
                        enable_cdi: bool) -> str:
    """The kubespray inventory variables that render the same runtime.

    kubespray's config.toml.j2 writes an option unquoted only when its value, as a string, is
    exactly "true" or "false": a YAML boolean renders as "True" and would become the string
    "True" in TOML, which containerd rejects. So booleans are given as quoted strings.
    """
    lines = ["# inventory/<cluster>/group_vars/all/containerd.yml",
             "containerd_additional_runtimes:",
             f"  - name: {request.runtime.name}",
             f"    type: \"{entry.get('runtime_type', 'io.containerd.runc.v2')}\"",
             '    engine: ""',
             '    root: ""']
    spec = entry.get("base_runtime_spec")
    if isinstance(spec, str) and spec:
        lines.append(f"    base_runtime_spec: {spec.rsplit('/', 1)[-1]}")
    lines.append("    options:")
    for key, value in facts.runtime_options(entry).items():
        shown = ("true" if value else "false") if isinstance(value, bool) else value
        lines.append(f"      {key}: \"{shown}\"")
    if enable_cdi:
        lines.append("enable_cdi: true")
    return "\n".join(lines)


def operator_values(request: ConfigureRequest) -> str:
    """The GPU Operator values that make its toolkit register the runtime under this name."""
    return "\n".join([
        "# helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values -f -",
        "toolkit:",
        "  env:",
        "    - name: CONTAINERD_RUNTIME_CLASS",
        f"      value: {request.runtime.name}",
    ])


def owner_template(owner: Owner, node: Node) -> GoTemplate | None:
    """The owner's template as parsed (None when it has none, or none is on the node)."""
    if owner.edit is not EditKind.GO_TEMPLATE:
        return None
    generated_path = node.path(owner.config)
    generated = load_config(generated_path, node=node) if node.is_file(generated_path) else None
    target = template_target(owner, node, generated)
    if not node.is_file(target):
        return None
    return parse_template(node.read_text(target, kind=FileKind.CONFIG), target)
