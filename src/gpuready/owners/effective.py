"""The config containerd will read once its owner has applied what gpuready wrote.

A k3s template is rendered against the owner's base config; a k0s drop-in with a CRI section is
merged into k0s's CRI config as a merge patch (k0sproject/k0s docs/runtime.md); MicroK8s's
template differs from its rendered config only in ``${VARS}`` inside strings. ``setup`` and
``check`` read the contract's facts (version, runtimes, default runtime) from this text, so they
describe what the running containerd will load after the owner's restart, not a file the owner
throws away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuready.compat import tomllib
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.owners.table import EditKind, Owner
from gpuready.owners.template import parse_template, render

if TYPE_CHECKING:  # the plans are read here, made by gpuready.owners.configure
    from gpuready.owners.configure import OwnerPlan


def _read(node: Node, path) -> str | None:
    return node.read_text_or_none(path, kind=FileKind.CONFIG)


def base_of(generated: str, template_text: str | None, path) -> str | None:
    """k3s's base config inside a config it rendered from ``template_text`` (the generated text
    itself when there was no template); None when the config was not rendered from it."""
    if not template_text:
        return generated
    template = parse_template(template_text, path)
    if not template.has_base:
        return None
    prefix, body = template.prefix, template.body
    if generated.startswith(prefix) and generated.endswith(body) and len(generated) >= len(
            prefix) + len(body):
        return generated[len(prefix): len(generated) - len(body)]
    return None


def rendered_template(generated: str, after: str, before: str | None, path) -> str:
    """The config the owner renders from template ``after``, given the config it last generated
    (from ``before``). When that config was not rendered from ``before`` (the owner was not
    restarted since), it is taken as the base; if that gives no valid TOML, it stays as it is."""
    base = base_of(generated, before, path)
    rendered = render(parse_template(after, path), generated if base is None else base)
    try:
        tomllib.loads(rendered)
    except tomllib.TOMLDecodeError:
        return generated
    return rendered


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7396 for tables: ``patch``'s tables merge into ``target``'s, its values replace."""
    merged = dict(target)
    for key, value in patch.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = merge_patch(current, value)
        else:
            merged[key] = value
    return merged


def _merged_text(node: Node, first, second_text: str) -> str:
    return _merged_text_from(_read(node, first) or "", second_text, first)


def effective_config(owned: OwnerPlan, node: Node) -> str:
    """The text of the config containerd will read after the owner applies ``owned``."""
    owner: Owner = owned.owner
    generated = node.path(owner.config)
    plan = owned.plan
    if plan is None:  # values to set elsewhere: containerd keeps reading what is there now
        if owner.edit is EditKind.OPERATOR and node.is_file(owned.target) and (
                owned.target != generated):
            return _merged_text(node, generated, _read(node, owned.target) or "")
        return _read(node, generated) or ""
    if owner.edit is EditKind.GO_TEMPLATE and owned.target != generated:
        current = _read(node, generated) or ""
        if not plan.after:  # the owner registers the runtime itself: nothing was written
            return current
        return rendered_template(current, plan.after, plan.before, owned.target)
    if owner.edit is EditKind.DROP_IN and owned.target != generated:
        return _merged_text(node, node.path(owner.edit_paths[1]), plan.after)
    return substitute(owner, plan.after)


def substitute(owner: Owner, text: str) -> str:
    """``text`` with the variables the owner fills in when it renders (MicroK8s's ${SNAP}...)."""
    for name, value in owner.variables:
        text = text.replace(name, value)
    return text


def current_effective_config(owner: Owner, node: Node) -> str:
    """The config containerd will read at the owner's next start, from the owner's inputs as
    they are now (what ``check`` verifies on a node whose config belongs to an owner)."""
    from gpuready.owners.configure import owner_template

    generated_path = node.path(owner.config)
    generated = _read(node, generated_path) or ""
    if owner.edit is EditKind.GO_TEMPLATE:
        template = owner_template(owner, node)
        if template is None:
            return generated
        return rendered_template(generated, template.text(), template.text(), template.path)
    if owner.edit is EditKind.DROP_IN:
        merged = _read(node, node.path(owner.edit_paths[1])) or ""
        for path in node.glob(node.path(owner.edit_paths[0]) / "*.toml"):
            merged = _merged_text_from(merged, _read(node, path) or "", path)
        return merged
    if owner.edit is EditKind.TEMPLATE_FILE:
        return substitute(owner, _read(node, node.path(owner.edit_paths[0])) or generated)
    if owner.edit is EditKind.OPERATOR and node.is_file(node.path(owner.edit_paths[0])):
        return _merged_text(node, generated_path,
                            _read(node, node.path(owner.edit_paths[0])) or "")
    return generated


def _merged_text_from(first: str, second: str, path) -> str:
    import tomlkit

    try:
        return tomlkit.dumps(merge_patch(tomllib.loads(first), tomllib.loads(second)))
    except tomllib.TOMLDecodeError as error:
        raise InputError(path, f"invalid TOML: {error}") from None


def contract_view(owner: Owner, node: Node, files):
    """The contract's files and a reader for them on a node whose config belongs to ``owner``:
    the config is the one the owner makes containerd read, read as the owner will generate it
    (:func:`current_effective_config`); every other file is read from disk. Plain containerd:
    the contract's own files and reader."""
    if owner.owns_runtime_config:
        return files, files.read

    owned = files._replace(config=node.path(owner.config))
    effective = current_effective_config(owner, node)

    def read(path):
        return effective if path == owned.config else files.read(path)

    return owned, read
