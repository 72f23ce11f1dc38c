"""What gpuready added to a node's containerd config, kept in a small record beside the main file.

``config.toml.gpuready.json`` (the ``.json`` suffix keeps it out of ``imports`` globs such as
``conf.d/*.toml``) says, for each file gpuready changed, the SHA-256 of the file before gpuready
first changed it and after its last change, and which settings it added or changed, with the
values they had before. ``unconfigure`` reads only this record: nothing is guessed from the
config. The record is derived from the plans themselves (the data before and after), so it
always describes exactly what was written.

The fields (``format`` 1)::

    {
      "format": 1,
      "config": "<the main config this record sits beside>",
      "files": {
        "<path>": {
          "original": "<SHA-256 before gpuready first changed it; null: gpuready created it>",
          "written": "<SHA-256 after gpuready's last change>",
          "drop_in": true,     # optional: the drop-in ``configure --drop-in`` wrote
          "whole_file": true   # optional: gpuready wrote the whole text (see below)
        }
      },
      "settings": [{"file": "<path>", "kind": "runtime" | "enable_cdi" | ..., ...}]
    }

``configure`` records the config (and drop-in) it edits; ``setup`` records the same for the
config, and each other file it writes (the CDI spec, the RuntimeClass manifest, the toolkit
files) as a ``whole_file``: a file with no settings of gpuready's inside, so ``unconfigure``
restores its original, or removes it when gpuready created it, only while it still holds what
gpuready wrote, and leaves it as it is once it was changed. A record without ``whole_file``
(every record ``configure`` writes) reads as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.document import parse_toml
from gpuready.containerd.versions import spec_of
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.plan import Plan

RECORD_SUFFIX = ".gpuready.json"
FORMAT = 1
# The runtime keys gpuready sets on a runtime that was already registered.
OWNED_RUNTIME_KEYS = (("runtime_type",), ("options", "BinaryName"), ("options", "SystemdCgroup"))
ABSENT = None  # a setting that was not in the file


def record_path(main: Path) -> Path:
    """Where the record of ``main`` lives: ``config.toml.gpuready.json`` beside it."""
    return main.with_name(main.name + RECORD_SUFFIX)


def sha256(text: str | None) -> str | None:
    """The SHA-256 of a file's text (None for a file that does not exist)."""
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_record(main: Path, *, node: Node) -> dict[str, Any] | None:
    """The record of ``main``, or None when gpuready has recorded nothing there."""
    path = record_path(main)
    text = node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError as error:
        raise InputError(path, f"unreadable gpuready record: {error}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(path, "not a gpuready record this version understands")
    return record


def render_record(record: Mapping[str, Any]) -> str:
    """The record's text."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def record_changes(
    previous: Mapping[str, Any] | None,
    plans: list[Plan],
    *,
    main: Path,
    runtime_name: str,
    drop_in: Path | None = None,
    whole: Collection[Path] = (),
) -> dict[str, Any]:
    """The record after ``plans`` are written: ``previous`` (kept where it already says what
    a setting was before gpuready) plus what these plans add.

    A plan whose path is in ``whole`` is recorded as a ``whole_file``, without settings.
    """
    record: dict[str, Any] = json.loads(json.dumps(previous)) if previous else {
        "format": FORMAT, "config": str(main), "files": {}, "settings": []
    }
    for plan in plans:
        if not plan.changes:
            continue
        key = str(plan.path)
        entry = record["files"].setdefault(key, {"original": sha256(plan.before)})
        entry["written"] = sha256(plan.after)
        if drop_in is not None and plan.path == drop_in:
            entry["drop_in"] = True
        if plan.path in whole:
            entry["whole_file"] = True
            continue
        known = {(s["file"], s["kind"], s.get("name")) for s in record["settings"]}
        for setting in settings_added(plan, runtime_name=runtime_name):
            if entry["original"] is None and setting["kind"] != "runtime":
                continue  # a file gpuready created is its own; the runtime is what it is for
            if (key, setting["kind"], setting.get("name")) not in known:
                record["settings"].append({"file": key, **setting})
    return record


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
