"""What one containerd line loads from a node's files: the one effective-config model.

Every command that asks "will containerd load this runtime, and does the node still work?"
asks :func:`load_node` (files on the node, optionally as a plan will leave them) or
:func:`build` (parsed files). The model follows the line's own rules, each a recorded fact
(``tests/data/observed/README.md``) unless said otherwise:

1. The files are read as containerd reads them: the main file, then its ``imports`` in order
   (:mod:`gpuready.containerd.imports`), merged as the line merges them: 1.x replaces a whole plugin
   table from a later file, 2.x merges key by key.
2. The merged file is in the main file's ``version``. 2.x migrates an older one in memory
   (plugin IDs renamed, the CRI table split) before using it; an imported file of another version
   is taken as written. 1.x has no plugin of the 2.x names: a version 3 or 4 file's plugin tables
   are left unread (recorded on 1.6.20: ``config dump`` exits 0 and drops them). 2.x does not start
   on a version above the one it reads (containerd's own check at start).
3. The result is decoded over the line's recorded ``config default``. Struct fields merge one by
   one on every line; a *map* a file writes replaces the default map whole on 1.x (the CRI
   ``runtimes``: a file naming only ``nvidia`` loses ``runc``, recorded on 1.6.20 and 1.7.34) and
   merges key by key on 2.x (recorded on 2.1.9 and 2.3.4).
4. The CRI plugin loads when no CRI plugin ID is in ``disabled_plugins`` and
   ``default_runtime_name`` names a runtime in ``runtimes`` (the recorded 1.x error: "no
   corresponding runtime configured in `containerd.runtimes`").
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd.facts import sets_nothing
from gpuready.containerd.lines import NodeLine
from gpuready.containerd.versions import CRI_GRPC, CRI_PLUGIN_IDS, CRI_RUNTIME, KeyPath
from gpuready.records import Record

# The maps 1.x decodes inside the CRI plugin table (config_default_cri_maps of the recording):
# written in a file, each replaces the default map instead of merging into it.
MAPS_1X: frozenset[KeyPath] = frozenset({
    ("containerd", "runtimes"),
    ("containerd", "default_runtime", "options"),
    ("containerd", "untrusted_workload_runtime", "options"),
    ("registry", "mirrors"),
    ("registry", "configs"),
    ("registry", "auths"),
    ("registry", "headers"),
})

NO_RUNTIME_ERROR = ("invalid plugin config: no corresponding runtime configured in "
                    "`containerd.runtimes` for `containerd` `default_runtime_name = \"{name}\"`")


class Loaded:
    """What a containerd line builds from a node's files, and whether its CRI plugin loads.

    ``refused``: containerd does not start at all (the reason); ``import_missing``: it does not
    start because an import names no file, which may be one made at boot; ``unread``: a file is of a
    version the line does not read, and is left mostly unread (the reason). ``runtimes`` and
    ``default_runtime`` are those of the CRI table the line reads, loaded or not.

    ``data`` is read, never changed: the tables no file changes are the line's recorded defaults
    themselves, and the values the files set are those of the files' parsed data
    (:func:`decode_over_defaults`).
    """

    def __init__(self, line: NodeLine, data: dict[str, Any], *,
                 files: list[Path] | None = None) -> None:
        self.line = line
        self.data = data
        self.files = files or []
        self.missing_imports: list[str] = []
        self.refused: str | None = None
        self.import_missing: str | None = None
        self.unread: str | None = None
        self.cri_error: str | None = None
        self.notes: list[str] = []
        # the parsed files, main first, as they were built (for provenance)
        self.sources: list[tuple[Path, Mapping[str, Any]]] = []

    def __repr__(self) -> str:
        return (f"Loaded(line={self.line.line!r}, refused={self.refused!r}, "
                f"import_missing={self.import_missing!r}, unread={self.unread!r}, "
                f"cri_error={self.cri_error!r})")

    @property
    def cri_path(self) -> KeyPath:
        """The CRI table holding ``containerd.runtimes`` on this line."""
        return ("plugins", CRI_GRPC if self.line.major == 1 else CRI_RUNTIME)

    @property
    def cri_table(self) -> dict[str, Any]:
        """The CRI plugin's effective settings."""
        return _table(self.data, self.cri_path)

    @functools.cached_property
    def runtimes(self) -> dict[str, dict[str, Any]]:
        """The runtime handlers the CRI table holds, by name (read once: ``data`` is complete
        when a :class:`Loaded` is handed out)."""
        found = _table(self.cri_table, ("containerd", "runtimes"))
        return {name: entry for name, entry in found.items() if isinstance(entry, dict)}

    @property
    def default_runtime(self) -> str:
        """``default_runtime_name`` (``runc`` when unset, as every line's default)."""
        value = _table(self.cri_table, ("containerd",)).get("default_runtime_name")
        return value if isinstance(value, str) and value else "runc"

    @property
    def cri_loaded(self) -> bool:
        """True when containerd starts and its CRI plugin loads."""
        return self.refused is None and self.import_missing is None and self.cri_error is None

    @property
    def loaded_runtimes(self) -> dict[str, dict[str, Any]]:
        """The runtimes pods can use: none when the CRI plugin does not load."""
        return self.runtimes if self.cri_loaded else {}

    @functools.cached_property
    def cause(self):
        """Why the CRI plugin does not load, placed in the file and key that decide it
        (:class:`gpuready.containerd.provenance.Cause`); None when it loads."""
        if self.cri_loaded:
            return None
        from gpuready.containerd.provenance import cri_cause

        return cri_cause(self, self.sources)

    def why_not_loaded(self, runtime: str) -> str | None:
        """Why pods cannot use ``runtime`` (None when they can)."""
        if self.refused or self.import_missing:
            return self.refused or self.import_missing
        if self.cri_error:
            cause = self.cause
            if cause is not None and cause.file is not None:
                return (f"{self.line.line} does not load its CRI plugin: {cause.file}: "
                        f"{cause.message}")
            return f"{self.line.line} does not load its CRI plugin: {self.cri_error}"
        if runtime not in self.runtimes:
            return f"{self.line.line} loads no runtime {runtime!r} from these files"
        return None


