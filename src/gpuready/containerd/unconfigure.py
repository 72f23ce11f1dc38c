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

import json
import os
from collections.abc import Callable, Iterable, Mapping
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
from gpuready.containerd.record import (
    load_record,
    read_backup,
    record_path,
    render_record,
    sha256,
)
from gpuready.containerd.versions import KeyPath, render_key_path, spec_of
from gpuready.errors import InputError
from gpuready.fsio import backup_path, remove_empty_folder
from gpuready.node import FileKind, Node
from gpuready.plan import Plan

# How the recorded settings are taken out of one file's text: ``remove_settings`` for a config;
# an owner's template that is not TOML as a whole gives its own (gpuready.owners.records).
Remover = Callable[[Path, str, "list[Mapping]"], str]


def plan_unconfigure(main: Path, *, node: Node, remove: Remover | None = None,
                     runtime: str | None = None) -> list[Plan]:
    """One plan per file gpuready changed, then the backups and the record to remove.

    An empty list when gpuready recorded nothing for ``main``. ``remove`` takes the recorded
    settings out of a file edited since gpuready wrote it (default :func:`remove_settings`).
    ``runtime`` (``--runtime-name``): take back only that runtime (see
    :func:`plan_unconfigure_runtime`); None: everything recorded.
    """
    record = load_record(main, node=node)
    if record is None:
        return []
    if runtime is not None:
        names = recorded_runtimes(record)
        require_recorded(runtime, names, where=record_path(main))
        if names != [runtime]:  # the last recorded runtime goes with everything else
            return plan_unconfigure_runtime(main, record, runtime, node=node, remove=remove)
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


class NotRecordedError(InputError):
    """``unconfigure --runtime-name X`` where gpuready's record names no runtime X."""


def recorded_runtimes(record: Mapping[str, Any]) -> list[str]:
    """The runtimes a (loaded) record says gpuready registered, in the order it did."""
    names = [s["name"] for s in record["settings"] if s["kind"] == "runtime"]
    return list(dict.fromkeys(names))


def require_recorded(runtime: str, names: list[str], *, where: Path) -> None:
    """Refuse (exit 2) to take back ``runtime`` when the record at ``where`` does not name it:
    gpuready removes only what it added, and says what it did add."""
    if runtime in names:
        return
    which = (f"--runtime-name {names[0]}" if len(names) == 1
             else "--runtime-name and one of them")
    recorded = (f"it records {', '.join(names)} (run again with {which}, or without "
                "--runtime-name to take back everything gpuready added)" if names
                else "it records no runtime")
    raise NotRecordedError(where, f"gpuready never added runtime {runtime!r} here: {recorded}; "
                           "nothing written")


def owned_by(setting: Mapping[str, Any], runtime: str) -> bool:
    """True for a recorded setting that belongs to ``runtime`` alone: its runtime table, and a
    ``default_runtime_name`` gpuready set to it (the other settings, such as ``enable_cdi``, an
    ``imports`` entry or the tables above the runtimes, serve every runtime recorded)."""
    if setting["kind"] == "runtime":
        return setting.get("name") == runtime
    return setting["kind"] == "default_runtime_name" and setting.get("value") == runtime


def plan_unconfigure_runtime(main: Path, record: Mapping[str, Any], runtime: str, *, node: Node,
                             remove: Remover | None = None) -> list[Plan]:
    """Take back ``runtime`` alone, while the record names other runtimes too: its settings go
    from each file that holds them (a drop-in that held only it goes whole, with its ``imports``
    entry), every other setting stays, and the record is rewritten without its part (the
    files' ``written`` hashes updated, so a later ``unconfigure`` still restores their
    originals byte for byte). The record comes last: it is written after the files."""
    kept = json.loads(json.dumps(record))
    gone = [name for name, entry in record["files"].items()
            if entry.get("drop_in") and _only_runtime(record, name, runtime)]
    undo = {name: [s for s in record["settings"] if s["file"] == name and owned_by(s, runtime)]
            for name in record["files"] if name not in gone}
    undo = {name: settings for name, settings in undo.items() if settings}
    plans: list[Plan] = []
    for name in gone:
        plans += plan_file(Path(name), record["files"][name],
                           [s for s in record["settings"] if s["file"] == name],
                           node=node, remove=remove)
        _forget_file(kept, name, node=node)
    for name in record["files"]:
        if name in gone:
            continue
        imports = _imports_of(record, name, [node.node_path(n) for n in gone])
        settings = undo.get(name, []) + imports
        if not settings:
            continue
        current = node.read_text_or_none(Path(name), kind=FileKind.CONFIG)
        if current is None:
            continue
        after = (remove or remove_settings)(Path(name), current, settings)
        summary = (f"remove runtime {runtime} (what gpuready added for the other runtimes "
                   "stays)" if undo.get(name) else f"remove the imports entry of {runtime}'s "
                   "drop-in")
        plans.append(Plan(Path(name), current, after, summary))
        if sha256(current) == record["files"][name]["written"]:
            # still what gpuready wrote: so is the text without the runtime. A file edited
            # since keeps the old hash, so that the operator's edit is never taken for
            # gpuready's and undone by restoring the original later
            kept["files"][name]["written"] = sha256(after)
    kept["settings"] = [s for s in kept["settings"] if not owned_by(s, runtime)]
    where = record_path(main)
    before = node.read_text(where, kind=FileKind.NODE_FACT)
    plans.append(Plan(where, before, render_record(kept, main=main, node=node),
                      f"remove runtime {runtime} from gpuready's record"))
    return plans


