"""Where ``configure`` keeps its record on a node whose containerd belongs to an owner, and where
``unconfigure`` finds it again, through the same owner detection.

On an owned node ``configure`` writes the owner's input (a k3s/RKE2 template, MicroK8s's
template, a k0s drop-in), never the config the owner generates; the record of what it wrote
(:mod:`gpuready.containerd.record`) sits beside that input, so ``unconfigure --root R`` finds it
by asking the owner table where the inputs are, exactly as ``configure`` and ``doctor`` do.

A k3s/RKE2 template that includes the owner's base config is not TOML as a whole (its
``{{ template "base" . }}`` line): its settings are recorded, and taken out again, from the TOML
after that line, read as a config of the template's version (:func:`config_view`). Unchanged
since gpuready wrote it, it gets its original bytes back (or goes, when gpuready created it).
"""

from __future__ import annotations

from pathlib import Path

from gpuready.containerd.record import RECORD_SUFFIX, record_path
from gpuready.node import Node
from gpuready.owners.table import EditKind, Owner
from gpuready.paths import CONTAINERD_CONFIG
from gpuready.plan import Plan


def owner_inputs(owner: Owner, node: Node) -> list[Path]:
    """The files ``configure`` may write for ``owner`` (host paths): its templates, or the
    drop-ins in its folder, including one gpuready's record names that is no longer there."""
    if owner.edit in (EditKind.GO_TEMPLATE, EditKind.TEMPLATE_FILE):
        return [node.path(path) for path in owner.edit_paths]
    if owner.edit is EditKind.DROP_IN:
        folder = node.path(owner.edit_paths[0])
        if not node.is_dir(folder):
            return []
        found = {path: None for path in node.glob(folder / "*.toml")}
        for record in node.glob(folder / f"*.toml{RECORD_SUFFIX}"):
            found.setdefault(record.with_name(record.name[: -len(RECORD_SUFFIX)]), None)
        return sorted(found)
    return []


def is_owner_input(path: Path, owner: Owner, node: Node) -> bool:
    """True when ``path`` is one of the files ``configure`` writes for ``owner`` (not a config
    containerd reads as it is: the never-break gate does not judge it)."""
    path = Path(path)
    if owner.edit is EditKind.DROP_IN:
        return path.parent == node.path(owner.edit_paths[0]) and path.suffix == ".toml"
    return path in owner_inputs(owner, node)


def recorded_targets(owner: Owner, node: Node) -> list[Path]:
    """Every file of the node for which gpuready kept a record: the owner's inputs, the config
    the owner generates (``configure --config`` on it) and containerd's own config (``--force``
    on kubespray or the GPU Operator), each once, in that order."""
    candidates = [*owner_inputs(owner, node), node.path(owner.config),
                  node.path(CONTAINERD_CONFIG)]
    found = {path: None for path in candidates if node.lexists(record_path(path))}
    return list(found)


def config_view(path: Path, text: str | None) -> str | None:
    """A k3s/RKE2 template's TOML as a config: the part after ``{{ template "base" . }}``
    with the version line of the template's version; any other text as it is."""
    from gpuready.owners.template import BASE_ACTION, parse_template

    if text is None or not BASE_ACTION.search(text):
        return text
    from gpuready.owners.configure import template_version

    return f"version = {template_version(path)}\n" + parse_template(text, path).body


def template_view(plan: Plan) -> Plan:
    """``plan`` with its texts as :func:`config_view` reads them (for the record's settings)."""
    return Plan(plan.path, config_view(plan.path, plan.before), config_view(plan.path, plan.after),
                plan.summary)


def remove_from_template(path: Path, text: str, settings: list) -> str:
    """``text`` without gpuready's recorded settings: in a template with the base action, taken
    out of the TOML after it (every other byte kept); any other text as a config."""
    from gpuready.containerd.unconfigure import remove_settings
    from gpuready.errors import InputError
    from gpuready.owners.template import parse_template

    template = parse_template(text, path)
    if not template.has_base:
        return remove_settings(path, text, settings)
    view = config_view(path, text)
    header = view[: len(view) - len(template.body)]
    after = remove_settings(path, view, settings)
    if not after.startswith(header):
        raise InputError(path, "cannot take gpuready's settings out of the template safely; "
                         "nothing written")
    return template.text(after[len(header):])


def view_for(owner: Owner):
    """How the record reads the plans' texts for ``owner`` (None: as they are)."""
    return template_view if owner.edit is EditKind.GO_TEMPLATE else None


def remover_for(owner: Owner):
    """How ``unconfigure`` takes settings out of ``owner``'s input (None: as from a config)."""
    return remove_from_template if owner.edit is EditKind.GO_TEMPLATE else None