def build(files: list[tuple[Path, Mapping[str, Any]]], line: NodeLine) -> Loaded:
    """What ``line`` loads from ``files`` (main first, then imports in load order), parsed."""
    from gpuready.containerd.imports import merge

    if len(files) == 1:
        merged: Mapping[str, Any] = files[0][1]  # nothing to merge; only read from here on
    else:
        contexts = [_Parsed(path, data) for path, data in files]
        merged, _ = merge(contexts, major=line.major)  # type: ignore[arg-type]
    loaded = Loaded(line, {}, files=[path for path, _ in files])
    loaded.sources = list(files)
    version = _version(files[0][1])
    for path, data in files:
        too_new = _version(data) > line.line.max_config_version
        if too_new and line.major == 2:
            loaded.refused = (f"{line.line} does not start on {path}: config version "
                              f"{_version(data)} is newer than the {line.line.max_config_version} "
                              "it reads")
        elif too_new:
            loaded.unread = (
                f"{line.line} reads config versions 1 and 2: the plugin tables of {path} "
                f"(version {_version(data)}) are under names it does not know and are not read")
            loaded.notes.append(loaded.unread)
    merged, dropped = _migrated(merged, version, line)
    loaded.notes += dropped
    loaded.data = decode_over_defaults(merged, line)
    loaded.cri_error = _cri_error(loaded)
    return loaded


