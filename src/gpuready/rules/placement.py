"""Where a runtime or CRI setting was written, compared with where this file's version reads it.

Shared by the rules that report a misplaced table and by ``--fix``, which moves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.versions import (
    CRI_GRPC,
    CRI_IMAGES,
    CRI_RUNTIME,
    CRI_V1,
    ConfigVersion,
    KeyPath,
)
from gpuready.records import Record

# Every plugin ID that has held CRI settings in some config version.
CRI_TABLES = (CRI_V1, CRI_GRPC, CRI_RUNTIME, CRI_IMAGES)

# In version 3 and 4, io.containerd.grpc.v1.cri keeps only the streaming server settings.
GRPC_CRI_KEYS_V3 = frozenset(
    {
        "disable_tcp_service",
        "stream_server_address",
        "stream_server_port",
        "stream_idle_timeout",
        "enable_tls_streaming",
        "x509_key_pair_streaming",
    }
)

_VERSION_PART = re.compile(r"^v\d+$")


def plugins(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The top-level ``plugins`` table (empty when absent)."""
    table = data.get("plugins")
    return table if isinstance(table, Mapping) else {}


def foreign_cri_tables(spec: ConfigVersion) -> tuple[str, ...]:
    """The CRI plugin IDs another config version uses and this one does not read."""
    own = {spec.cri_plugin, *((CRI_IMAGES,) if spec.number >= 3 else ())}
    if spec.number >= 3:
        own.add(CRI_GRPC)  # still valid, but only for the streaming keys
    return tuple(plugin for plugin in CRI_TABLES if plugin not in own)


class Misplaced(Record):
    """A runtime, or a group of CRI settings, written at a table this version does not read."""

    plugin: str
    path: KeyPath
    runtime: str | None = None
    keys: tuple[str, ...] = ()


def misplaced(data: Mapping[str, Any], spec: ConfigVersion) -> Iterator[Misplaced]:
    """Every runtime and CRI setting at another version's table, in a file of version ``spec``."""
    for plugin in foreign_cri_tables(spec):
        table = plugins(data).get(plugin)
        if isinstance(table, Mapping):
            yield from _misplaced_in(table, plugin, keep=frozenset())
    if spec.number >= 3:
        table = plugins(data).get(CRI_GRPC)
        if isinstance(table, Mapping):
            yield from _misplaced_in(table, CRI_GRPC, keep=GRPC_CRI_KEYS_V3)


def _misplaced_in(table: Mapping[str, Any], plugin: str, *, keep: frozenset[str]):
    base: KeyPath = ("plugins", plugin)
    runtimes = facts.lookup(table, ("containerd", "runtimes"))
    if isinstance(runtimes, Mapping):
        for name in runtimes:
            yield Misplaced(plugin, (*base, "containerd", "runtimes", name), runtime=name)
    settings = tuple(
        ".".join(path)
        for path in _leaf_paths(table)
        if path[0] not in keep and path[:2] != ("containerd", "runtimes")
    )
    if settings:
        yield Misplaced(plugin, base, keys=settings)


def _leaf_paths(table: Mapping[str, Any], prefix: KeyPath = ()) -> Iterator[KeyPath]:
    """The paths of every non-table value (empty tables have no effect and are skipped)."""
    for key, value in table.items():
        if isinstance(value, Mapping):
            yield from _leaf_paths(value, (*prefix, key))
        else:
            yield (*prefix, key)


def unquoted_plugin_id(path: KeyPath) -> tuple[str, int] | None:
    """For ``plugins.io.containerd.grpc.v1.cri.…`` read as nested tables: the plugin ID meant
    (``io.containerd.grpc.v1.cri``) and how many parts of ``path`` after ``plugins`` it spans."""
    if len(path) < 3 or path[0] != "plugins" or path[1] != "io" or path[2] != "containerd":
        return None
    for index, part in enumerate(path[3:], start=3):
        if _VERSION_PART.match(part) and index + 1 < len(path):
            return ".".join(path[1 : index + 2]), index + 1
    return ".".join(path[1:]), len(path) - 1


def has_fully_qualified_plugins(data: Mapping[str, Any]) -> list[str]:
    """The plugin IDs written in full (``io.containerd.…``), which a version 1 file ignores."""
    return [key for key in plugins(data) if "." in key]


def foreign_runtimes(
    data: Mapping[str, Any], spec: ConfigVersion
) -> Iterator[tuple[KeyPath, Mapping[str, Any]]]:
    """``(path, table)`` of every runtime written where this version does not read runtimes:
    another version's CRI table, or a header whose plugin ID is not quoted."""
    seen: set[KeyPath] = {spec.runtimes_path}
    for plugin in CRI_TABLES:
        for table in (("plugins", plugin), ("plugins", *plugin.split("."))):
            path = (*table, "containerd", "runtimes")
            if path in seen:
                continue
            seen.add(path)
            runtimes = facts.lookup(data, path)
            if not isinstance(runtimes, Mapping):
                continue
            for name, entry in runtimes.items():
                if isinstance(entry, Mapping):
                    yield (*path, name), entry


def runtime_written_elsewhere(data: Mapping[str, Any], spec: ConfigVersion, name: str) -> bool:
    """True when runtime ``name`` is in the file, but not where this version reads it.

    Then another rule (wrong-version-path, unquoted-plugin-key, version-missing) reports the
    cause, and "not registered" would only repeat it.
    """
    for plugin in CRI_TABLES:
        for table in (("plugins", plugin), ("plugins", *plugin.split("."))):
            path = (*table, "containerd", "runtimes", name)
            if path != spec.runtime_path(name) and facts.lookup(data, path) is not None:
                return True
    return False
