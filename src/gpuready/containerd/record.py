"""What gpuready added to a node's containerd config, kept in a small record beside the main file.

``config.toml.gpuready.json`` (the ``.json`` suffix keeps it out of ``imports`` globs such as
``conf.d/*.toml``) says, for each file gpuready changed, the SHA-256 of the file before gpuready
first changed it and after its last change, and which settings it added or changed, with the
values they had before. ``unconfigure`` reads only this record: nothing is guessed from the
config. The record is derived from the plans themselves (the data before and after), so it
always describes exactly what was written.

The fields (``format`` 2)::

    {
      "format": 2,
      "config": "<the main config this record sits beside>",
      "files": {
        "<path>": {
          "original": "<SHA-256 before gpuready first changed it; null: gpuready created it>",
          "written": "<SHA-256 after gpuready's last change>",
          "drop_in": true,     # optional: the drop-in ``configure --drop-in`` wrote
          "whole_file": true,  # optional: gpuready wrote the whole text (see below)
          "folders": ["<path>"]  # optional: the folders gpuready created to hold this file
        }
      },
      "settings": [{"file": "<path>", "kind": "runtime" | "enable_cdi" | ..., ...}]
    }

Every path is a node path (``/etc/containerd/config.toml``, relative to ``--root``), so a node
folder copied or moved elsewhere is undone in place. The one exception is a main config named
outside the root on the command line: it is named by its host path, and only it. ``format`` 1
records (host paths) still load while every path they name lies inside the root.

A record is data, never an instruction: :func:`load_record` checks that it is a regular file
owned by the user running gpuready and writable by no one else (as the ``--restart`` journal),
its schema and types, that each path is the main config or lies inside the root, is absolute and
not gpuready's own backup or record, and refuses any other record with the reason, before
anything is touched.

On a node whose containerd belongs to an owner (k3s, RKE2, k0s, MicroK8s) the main file is the
owner's input that ``configure`` or ``setup`` wrote (a template, a k0s drop-in): the record sits
beside it, where ``unconfigure`` finds it through the owner table
(:mod:`gpuready.owners.records`).

``configure`` records the config (and drop-in) it edits; ``setup`` records the same for the
config, and each other file it writes (the CDI spec, the RuntimeClass manifest, the toolkit
files) as a ``whole_file``: a file with no settings of gpuready's inside, so ``unconfigure``
restores its original, or removes it when gpuready created it, only while it still holds what
gpuready wrote, and leaves it as it is once it was changed. A record without ``whole_file``
(every record ``configure`` writes) reads as before.

``folders`` lists, top down, the folders that did not exist before gpuready created the file
(``conf.d`` for the first drop-in), each a folder above that file inside the root (never the
root itself). ``unconfigure`` removes them, deepest first, once they are empty: a folder the
operator made is never in the list, and one that holds anything else stays.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.document import parse_toml
from gpuready.containerd.versions import spec_of
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.paths import BACKUP_SUFFIX
from gpuready.plan import Plan
from gpuready.textfile import sha256

RECORD_SUFFIX = ".gpuready.json"
FORMAT = 2
HOST_PATHS_FORMAT = 1  # older records: files named by host path
# The runtime keys gpuready sets on a runtime that was already registered.
OWNED_RUNTIME_KEYS = (("runtime_type",), ("options", "BinaryName"), ("options", "SystemdCgroup"))
ABSENT = None  # a setting that was not in the file


def record_path(main: Path) -> Path:
    """Where the record of ``main`` lives: ``config.toml.gpuready.json`` beside it (for a file in
    a folder CRI-O reads whole, in the folder above: :func:`gpuready.paths.kept_beside`)."""
    from gpuready.paths import kept_beside

    return kept_beside(main, RECORD_SUFFIX)


def is_record(plan: Plan) -> bool:
    """True for the record's plan (shown as one line, never as a diff)."""
    return plan.path.name.endswith(RECORD_SUFFIX)


def is_bookkeeping(plan: Plan) -> bool:
    """True for gpuready's own files beside the config (the record, a backup): their changes
    are reported in one line each, without a diff."""
    return is_record(plan) or plan.path.name.endswith(BACKUP_SUFFIX)