def _only_runtime(record: Mapping[str, Any], name: str, runtime: str) -> bool:
    """True when the file ``name`` holds runtime ``runtime`` and no other recorded runtime."""
    runtimes = {s.get("name") for s in record["settings"]
                if s["file"] == name and s["kind"] == "runtime"}
    return runtimes == {runtime}


def _forget_file(record: dict[str, Any], name: str, *, node: Node) -> None:
    """Drop the file ``name`` (a drop-in that goes) from ``record``: its entry and settings; the
    folders gpuready created for it pass to another file gpuready created in them, or go with
    it (:func:`gpuready.workflow.daytwo.folders_to_remove`)."""
    entry = record["files"].pop(name)
    record["settings"] = [s for s in record["settings"] if s["file"] != name]
    folders = entry.get("folders") or []
    for other, held in record["files"].items():
        inside = [f for f in folders if other.startswith(f + "/")]
        if held.get("original") is None and inside:
            held["folders"] = list(dict.fromkeys([*(held.get("folders") or []), *inside]))
            folders = [f for f in folders if f not in inside]
    for setting in record["settings"]:
        if setting["kind"] == "imports":
            setting["entries"] = [e for e in setting["entries"]
                                  if e != str(node.node_path(Path(name)))]
    record["settings"] = [s for s in record["settings"]
                          if s["kind"] != "imports" or s["entries"]]


def _imports_of(record: Mapping[str, Any], name: str, gone: list) -> list[dict[str, Any]]:
    """The ``imports`` settings to undo in the file ``name``: the entries gpuready added there
    that name a drop-in which goes (``gone``: their node paths)."""
    wanted = {str(path) for path in gone}
    found = []
    for setting in record["settings"]:
        if setting["file"] == name and setting["kind"] == "imports":
            entries = [e for e in setting["entries"] if e in wanted]
            if entries:
                found.append({**setting, "entries": entries,
                              "created": setting.get("created") and entries == setting["entries"]})
    return found


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
    return [plans[0]._replace(notes=(*plans[0].notes, note)), *plans[1:]]


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
            return [Plan(path, current, None, _removal(entry)),
                    *created_backup(path, node=node)]
        original = read_backup(backup, node=node)
        if sha256(original) == entry.get("original"):
            return [
                Plan(path, current, original, "restore the original, byte for byte"),
                Plan(backup, original, None, "remove the backup (the file is the original again)"),
            ]
    if entry.get("original") is not None and sha256(current) == entry["original"]:
        # already the original (restored by a run that stopped before it removed the backup, or
        # by hand): only the backup is left to go
        plans = [Plan(path, current, current, "already the original")]
        original = read_backup(backup, node=node)
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
        kept = read_backup(backup, node=node)
        if kept is not None and sha256(kept) == entry.get("written"):
            plans.append(Plan(backup, kept, None, "remove the backup of gpuready's drop-in"))
        return plans
    summary = "remove what gpuready added (the file was edited since)" if after != current else (
        "nothing of gpuready's left in it")
    return [Plan(path, current, after, summary)]


def created_backup(path: Path, *, node: Node) -> list[Plan]:
    """The removal of the backup beside a file gpuready created (none: no backup): the file did
    not exist before gpuready, so a backup of it holds a text of gpuready's own making (made
    when a second runtime, or a runtime taken back alone, changed it)."""
    backup = backup_path(node.writable(path))
    kept = node.read_text_or_none(backup, kind=FileKind.CONFIG)
    if kept is None:
        return []
    return [Plan(backup, kept, None, "remove the backup of the file gpuready created")]


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
