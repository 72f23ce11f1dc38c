"""Where each effective setting comes from, and why a setting written in a file has no effect.

The model (:mod:`gpuready.containerd.model`) says *what* a containerd line loads from a node's
files; this module says *which file* decides it, so that every command names the same file and
the same cause:

- :func:`cri_cause`: why the CRI plugin does not load, placed in the file and key that cause it.
  The case operators meet most: on 1.x a file that writes a ``runtimes`` table replaces the
  line's built-in map, so ``runc`` is gone and ``default_runtime_name = "runc"`` names nothing
  (recorded on 1.6.20 and 1.7.34, ``tests/data/observed``; nvidia-ctk 1.20's drop-in does this to
  Debian 12's packaged file: ``summary.json`` of ``debian-12-containerd-package``).
- :func:`shadowed`: the settings a file writes that the line does not run because a later file
  wins: on 1.x a later file's plugin table replaces the whole earlier one (containerd#5837); on
  2.x a later file's value for the same key wins (key-by-key merge, recorded on 2.1.9 and 2.3.4).

Only the model layer is imported here: rules and commands ask, never the reverse.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuready.containerd.facts import disabled_cri_plugins, lookup
from gpuready.containerd.versions import (
    VERSIONS,
    ConfigVersion,
    KeyPath,
    render_key_path,
)
from gpuready.records import Record

# Bounds: a shadowed-settings pass reports at most this many settings per file.
MAX_SHADOWED_PER_FILE = 50

Source = tuple[Path, Mapping[str, Any]]


class Cause(Record):
    """Why pods cannot run: the file and key path (in that file's own names) that decide it,
    the reason in one sentence, and the fix. ``file`` is None when no file is to blame."""

    file: Path | None
    key_path: KeyPath
    message: str
    fix: str
    # "map-replaced", "import-replaced", "default-missing", "disabled" or "refused"
    kind: str = ""


class Shadow(Record):
    """A setting ``file`` writes at ``key_path`` that the line does not run: ``winner`` is the
    file whose value is run instead (``effective``, None when it has none), ``reason`` why."""

    file: Path
    key_path: KeyPath
    value: Any
    winner: Path
    effective: Any
    reason: str


def _spec(data: Mapping[str, Any]) -> ConfigVersion | None:
    value = data.get("version", 1)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return VERSIONS.get(value)


def _read_cri_path(spec: ConfigVersion, major: int) -> KeyPath | None:
    """The CRI table as a file of ``spec`` names it, None where a line of ``major`` does not
    read it (1.x leaves a version 3 or 4 file's plugin tables unread)."""
    return spec.cri_path if major == 2 or spec.number <= 2 else None


def cri_cause(loaded: Any, sources: Sequence[Source]) -> Cause | None:
    """Why ``loaded`` (a :class:`gpuready.containerd.model.Loaded` built from ``sources``, main
    first) does not load its CRI plugin; None when it does."""
    if loaded.cri_loaded:
        return None
    if loaded.refused or loaded.import_missing:
        return Cause(None, (), loaded.refused or loaded.import_missing, "", "refused")
    line = loaded.line.line
    if loaded.cri_error and loaded.cri_error.startswith("disabled_plugins"):
        return _disabled_cause(loaded, sources)
    name = loaded.default_runtime
    if line.maps_replace_defaults and _builtin(loaded, name):
        replaced = _map_replaced_cause(loaded, sources, name)
        if replaced is not None:
            return replaced
    where = _last_setting(sources, lambda spec: spec.default_runtime_path)
    if where is None:
        return Cause(None, (), f"{line} does not load its CRI plugin: {loaded.cri_error}", "")
    path, key_path = where
    return Cause(path, key_path,
                 f"default_runtime_name {name!r} names no runtime {line} loads, so the CRI "
                 "plugin does not load (no pod starts)",
                 'set default_runtime_name = "runc", or register the runtime it names',
                 "default-missing")


def _builtin(loaded: Any, name: str) -> bool:
    """True when the line's own defaults register runtime ``name`` (runc)."""
    defaults = loaded.line.line.defaults()
    cri = defaults.get("plugins", {}).get(loaded.cri_path[1], {})
    return isinstance(cri.get("containerd", {}).get("runtimes", {}).get(name), Mapping)


def _map_replaced_cause(loaded: Any, sources: Sequence[Source], name: str) -> Cause | None:
    """1.x: the file whose CRI table wins and, in it, the ``runtimes`` map that replaced the
    built-in one (or the earlier file's table it replaced whole)."""
    line = loaded.line.line
    winner = _cri_winner(sources, loaded.line.major)
    if winner is None:
        return None
    path, data, spec = winner
    header = render_key_path(spec.cri_path)
    earlier = [source for source, source_data, source_spec in _with_specs(sources)
               if source != path and source_spec is not None
               and isinstance(lookup(source_data, source_spec.runtime_path(name)), Mapping)]
    fix = (f"'gpuready configure' writes runtime {name}'s table back into {path} (lines added), "
           f"or add [{render_key_path(spec.runtime_path(name))}] with runtime_type = "
           '"io.containerd.runc.v2" there')
    if earlier:
        fix = (f"copy the whole CRI table of {earlier[-1]} ({name} included) into this file, or "
               "remove this file's CRI table and register the runtime in the main config "
               "('gpuready configure')")
        return Cause(path, spec.cri_path,
                     f"this file's [{header}] replaces the whole table of {earlier[-1]} under "
                     f"{line} (imports replace plugin tables whole), losing runtime {name}: "
                     f"default_runtime_name {name!r} names no runtime, so the CRI plugin does "
                     "not load (no pod starts)", fix, "import-replaced")
    if not isinstance(lookup(data, spec.runtimes_path), Mapping):
        return None
    return Cause(path, spec.runtimes_path,
                 f"the runtimes table in this file replaces {line}'s built-in one, so {name} is "
                 f"gone: default_runtime_name {name!r} names no runtime, so the CRI plugin does "
                 "not load (no pod starts)", fix, "map-replaced")


def _with_specs(sources: Sequence[Source]) -> Iterator[tuple[Path, Mapping[str, Any],
                                                          ConfigVersion | None]]:
    for path, data in sources:
        yield path, data, _spec(data)


def _cri_winner(sources: Sequence[Source], major: int
                ) -> tuple[Path, Mapping[str, Any], ConfigVersion] | None:
    """The last file holding the CRI table the line reads (on 1.x that table wins whole)."""
    for path, data, spec in reversed(list(_with_specs(sources))):
        cri_path = _read_cri_path(spec, major) if spec is not None else None
        if cri_path is not None and isinstance(lookup(data, cri_path), Mapping):
            return path, data, spec
    return None


def _last_setting(sources: Sequence[Source], key_path_of) -> tuple[Path, KeyPath] | None:
    """The last file that sets the key ``key_path_of(spec)`` names, with that key path."""
    for path, data, spec in reversed(list(_with_specs(sources))):
        if spec is not None and lookup(data, key_path_of(spec)) is not None:
            return path, key_path_of(spec)
    return None


def _disabled_cause(loaded: Any, sources: Sequence[Source]) -> Cause:
    for path, data in reversed(list(sources)):
        if disabled_cri_plugins(data):
            return Cause(path, ("disabled_plugins",),
                         f"the CRI plugin is off here: {loaded.cri_error}",
                         "take the CRI plugin out of disabled_plugins "
                         "('gpuready configure --enable-cri')", "disabled")
    return Cause(None, (), loaded.cri_error or "", "")


def shadowed(sources: Sequence[Source], major: int) -> list[Shadow]:
    """Every setting a file writes that the line runs from a later file instead, with a value
    that differs (a later file that repeats the same value shadows nothing worth saying).

    1.x: a later file's plugin table replaces an earlier one whole; a setting the later table
    does not have at all is lost (the ``import-overrides-cri`` finding says so, in that file),
    so only settings the later table writes with another value are listed here. 2.x: the last
    file's value for a key wins.
    """
    found: list[Shadow] = []
    for index, (path, data) in enumerate(sources[:-1]):
        later = sources[index + 1:]
        count = 0
        for key_path, value in _plugin_leaves(data):
            shadow = _shadow_of(path, key_path, value, later, major)
            if shadow is not None:
                found.append(shadow)
                count += 1
                if count >= MAX_SHADOWED_PER_FILE:
                    break
    return found


def _shadow_of(path: Path, key_path: KeyPath, value: Any, later: Sequence[Source],
               major: int) -> Shadow | None:
    plugin = key_path[:2]
    for winner, data in reversed(list(later)):
        if major == 1:
            if not isinstance(lookup(data, plugin), Mapping):
                continue
            effective = lookup(data, key_path)
            if effective is None or effective == value:
                return None  # lost whole (import-overrides-cri) or the same value
            return Shadow(path, key_path, value, winner, effective,
                          f"{winner} holds [{render_key_path(plugin)}] too, and containerd 1.x "
                          "replaces the whole table from the later file")
        effective = lookup(data, key_path)
        if effective is None:
            continue
        if effective == value:
            return None
        return Shadow(path, key_path, value, winner, effective,
                      f"{winner} sets it too, and the later file's value wins")
    return None


def _plugin_leaves(data: Mapping[str, Any], at: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """The settings under ``plugins`` (the tables imports replace or merge), leaf by leaf."""
    table = data.get("plugins") if not at else data
    if not isinstance(table, Mapping):
        return
    for key, value in table.items():
        path = (*(at or ("plugins",)), key)
        if isinstance(value, Mapping) and value:
            yield from _plugin_leaves(value, path)
        elif not isinstance(value, Mapping):
            yield path, value


def cri_table_file(sources: Sequence[Source], major: int) -> Path | None:
    """The file whose CRI table containerd 1.x reads (the last that holds one: it replaces the
    earlier ones whole); None on 2.x, where every file's keys merge, or when no file has one."""
    if major != 1:
        return None
    winner = _cri_winner(sources, major)
    return winner[0] if winner is not None else None
