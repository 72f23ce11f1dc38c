"""``gpuready unconfigure``: take back exactly what gpuready added, as its record says.

For each file in the record:

- unchanged since gpuready's last write (same SHA-256), and the backup is the original gpuready
  first changed: the original comes back byte for byte (a drop-in gpuready created is removed);
- edited meanwhile: only gpuready's own parts go (the runtime table it added, or the keys it
  changed on a runtime that was there; ``enable_cdi`` and ``cdi_spec_dirs`` it set; the
  ``imports`` entries it added), and a ``default_runtime_name`` it changed gets its old value
  back. A setting the operator changed since is left alone.
- a whole file gpuready wrote (``setup``'s CDI spec, RuntimeClass manifest and toolkit files):
  restored or removed as above while it is unchanged; once edited it is left as it is, and the
  output says so.

Then the record itself is removed, and the folders gpuready created to hold a file it created
(``conf.d`` for the first drop-in, as the record says) go once they are empty: a folder the
operator made is never removed, nor one that holds anything else. Without a record there is
nothing to do: gpuready never guesses what it added.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.document import load_config_text
from gpuready.containerd.edit import (
    UneditableTableError,
    _joined,
    _trim_end,
    remove_empty_headers,
    set_value,
)
from gpuready.containerd.layout import scan
from gpuready.containerd.record import load_record, record_path, sha256
from gpuready.containerd.versions import KeyPath, render_key_path, spec_of
from gpuready.errors import InputError
from gpuready.fsio import backup_path, remove_empty_folder
from gpuready.node import FileKind, Node
from gpuready.plan import Plan

# How the recorded settings are taken out of one file's text: ``remove_settings`` for a config;
# an owner's template that is not TOML as a whole gives its own (gpuready.owners.records).
Remover = Callable[[Path, str, "list[Mapping]"], str]


def plan_unconfigure(main: Path, *, node: Node, remove: Remover | None = None) -> list[Plan]:
    """One plan per file gpuready changed, then the backups and the record to remove.

    An empty list when gpuready recorded nothing for ``main``. ``remove`` takes the recorded
    settings out of a file edited since gpuready wrote it (default :func:`remove_settings`).
    """
    record = load_record(main, node=node)
    if record is None:
        return []
    plans: list[Plan] = []
    named: set[str] = set()  # each folder is named once, with the first file it holds
    for name, entry in record["files"].items():
        path = Path(name)
        settings = [s for s in record["settings"] if s["file"] == name]
        plans += _with_folder_note(plan_file(path, entry, settings, node=node, remove=remove),
                                   entry, named)
    record_file = record_path(main)
    before = node.read_text(record_file, kind=FileKind.NODE_FACT)
    plans.append(Plan(record_file, before, None, "remove gpuready's record"))
    return plans


def _with_folder_note(plans: list[Plan], entry: Mapping[str, Any], named: set[str]) -> list[Plan]:
    """``plans`` with a note on the file's removal naming the folders gpuready created for it,
    which go too once empty (those not ``named`` yet, which are added to it)."""
    folders = [folder for folder in entry.get("folders") or [] if folder not in named]
    if not folders or not plans or plans[0].after is not None:
        return plans
    named.update(folders)
    names = ", ".join(str(folder) for folder in reversed(folders))
    one = len(folders) == 1
    note = (f"{names}: the {'folder' if one else 'folders'} gpuready created for "
            f"{plans[0].path.name}; removed with it unless something else is in "
            f"{'it' if one else 'them'}")
    return [replace(plans[0], notes=(*plans[0].notes, note)), *plans[1:]]


def recorded_folders(record: Mapping[str, Any]) -> list[Path]:
    """The folders a (loaded) record says gpuready created, deepest first, each once."""
    found: dict[str, None] = {}
    for entry in record.get("files", {}).values():
        for folder in entry.get("folders") or ():
            found.setdefault(folder, None)
    return [Path(folder) for folder in sorted(found, key=lambda name: name.count("/"),
                                              reverse=True)]


def remove_empty_folders(folders: Iterable[Path], *, node: Node) -> list[Path]:
    """Remove each of ``folders`` (deepest first) that is an empty folder now, not a link;
    return those removed. A folder that holds anything stays (``rmdir`` refuses it), and one
    that cannot be removed is left as it is: the files' change is done either way.

    Each is looked up as gpuready wrote into it, links followed inside the root: the operating
    system would follow a link in a parent folder out of ``--root`` (an ``etc/containerd`` that
    links to the host's), and a folder outside the root is never removed."""
    removed = []
    for folder in folders:
        real = node.writable(folder)
        if (not node.is_host and not node.contains(real)) or os.path.islink(real) or (
                not os.path.isdir(real)):
            continue
        if remove_empty_folder(real, node=node):  # from the root's descriptor, as any write
            removed.append(folder)
    return removed


def plan_file(
    path: Path, entry: Mapping[str, Any], settings: list[Mapping], *, node: Node,
    remove: Remover | None = None,
) -> list[Plan]:
    """The plans that take gpuready's changes out of one file (``remove``: see
    :func:`plan_unconfigure`)."""
    current = node.read_text_or_none(path, kind=FileKind.CONFIG)
    if current is None:
        return [Plan(path, None, None, "already removed")]
    backup = backup_path(path)
    if sha256(current) == entry.get("written"):
        if entry.get("original") is None:
            return [Plan(path, current, None, _removal(entry))]
        original = node.read_text_or_none(backup, kind=FileKind.CONFIG)
        if sha256(original) == entry.get("original"):
            return [
                Plan(path, current, original, "restore the original, byte for byte"),
                Plan(backup, original, None, "remove the backup (the file is the original again)"),
            ]
    if entry.get("original") is not None and sha256(current) == entry["original"]:
        # already the original (restored by a run that stopped before it removed the backup, or
        # by hand): only the backup is left to go
        plans = [Plan(path, current, current, "already the original")]
        original = node.read_text_or_none(backup, kind=FileKind.CONFIG)
        if original == current:
            plans.append(Plan(backup, original, None,
                              "remove the backup (the file is the original again)"))
        return plans
    if entry.get("whole_file"):
        return [_left_as_it_is(path, current, entry)]
    after = (remove or remove_settings)(path, current, settings)
    if entry.get("drop_in") and entry.get("original") is None and _only_version(path, after):
        # the drop-in gpuready created, rewritten since (``migrate``): nothing but its version
        # is left, so it goes, with the backup of gpuready's own text that the rewrite kept
        plans = [Plan(path, current, None, "remove the drop-in gpuready wrote (rewritten since)")]
        kept = node.read_text_or_none(backup, kind=FileKind.CONFIG)
        if kept is not None and sha256(kept) == entry.get("written"):
            plans.append(Plan(backup, kept, None, "remove the backup of gpuready's drop-in"))
        return plans
    summary = "remove what gpuready added (the file was edited since)" if after != current else (
        "nothing of gpuready's left in it")
    return [Plan(path, current, after, summary)]


def _only_version(path: Path, text: str) -> bool:
    """True when ``text`` sets nothing but ``version`` (comments aside)."""
    return set(load_config_text(text, path).data) <= {"version"}


def _removal(entry: Mapping[str, Any]) -> str:
    """What removing a file gpuready created is, in the output."""
    if entry.get("drop_in"):
        return "remove the drop-in gpuready wrote"
    return "remove the file gpuready created"


def _left_as_it_is(path: Path, current: str, entry: Mapping[str, Any]) -> Plan:
    """A whole file gpuready wrote that it cannot take back (edited since, or its original no
    longer in the backup): never edited, never removed; the summary says why it stays."""
    if sha256(current) == entry.get("written"):  # its original backup is gone or changed
        why = f"its original is no longer in {backup_path(path).name}"
    else:
        why = "changed since gpuready wrote it"
    return Plan(path, current, current, f"{why}: left as it is (remove it by hand if it is no "
                "longer needed)")


def remove_settings(path: Path, text: str, settings: list[Mapping]) -> str:
    """``text`` without the recorded settings (each only while it still has gpuready's value).

    Text edits on the scanned layout, as the editor makes them: whole key lines and tables go,
    every other line stays. A comment inside a table gpuready added is the operator's (gpuready
    writes none into a config it edits) and stays.
    """
    spec = spec_of(load_config_text(text, path).data, path=path)
    try:
        for setting in settings:
            kind = setting["kind"]
            if kind == "runtime":
                text = _undo_runtime(text, spec.runtime_path(setting["name"]),
                                     setting["previous"])
            elif kind in ("enable_cdi", "cdi_spec_dirs"):
                text = _undo_value(text, (*spec.cri_path, kind), setting)
            elif kind == "default_runtime_name":
                text = _undo_value(text, spec.default_runtime_path, setting)
            elif kind == "imports":
                text = _undo_imports(text, setting)
        for setting in settings:
            if setting["kind"] == "tables":
                text = remove_empty_headers(text, [tuple(p) for p in setting["paths"]],
                                            keep_blank_lines=True)
        load_config_text(text, path)  # still valid TOML, or nothing is written
    except (KeyError, TypeError, ValueError, UneditableTableError, InputError) as error:
        reason = error.reason if isinstance(error, InputError) else error
        raise InputError(path, f"cannot take gpuready's settings out safely: {reason}; "
                         "nothing written") from None
    return text


def _value(text: str, path: KeyPath) -> Any:
    return facts.lookup(tomllib.loads(text), path)


def _cut(text: str, start: int, end: int) -> str:
    return text[:start] + text[end:]


def _delete_key(text: str, path: KeyPath) -> str:
    entry = scan(text).value(path)
    if entry is None or entry.nested:
        return text
    return _cut(text, entry.start, entry.end)


def _undo_runtime(text: str, path: KeyPath, previous: Mapping[str, Any] | None) -> str:
    if _value(text, path) is None:
        return text
    if previous is None:
        return _remove_table(text, path)
    for dotted, value in previous.items():
        key = (*path, *dotted.split("."))
        if value is None:
            text = _delete_key(text, key)
        elif _value(text, key) != value:
            text = set_value(text, key, value).text
    return text


def _remove_table(text: str, path: KeyPath) -> str:
    """Remove the table ``path`` written with headers: each header of it and of its sub-tables,
    with the lines up to the next header, except comment lines."""
    layout = scan(text)
    headers = layout.headers_under(path)
    if not headers or layout.dotted(path) or layout.inline(path):
        raise ValueError(f"[{render_key_path(path)}] is no longer written as headers")
    starts = sorted(h.start for h in layout.headers)
    for header in sorted(headers, key=lambda h: h.start, reverse=True):
        end = next((start for start in starts if start > header.start), len(text))
        kept = "".join(line for line in text[header.end:end].splitlines(keepends=True)
                       if line.lstrip().startswith("#"))
        text = _joined(text[:header.start], kept + text[end:])
    return _trim_end(text)


def _undo_value(text: str, path: KeyPath, setting: Mapping[str, Any]) -> str:
    if _value(text, path) != setting["value"]:
        return text  # changed since: the operator's now
    if setting["previous"] is not None:
        return set_value(text, path, setting["previous"]).text
    text = _delete_key(text, path)
    if setting.get("headerless"):
        text = remove_empty_headers(text, [path[:-1]], keep_blank_lines=True)
    return text


def _undo_imports(text: str, setting: Mapping[str, Any]) -> str:
    entries = tomllib.loads(text).get("imports")
    if not isinstance(entries, list):
        return text
    left = [entry for entry in entries if entry not in setting["entries"]]
    if left == entries:
        return text
    if not left and setting.get("created"):
        return _delete_key(text, ("imports",))
    return set_value(text, ("imports",), left).text
