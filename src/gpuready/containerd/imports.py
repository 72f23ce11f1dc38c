"""containerd's ``imports``: which files it reads, in which order, and how it merges them.

- Relative entries resolve against the importing file's folder as the node names it, absolute
  ones on the node: both stay under ``--root`` (``..`` stops at the root, links are followed
  inside it), so a config taken from a node never reaches the files of the machine reading it.
- Entries with ``*``, ``?`` or ``[`` are globs, expanded sorted; nested imports are followed,
  each file once, depth first (containerd loads an import with its own imports, then merges).
- 1.x: each top-level plugin table of a later file replaces the earlier one whole
  (containerd#5837, #7982). 2.x: plugin tables merge key by key, arrays are replaced.
- Both: ``disabled_plugins``, ``required_plugins`` and ``imports`` are appended.
"""

from __future__ import annotations

import copy
import os
import posixpath
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.files import FileContext, Options
from gpuready.node import FileKind, Node
from gpuready.rules.placement import CRI_TABLES

# Planned texts by resolved host path (None: the file is to be removed).
Overrides = Mapping[Path, "str | None"]

APPENDED_KEYS = ("disabled_plugins", "required_plugins", "imports")
_GLOB_CHARS = ("*", "?", "[")


def resolve(
    entry: str, importer: Path, *, node: Node, overrides: Overrides | None = None
) -> list[Path] | None:
    """The files an ``imports`` entry names; None for a plain path that does not exist.

    ``overrides`` are files as they will be (None: removed), keyed by resolved host path: a
    planned drop-in is found by the glob that will match it.
    """
    pattern = entry_path(entry, importer, node=node)
    if any(char in entry for char in _GLOB_CHARS):
        found = [path for path in node.glob(pattern) if node.is_file(path)]
        if overrides:
            found = _overlaid(found, pattern, node=node, overrides=overrides)
        return found
    if overrides:
        resolved = node.resolve(pattern)  # once: a link swapped in meanwhile may change it
        if resolved in overrides:
            return [pattern] if overrides[resolved] is not None else None
    return [pattern] if node.is_file(pattern) else None


def entry_path(entry: str, importer: Path, *, node: Node) -> Path:
    """The host path (or glob) an ``imports`` entry of ``importer`` names, inside the root.

    A relative entry is joined to the importer's folder as the node names it, then taken below
    the root like an absolute one. An importer outside the root (a file the user named on the
    command line) is the user's own: its relative entries resolve beside it.
    """
    if entry.startswith("/"):
        return node.path(entry)
    if node.is_host or not node.contains(importer):
        return importer.parent / entry
    folder = posixpath.dirname(str(node.node_path(importer)))
    return node.path(posixpath.join(folder, entry))


def _overlaid(found: list[Path], pattern: Path, *, node: Node, overrides: Overrides) -> list[Path]:
    """``found`` with the planned files that match ``pattern`` added and removed ones taken out."""
    import fnmatch

    kept = {node.resolve(path): path for path in found}
    # the overrides are keyed by resolved path: match them against the pattern's folder as
    # resolved (conf.d may be a link), and name them as the pattern does
    absolute = Path(os.path.abspath(pattern))
    cut = next(index for index, part in enumerate(absolute.parts)
               if any(char in part for char in _GLOB_CHARS))
    folder = Path(*absolute.parts[:cut])
    parts = (*node.resolve(folder).parts, *absolute.parts[cut:])
    for path, text in overrides.items():
        candidate = path.parts
        matches = len(candidate) == len(parts) and all(
            fnmatch.fnmatch(candidate[index], part)
            and (not candidate[index].startswith(".") or part.startswith("."))
            for index, part in enumerate(parts))
        if matches and text is not None:
            kept.setdefault(path, folder.joinpath(*candidate[len(parts) - len(absolute.parts)
                                                             + cut:]))
        elif path in kept and text is None:
            del kept[path]
    return sorted(kept.values())


def load_imports(
    main: FileContext, *, options: Options, overrides: Overrides | None = None
) -> tuple[list[FileContext], list[tuple[FileContext, str]]]:
    """Every file containerd reads, main first, and the import entries that name no file;
    ``overrides`` (see :func:`resolve`) stand in for the files they name."""
    files: list[FileContext] = []
    missing: list[tuple[FileContext, str]] = []
    seen: set[Path] = set()

    node = options.node

    def visit(file: FileContext) -> None:
        seen.add(node.resolve(file.path))
        files.append(file)
        if file.data is None:
            return
        for entry in facts.imports(file.data):
            found = resolve(entry, file.path, node=node, overrides=overrides)
            if found is None:
                missing.append((file, entry))
                continue
            for path in found:
                if node.resolve(path) not in seen:
                    planned = overrides.get(node.resolve(path)) if overrides else None
                    text = planned if planned is not None else node.read_text(
                        path, kind=FileKind.CONFIG)
                    visit(FileContext(path, text, options=options))

    visit(main)
    return files, missing


def merge(
    files: list[FileContext], *, major: int
) -> tuple[dict[str, Any], list[tuple[FileContext, str, list[str]]]]:
    """The merged data containerd uses, and (1.x) the CRI tables an import replaced with loss."""
    result: dict[str, Any] = copy.deepcopy(files[0].data)
    replaced: list[tuple[FileContext, str, list[str]]] = []
    for file in files[1:]:
        for key, value in file.data.items():
            if key == "version":
                continue
            if key == "plugins" and isinstance(value, Mapping):
                if not isinstance(result.get("plugins"), dict):
                    result["plugins"] = {}  # a main file's odd ``plugins`` value is replaced
                plugins = result["plugins"]
                for plugin, table in value.items():
                    earlier = plugins.get(plugin)
                    if major == 1 or not (
                        isinstance(earlier, dict) and isinstance(table, Mapping)
                    ):
                        lost = _lost(earlier, table)
                        if lost and plugin in CRI_TABLES:
                            replaced.append((file, plugin, lost))
                        plugins[plugin] = copy.deepcopy(table)
                    else:
                        _deep_merge(plugins[plugin], table)
            elif key in APPENDED_KEYS and isinstance(value, list):
                earlier = result.get(key)
                result[key] = [*(earlier if isinstance(earlier, list) else []), *value]
            elif isinstance(value, Mapping) and isinstance(result.get(key), dict):
                _deep_merge(result[key], value)
            else:
                result[key] = copy.deepcopy(value)
    return result, replaced


def _deep_merge(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _lost(old: Any, new: Any) -> list[str]:
    """The settings of ``old`` that ``new`` does not have, runtimes named as ``runtimes.X``."""
    if not isinstance(old, Mapping):
        return []
    new = new if isinstance(new, Mapping) else {}
    shown: dict[str, None] = {}
    for path in _leaves(old):
        if facts.lookup(new, path) is None:
            if path[:2] == ("containerd", "runtimes") and len(path) > 2:
                shown[f"runtimes.{path[2]}"] = None
            else:
                shown[".".join(path)] = None
    return list(shown)


def _leaves(table: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in table.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key)