def load_node(
    main: Path, *, node, line: NodeLine, overrides: Mapping[Path, str | None] | None = None
) -> Loaded:
    """What ``line`` loads from ``main`` and its imports on ``node`` (a :class:`Node`), with
    ``overrides`` (host path: planned text, None for a removed file) in place of the files."""
    from gpuready.containerd.files import FileContext, Options
    from gpuready.containerd.imports import load_imports
    from gpuready.node import FileKind

    resolved = {node.resolve(path): text for path, text in (overrides or {}).items()}
    main_text = resolved.get(node.resolve(main), ...)
    if main_text is ...:
        main_text = node.read_text(main, kind=FileKind.CONFIG)
    if main_text is None:  # no config file: containerd runs its own defaults
        loaded = build([(main, {})], line)
        loaded.notes.append(f"{main} is removed: {line.line} runs its defaults")
        return loaded
    options = Options(root=node.root)
    first = FileContext(main, main_text, options=options)
    files, missing = load_imports(first, options=options, overrides=resolved)
    for file in files:
        if file.syntax_error:
            raise file.syntax_error
    loaded = build([(file.path, file.data) for file in files], line)
    loaded.missing_imports = [entry for _, entry in missing]
    if missing:
        # a plain path that names no file stops containerd at start ("failed to load TOML ...
        # no such file or directory", Debian's 1.6.20); a glob that matches nothing does not
        importer, entry = missing[0]
        loaded.import_missing = (f"{line.line} does not start: import {entry!r} in "
                                 f"{importer.path} names no file")
    return loaded


class _Parsed(Record):
    """The two things :func:`gpuready.containerd.imports.merge` reads of a file."""

    path: Path
    data: Mapping[str, Any]


def file_version(text: str | None) -> int:
    """The ``version`` of a config text (1 when it has none, or is no TOML yet: its own error
    comes where it is read)."""
    from gpuready.compat import tomllib
    from gpuready.containerd.document import loads_bounded
    from gpuready.errors import InputError

    try:
        return _version(loads_bounded(text, "<config>")) if text else 1
    except (tomllib.TOMLDecodeError, InputError):
        return 1