def load_record(main: Path, *, node: Node) -> dict[str, Any] | None:
    """The record of ``main`` with its files named by host path, or None when gpuready has
    recorded nothing there. A record that fails any check, or that another user could have
    written (:meth:`~gpuready.node.Node.require_trusted`), is refused (:class:`InputError`)."""
    path = record_path(main)
    node.require_trusted(path, what="gpuready record")  # unconfigure restores what it says
    text = node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError as error:
        raise InputError(path, f"unreadable gpuready record: {error}") from None
    if not isinstance(record, dict) or record.get("format") not in (FORMAT, HOST_PATHS_FORMAT):
        raise InputError(path, "not a gpuready record this version understands")
    try:
        return _checked(record, main=main, node=node)
    except _Refused as refused:
        raise InputError(path, f"gpuready record refused: {refused}; nothing changed") from None


def render_record(
    record: Mapping[str, Any], *, main: Path | None = None, node: Node | None = None
) -> str:
    """The record's text, its files (held by host path) named by node path; without ``main``
    and ``node``, the record as it is given."""
    if main is None or node is None:
        return json.dumps(record, indent=2, sort_keys=True) + "\n"
    names = {key: record_name(Path(key), main=main, node=node) for key in record["files"]}
    stored = {
        **record,
        "format": FORMAT,
        "config": record_name(main, main=main, node=node),
        "files": {names[key]: _entry_named(entry, main=main, node=node)
                  for key, entry in record["files"].items()},
        "settings": [{**setting, "file": names.get(setting["file"], setting["file"])}
                     for setting in record["settings"]],
    }
    return json.dumps(stored, indent=2, sort_keys=True) + "\n"


def _entry_named(entry: Mapping[str, Any], *, main: Path, node: Node) -> Mapping[str, Any]:
    """A file's entry with its ``folders`` (held by host path) named by node path."""
    if "folders" not in entry:
        return entry
    return {**entry, "folders": [record_name(Path(folder), main=main, node=node)
                                 for folder in entry["folders"]]}


def record_name(path: Path, *, main: Path, node: Node) -> str:
    """How a record names ``path``: its node path, or the host path of a main config outside
    the root (the one file a record may name there)."""
    absolute = os.path.abspath(path)
    if node.is_host or not node.contains(absolute):
        return absolute
    return str(node.node_path(absolute))


def read_backup(backup: Path, *, node: Node) -> str | None:
    """The text of gpuready's backup at ``backup`` (None: there is none), refused
    (:class:`InputError`) when another user could have written it: restoring it puts its bytes
    into a file the node runs on."""
    node.require_trusted(backup, what="backup")
    return node.read_text_or_none(backup, kind=FileKind.CONFIG)


class _Refused(Exception):
    """Why a record is refused (the message's reason)."""


_SHA256 = re.compile(r"[0-9a-f]{64}")
_KINDS = ("runtime", "enable_cdi", "cdi_spec_dirs", "default_runtime_name", "tables", "imports")
_OWN_SUFFIXES = (RECORD_SUFFIX, BACKUP_SUFFIX)


def _checked(record: dict[str, Any], *, main: Path, node: Node) -> dict[str, Any]:
    """``record`` checked, its files and settings named by host path (see :func:`load_record`)."""
    config = record.get("config")
    if not isinstance(config, str):
        raise _Refused("'config' is not a path")
    if record["format"] == FORMAT and config != record_name(main, main=main, node=node):
        raise _Refused(f"it describes {config}, not {record_name(main, main=main, node=node)}")
    files, settings = record.get("files"), record.get("settings")
    if not isinstance(files, dict):
        raise _Refused("'files' is not an object")
    if not isinstance(settings, list):
        raise _Refused("'settings' is not a list")
    hosts = {name: _host_path(name, record["format"], main=main, node=node) for name in files}
    for name, entry in files.items():
        _check_entry(name, entry)
    for setting in settings:
        _check_setting(setting, files)
    return {
        **record,
        "files": {hosts[name]: _entry_on_host(name, dict(entry), record["format"], node=node)
                  for name, entry in files.items()},
        "settings": [{**setting, "file": hosts[setting["file"]]} for setting in settings],
    }


def _host_path(name: Any, form: int, *, main: Path, node: Node) -> str:
    """The host path a record's file name stands for; refused unless it is the main config or
    an absolute, normalised path inside the root that is not gpuready's own bookkeeping."""
    if not isinstance(name, str) or not name:
        raise _Refused("a file name is not a path")
    if name == record_name(main, main=main, node=node) or (
            form == HOST_PATHS_FORMAT and name == str(main)):
        return str(main)
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise _Refused(f"file {name!r} has a control character in its name")
    if not name.startswith("/") or posixpath.normpath(name) != name:
        raise _Refused(f"file {name!r} is not an absolute, normalised path")
    if name.endswith(_OWN_SUFFIXES):
        raise _Refused(f"file {name} is gpuready's own backup or record")
    if form == FORMAT:
        return str(node.path(name))
    if not node.contains(name):
        raise _Refused(f"file {name} lies outside --root {node.root}")
    return name


