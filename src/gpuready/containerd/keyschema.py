"""Which keys each containerd line reads, per config version: the key schema, kept as data.

containerd decodes its config into Go structs and ignores every key no struct field takes, without
a word. The schema (``gpuready/data/key-schema.json``) lists, per line, the key paths it reads:

- ``generated``: every key path of the line's recorded ``containerd config default`` (1.6.20,
  1.7.34, 2.1.9, 2.3.4, kept in ``tests/data/containerd/``, builds with the full plugin set) and,
  for 2.3, the plugin tables of a recorded ``config dump`` (the server plugins are configured there
  but not printed by ``config default``). Runtime names, stream processors and timeouts become
  ``*``; a runtime's ``options`` is open (the option rules check it).
  ``scripts/generate_key_schema.py`` regenerates it, and a test checks it is current.
- ``documented``: keys no default prints (registry mirrors and configs, ``proxy_plugins``,
  runtime fields), each with its source.
- ``moved`` and ``removed``: keys a line used to read elsewhere or no longer reads, with what to
  write instead and the source.

Which lines' schema applies follows the config version: a file is checked against the lines that
read its version as written, the newest version each line reads (``LINES``): 2 → 1.6 and 1.7
(a key either reads is known), 3 → 2.1, 4 → 2.3. A line also loads older versions, but it
migrates them in memory first; a version 1 file has no recorded schema and is not checked.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpuready import data as shipped
from gpuready.containerd.lines import LINES as LINE_TABLE
from gpuready.containerd.versions import CRI_PLUGIN_IDS, KeyPath
from gpuready.records import Record

ANY = "*"
OPEN = "**"
# The newest config version each recorded line reads (1.x: 1 and 2; 2.1: up to 3; 2.3: up to 4).
LINES: Mapping[str, int] = {name: line.max_config_version for name, line in LINE_TABLE.items()}

# Below these prefixes (ANY matches one key) the next key is a name the operator chooses.
NAMED = (
    ("plugins", ANY, "containerd", "runtimes"),
    ("plugins", ANY, "registry", "mirrors"),
    ("plugins", ANY, "registry", "configs"),
    ("plugins", ANY, "registry", "headers"),
    ("stream_processors",),
    ("proxy_plugins",),
    ("timeouts",),
)
# Tables whose keys other rules check (runc options belong to the runtime type).
OPEN_TABLES = (
    ("plugins", ANY, "containerd", "runtimes", ANY, "options"),
    ("plugins", ANY, "containerd", "default_runtime", "options"),
    ("plugins", ANY, "containerd", "untrusted_workload_runtime", "options"),
)


def _matches(path: KeyPath, pattern: KeyPath) -> bool:
    if len(path) != len(pattern):
        return False
    return all(p in (ANY, k) for k, p in zip(path, pattern))


def generalize(path: KeyPath) -> KeyPath:
    """``path`` with chosen names replaced by ``*`` and open tables ended by ``**``."""
    parts = list(path)
    for prefix in NAMED:
        if len(parts) > len(prefix) and _matches(tuple(parts[: len(prefix)]), prefix):
            parts[len(prefix)] = ANY
    for table in OPEN_TABLES:
        if len(parts) >= len(table) and _matches(tuple(parts[: len(table)]), table):
            return (*parts[: len(table)], OPEN)
    return tuple(parts)


def key_paths(data: Mapping[str, Any], prefix: KeyPath = ()) -> Iterator[KeyPath]:
    """Every table and key path of parsed TOML ``data`` (arrays of tables are not entered)."""
    for key, value in data.items():
        path = (*prefix, key)
        yield path
        if isinstance(value, Mapping):
            yield from key_paths(value, path)


def generate(sources: Iterable[tuple[str, Mapping[str, Any], bool]]) -> dict[str, list[list[str]]]:
    """The generated part: ``(line, parsed config, plugins_only)`` → sorted generalized paths."""
    found: dict[str, set[KeyPath]] = {}
    for line, data, plugins_only in sources:
        paths = found.setdefault(line, set())
        for path in key_paths(data):
            if plugins_only and path[0] != "plugins":
                continue
            paths.add(generalize(path))
    return {line: sorted(list(p) for p in paths) for line, paths in sorted(found.items())}


class Note(Record):
    """A key a line reads elsewhere (``moved``) or not at all (``removed``), and the source."""

    path: KeyPath
    message: str
    source: str


class Schema(Record):
    """The keys one line reads (a trie of generalized paths), and its moved/removed keys."""

    line: str
    trie: Mapping[str, Any]
    notes: tuple[Note, ...]

    def known(self, path: KeyPath) -> bool | None:
        """True when the line reads ``path``; None when it sits in an open table."""
        node = self.trie
        for key in path:
            if OPEN in node:
                return None
            child = node.get(key, node.get(ANY))
            if child is None:
                return False
            node = child
        return True

    def siblings(self, path: KeyPath) -> list[str]:
        """The known keys next to ``path`` (for a did-you-mean)."""
        node = self.trie
        for key in path[:-1]:
            node = node.get(key, node.get(ANY, {}))
        return [key for key in node if key not in (ANY, OPEN)]

    def note(self, path: KeyPath) -> Note | None:
        """The moved/removed note whose path is ``path`` or above it."""
        for note in self.notes:
            if _matches(path[: len(note.path)], note.path):
                return note
        return None


def _trie(paths: Iterable[Iterable[str]]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for key in path:
            node = node.setdefault(key, {})
    return root


@functools.cache
def raw() -> dict[str, Any]:
    """The schema file as stored."""
    text = shipped.read_text("key-schema.json")
    return json.loads(text)


def lines_for(version: int) -> tuple[str, ...]:
    """The recorded lines that read config ``version`` files as written (not migrated)."""
    return tuple(line for line, newest in LINES.items() if newest == version)


@functools.cache
def schema_for(version: int) -> Schema | None:
    """The schema of the lines that read config ``version`` files; None where none is recorded.

    Where two lines read one version (1.6 and 1.7 read version 2), a key either of them reads is
    known, and a note applies when it applies to all of them.
    """
    lines = lines_for(version)
    if not lines:
        return None
    data = raw()
    paths = [path for line in lines for path in data["generated"].get(line, [])]
    paths += [entry["path"] for entry in data["documented"]
              if any(line in entry["lines"] for line in lines)]
    notes = tuple(
        Note(tuple(entry["path"]), entry["message"], entry["source"])
        for kind in ("moved", "removed")
        for entry in data[kind]
        if all(line in entry["lines"] for line in lines)
    )
    return Schema("+".join(lines), _trie(paths), notes)


class UnknownKey(Record):
    """A key path the line does not read: why (a note) or what was probably meant."""

    path: KeyPath
    note: Note | None
    suggestion: str | None


# Values that are never a table (what tomllib gives besides dicts and lists), checked before the
# slower abstract Mapping test.
_SCALARS = frozenset({str, int, float, bool, list})


def unknown_keys(data: Mapping[str, Any], version: int) -> list[UnknownKey]:
    """The keys of ``data`` that the line reading config ``version`` ignores, outermost only.

    Plugin tables of another config version's CRI plugin are left to wrong-version-path, and an
    unknown plugin ID is reported only when it is close to a known one (it may be a plugin
    gpuready does not know).
    """
    from gpuready.suggest import did_you_mean

    schema = schema_for(version)
    if schema is None:
        return []
    found: list[UnknownKey] = []

    # The schema's trie and the notes are walked down together with the data, one level per
    # table: a key is looked up below its table's trie node, not from the root again. A key is
    # entered only when it is known and no note covers it, so the notes that can still apply to
    # its keys are those whose path goes on below it (in table order: the first one wins).
    def walk(table: Mapping[str, Any], prefix: KeyPath, node: Mapping[str, Any],
             notes: tuple[Note, ...]) -> None:
        if OPEN in node:
            return  # an open table: other rules check its keys
        depth = len(prefix)
        wildcard = node.get(ANY)
        for key, value in table.items():
            below: tuple[Note, ...] = ()
            if notes:
                below = tuple(n for n in notes if n.path[depth] in (ANY, key))
                note = next((n for n in below if len(n.path) == depth + 1), None)
                if note is not None:
                    found.append(UnknownKey((*prefix, key), note, None))
                    continue
            child = node.get(key, wildcard)
            if child is None:
                path = (*prefix, key)
                suggestion = did_you_mean(key, schema.siblings(path))
                if prefix == ("plugins",) and (key in CRI_PLUGIN_IDS or not suggestion):
                    continue
                found.append(UnknownKey(path, None, suggestion))
                continue
            if isinstance(value, dict) or (type(value) not in _SCALARS
                                           and isinstance(value, Mapping)):
                walk(value, (*prefix, key), child,
                     tuple(n for n in below if len(n.path) > depth + 1))

    walk(data, (), schema.trie, schema.notes)
    return found