def _version(data: Mapping[str, Any]) -> int:
    value = data.get("version", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _migrated(data: dict[str, Any], version: int, line: NodeLine) -> tuple[dict[str, Any], list]:
    """``data`` in the newest version the line reads, as the line migrates it in memory.

    1.x reads version 1 by its short plugin names (the same as migrating to 2); 2.x migrates
    1 and 2 to 3, and 2.3 a 3 to 4. A setting the newer version has no place for is dropped and
    named."""
    target = line.line.max_config_version if line.major == 2 else max(version, 2)
    if version >= target:
        return data, []
    notes: list[str] = []
    if line.major == 1 and version == 1:
        data, ignored = _short_plugin_names_only(data)
        notes += [f"{line.line} reads a version 1 file's plugins by their short names: "
                  f"[plugins.\"{plugin}\"] is not read" for plugin in ignored]
    from gpuready.containerd.migrate import STEPS

    for step in range(version + 1, target + 1):
        data, dropped = migrate_data(data, STEPS[step])
        notes += [f"{line.line} migrates the config to version {step} in memory and drops "
                  f"{'.'.join(path)}" for path in dropped]
    return data, notes


def _short_plugin_names_only(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A version 1 file as 1.x reads it: ``plugins.cri`` is the CRI plugin, and a table under a
    full plugin ID (``io.containerd.grpc.v1.cri``) is not read at all (Debian's 1.6.20 ``config
    dump`` leaves it out; many published version 1 files mix the two)."""
    plugins = data.get("plugins")
    if not isinstance(plugins, Mapping):
        return data, []
    ignored = [plugin for plugin in plugins if "." in plugin]
    if not ignored:
        return data, []
    kept = {plugin: table for plugin, table in plugins.items() if "." not in plugin}
    return {**data, "plugins": kept}, ignored


def migrate_data(data: Mapping[str, Any], mapper) -> tuple[dict[str, Any], list[KeyPath]]:
    """Every setting of ``data`` moved where ``mapper`` (one step of
    :data:`gpuready.containerd.migrate.STEPS`) puts it; the settings it drops, by path."""
    from gpuready.containerd.migrate import Drop

    result: dict[str, Any] = {}
    dropped: list[KeyPath] = []
    for path, value in _leaves(data):
        try:
            target = mapper(path)
        except (KeyError, ValueError):  # a plugin the migration does not know: kept as named
            target = None
        if isinstance(target, Drop):
            if not sets_nothing(value):
                dropped.append(path)
            continue
        to = path if target is None else target.path
        if target is not None and target.convert is not None:
            value = target.convert(value)
        _set(result, to, copy.deepcopy(value))
    return result, dropped


def decode_over_defaults(data: Mapping[str, Any], line: NodeLine) -> dict[str, Any]:
    """``data`` decoded over the line's ``config default``, as the line decodes a file.

    The result is new along every path ``data`` writes to; the tables it leaves alone are the
    line's shared recorded defaults and the values it sets are those of ``data``: read the
    result, never change it.
    """
    result = dict(line.line.shared_defaults())
    for key, value in data.items():
        if key == "version":
            continue
        if key == "plugins" and isinstance(value, Mapping):
            plugins = result["plugins"] = dict(result.get("plugins", {}))
            for plugin, table in value.items():
                earlier = plugins.get(plugin)
                if isinstance(earlier, dict) and isinstance(table, Mapping):
                    if line.line.maps_replace_defaults and plugin == CRI_GRPC:
                        plugins[plugin] = _decoded_with_maps(earlier, table, MAPS_1X, ())
                    else:
                        plugins[plugin] = _decoded(earlier, table)
                else:
                    plugins[plugin] = table
        elif isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = _decoded(result[key], value)
        else:
            result[key] = value
    return result


def _decoded(target: dict[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    """``target`` with ``source`` decoded over it (struct fields and maps merge key by key), as
    a new table; ``target`` is left as it is."""
    result = dict(target)
    for key, value in source.items():
        earlier = result.get(key)
        if isinstance(earlier, dict) and (type(value) is dict or isinstance(value, Mapping)):
            result[key] = _decoded(earlier, value)
        else:
            result[key] = value
    return result


def _decoded_with_maps(target: dict[str, Any], source: Mapping[str, Any],
                       maps: frozenset[KeyPath], at: KeyPath) -> dict[str, Any]:
    """:func:`_decoded` where a map at one of the ``maps`` paths (below ``at``) replaces the
    default map whole instead of merging into it."""
    result = dict(target)
    for key, value in source.items():
        path = (*at, key)
        earlier = result.get(key)
        if isinstance(earlier, dict) and (type(value) is dict or isinstance(value, Mapping)) \
                and path not in maps:
            result[key] = _decoded_with_maps(earlier, value, maps, path)
        else:
            result[key] = value
    return result


def _cri_error(loaded: Loaded) -> str | None:
    disabled = loaded.data.get("disabled_plugins")
    if isinstance(disabled, list):
        off = [name for name in disabled if isinstance(name, str) and name in CRI_PLUGIN_IDS]
        if off:
            return f"disabled_plugins turns it off ({', '.join(map(repr, off))})"
    written = _table(loaded.cri_table, ("containerd",)).get("default_runtime_name")
    if written == "":
        # containerd's own check when the CRI plugin starts, on 1.x and 2.x alike
        return "`default_runtime_name` is empty"
    if loaded.default_runtime not in loaded.runtimes:
        return NO_RUNTIME_ERROR.format(name=loaded.default_runtime)
    return None


def _table(data: Mapping[str, Any], path: KeyPath) -> dict[str, Any]:
    for key in path:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data if isinstance(data, dict) else {}


def _leaves(data: Mapping[str, Any], at: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, (*at, key))
        else:
            yield (*at, key), value


def _set(data: dict[str, Any], path: KeyPath, value: Any) -> None:
    for key in path[:-1]:
        child = data.get(key)
        if not isinstance(child, dict):
            child = data[key] = {}
        data = child
    data[path[-1]] = value


def without_zero_values(value: Any) -> Any:
    """``value`` with the settings that hold their Go zero value left out: two runtime tables
    that differ only there make containerd run the same thing."""
    if isinstance(value, Mapping):
        kept = {key: without_zero_values(inner) for key, inner in value.items()}
        return {key: inner for key, inner in kept.items() if not sets_nothing(inner)}
    return value