def _entry_on_host(name: str, entry: dict[str, Any], form: int, *, node: Node
                   ) -> dict[str, Any]:
    """``entry`` with its ``folders`` named by host path, each checked to be a folder above the
    file ``name`` and strictly inside the root (a record cannot name any other folder)."""
    folders = entry.get("folders")
    if folders is None:
        return entry
    if not isinstance(folders, list):
        raise _Refused(f"{name}: 'folders' is not a list")
    if entry.get("original") is not None:
        raise _Refused(f"{name}: 'folders' on a file gpuready did not create")
    hosts = []
    for folder in folders:
        if not isinstance(folder, str) or not folder.startswith("/") or (
                posixpath.normpath(folder) != folder) or folder == "/":
            raise _Refused(f"{name}: folder {folder!r} is not an absolute, normalised path")
        if any(ord(char) < 32 or ord(char) == 127 for char in folder):
            raise _Refused(f"{name}: folder {folder!r} has a control character in its name")
        if not name.startswith(folder + "/"):
            raise _Refused(f"{name}: folder {folder} does not hold it")
        host = node.path(folder) if form == FORMAT else Path(folder)
        if not node.is_host and (not node.contains(host) or host == node.root):
            raise _Refused(f"{name}: folder {folder} lies outside --root {node.root}")
        hosts.append(str(host))
    return {**entry, "folders": hosts}


def created_folders(path: Path, *, node: Node) -> list[Path]:
    """The folders, top down, that writing the file ``path`` (a host path) would create: those
    above it that do not exist yet, strictly inside the root (looked up as gpuready writes:
    links followed inside the root, not out of it)."""
    missing: list[Path] = []
    folder = Path(os.path.abspath(path)).parent
    while (folder != folder.parent and folder != node.root and node.contains(folder)
           and not node.lexists(folder)):
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def _check_entry(name: str, entry: Any) -> None:
    """One ``files`` entry: the two hashes (a SHA-256 or null) and the optional flags."""
    if not isinstance(entry, dict):
        raise _Refused(f"the entry of {name} is not an object")
    for key in ("original", "written"):
        value = entry.get(key)
        if key not in entry or not (value is None or (
                isinstance(value, str) and _SHA256.fullmatch(value))):
            raise _Refused(f"{name}: {key!r} is not a SHA-256 or null")
    for key in ("drop_in", "whole_file"):
        if not isinstance(entry.get(key, False), bool):
            raise _Refused(f"{name}: {key!r} is not true or false")


def _check_setting(setting: Any, files: Mapping[str, Any]) -> None:
    """One ``settings`` item: a known kind, in a recorded file, with fields of the right type."""
    if not isinstance(setting, dict):
        raise _Refused("a setting is not an object")
    if setting.get("file") not in files:
        raise _Refused(f"a setting names {setting.get('file')!r}, a file the record has not")
    kind = setting.get("kind")
    if kind not in _KINDS:
        raise _Refused(f"a setting has the unknown kind {kind!r}")
    if kind == "runtime" and not (isinstance(setting.get("name"), str) and setting["name"]
                                  and isinstance(setting.get("previous"), (dict, type(None)))):
        raise _Refused("a runtime setting has no runtime name or an odd 'previous'")
    if kind == "tables" and not _lists_of_strings(setting.get("paths"), depth=2):
        raise _Refused("a tables setting's 'paths' are not lists of keys")
    if kind == "imports" and not _lists_of_strings(setting.get("entries"), depth=1):
        raise _Refused("an imports setting's 'entries' are not strings")


def _lists_of_strings(value: Any, *, depth: int) -> bool:
    """True for a list of strings (``depth`` 1) or of such lists (``depth`` 2)."""
    if not isinstance(value, list):
        return False
    if depth == 1:
        return all(isinstance(item, str) for item in value)
    return all(_lists_of_strings(item, depth=depth - 1) for item in value)


