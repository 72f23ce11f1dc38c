"""Where ``configure`` keeps its record on a node whose containerd belongs to an owner, and where
``unconfigure`` finds it again, through the same owner detection.

On an owned node ``configure`` writes the owner's input (a k3s/RKE2 template, MicroK8s's
template, a k0s drop-in), never the config the owner generates; the record of what it wrote
(:mod:`gpuready.containerd.record`) sits beside that input, so ``unconfigure --root R`` finds it
by asking the owner table where the inputs are, exactly as ``configure`` and ``doctor`` do.

A k3s/RKE2 template that includes the owner's base config is not TOML (its ``{{ template "base"
. }}`` line): it is recorded as a whole file, so ``unconfigure`` gives back its original bytes
(or removes a template gpuready created) while it still holds what gpuready wrote, and leaves it
as it is once it was edited since.
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


def whole_files(owner: Owner, plans: list[Plan]) -> tuple[Path, ...]:
    """The plans' files to record as whole files: a k3s/RKE2 template with Go actions, whose
    text is not TOML (see the module's docstring)."""
    if owner.edit is not EditKind.GO_TEMPLATE:
        return ()
    return tuple(plan.path for plan in plans
                 if any("{{" in (text or "") for text in (plan.before, plan.after)))
