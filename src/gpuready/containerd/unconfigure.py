"""``gpuready unconfigure``: take back exactly what gpuready added, as its record says.

For each file in the record:

- unchanged since gpuready's last write (same SHA-256), and the backup is the original gpuready
  first changed: the original comes back byte for byte (a drop-in gpuready created is removed);
- edited meanwhile: only gpuready's own parts go (the runtime table it added, or the keys it
  changed on a runtime that was there; ``enable_cdi`` and ``cdi_spec_dirs`` it set; the
  ``imports`` entries it added), and a ``default_runtime_name`` it changed gets its old value
  back. A setting the operator changed since is left alone.

Then the record itself is removed. Without a record there is nothing to do: gpuready never
guesses what it added.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd.document import load_config_text, parse_for_edit, render_edit
from gpuready.containerd.edit import set_values, style_from
from gpuready.containerd.record import load_record, record_path, sha256
from gpuready.containerd.versions import KeyPath, spec_of
from gpuready.errors import InputError
from gpuready.fsio import backup_path
from gpuready.node import FileKind, Node
from gpuready.plan import Plan


def plan_unconfigure(main: Path, *, node: Node) -> list[Plan]:
    """One plan per file gpuready changed, then the backups and the record to remove.

    An empty list when gpuready recorded nothing for ``main``.
    """
    record = load_record(main, node=node)
    if record is None:
        return []
    plans: list[Plan] = []
    for name, entry in record["files"].items():
        path = Path(name)
        settings = [s for s in record["settings"] if s["file"] == name]
        plans += plan_file(path, entry, settings, node=node)
    record_file = record_path(main)
    before = node.read_text(record_file, kind=FileKind.NODE_FACT)
    plans.append(Plan(record_file, before, None, "remove gpuready's record"))
    return plans


def plan_file(
    path: Path, entry: Mapping[str, Any], settings: list[Mapping], *, node: Node
) -> list[Plan]:
    """The plans that take gpuready's changes out of one file."""
    current = node.read_text_or_none(path, kind=FileKind.CONFIG)
    if current is None:
        return [Plan(path, None, None, "already removed")]
    if sha256(current) == entry.get("written"):
        if entry.get("original") is None:
            return [Plan(path, current, None, "remove the drop-in gpuready wrote")]
        backup = backup_path(path)
        original = node.read_text_or_none(backup, kind=FileKind.CONFIG)
        if sha256(original) == entry.get("original"):
            return [
                Plan(path, current, original, "restore the original, byte for byte"),
                Plan(backup, original, None, "remove the backup (the file is the original again)"),
            ]
    after = remove_settings(path, current, settings)
    summary = "remove what gpuready added (the file was edited since)" if after != current else (
        "nothing of gpuready's left in it")
    return [Plan(path, current, after, summary)]


def remove_settings(path: Path, text: str, settings: list[Mapping]) -> str:
    """``text`` without the recorded settings (each only while it still has gpuready's value)."""
    config = load_config_text(text, path)
    spec = spec_of(config.data, path=path)
    document = parse_for_edit(config)
    try:
        for setting in settings:
            kind = setting["kind"]
            if kind == "runtime":
                _undo_runtime(document, spec.runtime_path(setting["name"]), setting["previous"])
            elif kind in ("enable_cdi", "cdi_spec_dirs"):
                _undo_value(document, (*spec.cri_path, kind), setting)
            elif kind == "default_runtime_name":
                _undo_value(document, spec.default_runtime_path, setting)
            elif kind == "imports":
                _undo_imports(document, setting)
        for setting in settings:
            if setting["kind"] == "tables":
                _remove_empty_tables(document, setting["paths"])
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(path, f"cannot take gpuready's settings out safely: {error}; "
                         "nothing written") from None
    return render_edit(config, document)


def _container(document, path: KeyPath):
    node = document
    for key in path:
        if not hasattr(node, "get") or key not in node:
            return None
        node = node[key]
    return node


def _undo_runtime(document, path: KeyPath, previous: Mapping[str, Any] | None) -> None:
    parent = _container(document, path[:-1])
    if parent is None or path[-1] not in parent:
        return
    if previous is None:
        _remove_table(document, parent, path[-1])
        return
    runtime = parent[path[-1]]
    for dotted, value in previous.items():
        keys = tuple(dotted.split("."))
        holder = _container(runtime, keys[:-1])
        if holder is None:
            continue
        if value is None:
            if keys[-1] in holder:
                del holder[keys[-1]]
        else:
            set_values(holder, {keys[-1]: value}, style_from(runtime))


def _remove_table(document, parent, name: str) -> None:
    """Remove gpuready's table; comments the operator wrote into it stay (gpuready writes none
    into a config it edits). tomlkit keeps a comment after the last table inside that table."""
    table = parent[name]
    comments = list(_comments(table))
    was_last = bool(comments) and document.as_string().endswith(table.as_string())
    del parent[name]
    for comment in comments:
        (document if was_last else parent).add(comment)


def _comments(table):
    import tomlkit.items

    for _, item in table.value.body:
        if isinstance(item, tomlkit.items.Comment):
            yield item
        elif isinstance(item, tomlkit.items.Table):
            yield from _comments(item)


def _only_tables(table) -> bool:
    import tomlkit.items

    # deleted keys stay in the body as Null items
    kinds = tomlkit.items.Whitespace | tomlkit.items.Table | tomlkit.items.Null
    return all(isinstance(item, kinds) for _, item in table.value.body)


def _drop_header(table) -> None:
    """Make a table headerless again (as before gpuready added a key to it): its blank lines go
    with the header."""
    import tomlkit.items

    for _, item in table.value.body:
        if isinstance(item, tomlkit.items.Whitespace):
            item._s = ""  # emptied in place: tomlkit indexes the body by position
    table._is_super_table = True


def _remove_empty_tables(document, paths: list[list[str]]) -> None:
    """Remove the tables gpuready created that hold nothing any more, deepest first."""
    for path in sorted(paths, key=len, reverse=True):
        parent = _container(document, tuple(path[:-1]))
        if parent is not None and path[-1] in parent and _is_empty(parent[path[-1]]):
            del parent[path[-1]]


def _is_empty(table) -> bool:
    import tomlkit.items

    if not isinstance(table, tomlkit.items.Table):
        return False
    return all(
        isinstance(item, tomlkit.items.Whitespace | tomlkit.items.Null)
        or (isinstance(item, tomlkit.items.Table) and _is_empty(item))
        for _, item in table.value.body
    )


def _undo_value(document, path: KeyPath, setting: Mapping[str, Any]) -> None:
    holder = _container(document, path[:-1])
    if holder is None or path[-1] not in holder or holder[path[-1]] != setting["value"]:
        return  # changed since: the operator's now
    if setting["previous"] is None:
        del holder[path[-1]]
        if setting.get("headerless") and _only_tables(holder):
            _drop_header(holder)
    else:
        set_values(holder, {path[-1]: setting["previous"]}, style_from(holder))


def _undo_imports(document, setting: Mapping[str, Any]) -> None:
    entries = document.get("imports")
    if entries is None:
        return
    for entry in setting["entries"]:
        while entry in entries:
            entries.remove(entry)
    if setting.get("created") and len(entries) == 0:
        del document["imports"]