def record_changes(
    previous: Mapping[str, Any] | None,
    plans: list[Plan],
    *,
    main: Path,
    runtime_name: str,
    drop_in: Path | None = None,
    whole: Collection[Path] = (),
    node: Node | None = None,
    view: Callable[[Plan], Plan] | None = None,
) -> dict[str, Any]:
    """The record after ``plans`` are written: ``previous`` (kept where it already says what
    a setting was before gpuready) plus what these plans add.

    A plan whose path is in ``whole`` is recorded as a ``whole_file``, without settings. Given
    the ``node`` the plans are written on (before they are), a file gpuready creates records
    the folders writing it creates (:func:`created_folders`), for ``unconfigure`` to remove.
    ``view`` gives the plan whose texts are read for the settings (an owner's template that is
    not TOML as a whole: its TOML part); the hashes are always those of the files' own text.
    """
    record: dict[str, Any] = json.loads(json.dumps(previous)) if previous else {
        "format": FORMAT, "config": str(main), "files": {}, "settings": []
    }
    for plan in plans:
        if not plan.changes:
            continue
        key = str(plan.path)
        new = key not in record["files"]
        entry = record["files"].setdefault(key, {"original": sha256(plan.before)})
        entry["written"] = sha256(plan.after)
        if new and node is not None and plan.before is None and plan.after is not None:
            folders = created_folders(plan.path, node=node)
            if folders:
                entry["folders"] = [str(folder) for folder in folders]
        if drop_in is not None and plan.path == drop_in:
            entry["drop_in"] = True
        if plan.path in whole:
            entry["whole_file"] = True
            continue
        known = {(s["file"], s["kind"], s.get("name")) for s in record["settings"]}
        for setting in settings_added(view(plan) if view else plan, runtime_name=runtime_name):
            if entry["original"] is None and setting["kind"] != "runtime":
                continue  # a file gpuready created is its own; the runtime is what it is for
            if (key, setting["kind"], setting.get("name")) not in known:
                record["settings"].append({"file": key, **setting})
            elif setting["kind"] == "imports":
                _add_imports(record["settings"], key, setting["entries"])
    return record


def _add_imports(settings: list[dict[str, Any]], key: str, entries: list[str]) -> None:
    """Add ``entries`` to the ``imports`` setting already recorded for the file ``key`` (a
    second drop-in imported by the same file): each entry gpuready added is taken back."""
    recorded = next(s for s in settings if s["file"] == key and s["kind"] == "imports")
    recorded["entries"] += [entry for entry in entries if entry not in recorded["entries"]]


def settings_added(plan: Plan, *, runtime_name: str) -> list[dict[str, Any]]:
    """What ``plan`` adds or changes among the settings gpuready owns, with their old values."""
    before = parse_toml(plan.before, plan.path) if plan.before else {}
    after = parse_toml(plan.after, plan.path)
    spec = spec_of(after, path=plan.path)
    found: list[dict[str, Any]] = []
    old_runtime = facts.runtime(before, spec, runtime_name)
    if facts.runtime(after, spec, runtime_name) != old_runtime:
        found.append({
            "kind": "runtime",
            "name": runtime_name,
            "previous": None if old_runtime is None else {
                ".".join(path): facts.lookup(old_runtime, path) for path in OWNED_RUNTIME_KEYS
            },
        })
    for key in ("enable_cdi", "cdi_spec_dirs"):
        path = (*spec.cri_path, key)
        if facts.lookup(after, path) != facts.lookup(before, path):
            found.append({"kind": key, "previous": facts.lookup(before, path),
                          "value": facts.lookup(after, path),
                          "headerless": _headerless(plan.before, spec.cri_path)})
    old_default = facts.lookup(before, spec.default_runtime_path)
    if facts.lookup(after, spec.default_runtime_path) != old_default:
        found.append({"kind": "default_runtime_name", "previous": old_default,
                      "value": facts.lookup(after, spec.default_runtime_path)})
    created = [list(path) for path in (spec.cri_path[:1], spec.cri_path, spec.containerd_path,
                                       spec.runtimes_path)
               if facts.lookup(before, path) is None and facts.lookup(after, path) is not None]
    if created:
        found.append({"kind": "tables", "paths": created})
    old_imports = facts.imports(before)
    added = [entry for entry in facts.imports(after) if entry not in old_imports]
    if added:
        found.append({"kind": "imports", "entries": added, "created": "imports" not in before})
    return found


def _headerless(text: str | None, path: tuple[str, ...]) -> bool:
    """True when the table at ``path`` exists in ``text`` only through its sub-tables' headers
    (``[a.b.c]`` without ``[a.b]``): a key added to it gave it a header of its own."""
    if not text or facts.lookup(parse_toml(text, "<before>"), path) is None:
        return False
    import tomlkit

    node = tomlkit.parse(text)
    for key in path:
        node = node[key]
    return bool(getattr(node, "is_super_table", lambda: False)())
