"""``gpuready migrate --to 3|4``: the migration containerd 2.x makes, as an edit of the text.

containerd 2.x migrates an older config in memory at every start, and ``containerd config
migrate`` prints the result as a whole new file: comments gone, every default spelled out, and
``imports`` left unmigrated. Here each step is a table of where every setting goes (the facts, with
their source, are in the ``MOVES_*`` tables below); headers are renamed where they are written,
a setting that changes table is cut from its line and set at its new place with the editor, so
comments, order and quoting stay. A setting a newer containerd no longer has is dropped when it
holds its empty default (or, for a plugin 2.x no longer has, what 1.x's ``config default``
writes) and refused by name otherwise. Empty tables of maps that 2.x's ``config migrate`` leaves
out are left out too.

Source: containerd's own migrations (``pkg/cri/config`` and ``cmd/containerd/server/config`` up
to v2.3.4), checked against the recorded ``config migrate`` output of 2.1.9 (to version 3) and
2.3.4 (to version 4) for the lab base and 1.6's default (tests/data/observed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.edit import remove_empty_headers, set_value
from gpuready.containerd.layout import Header, scan
from gpuready.containerd.versions import CRI_GRPC, CRI_IMAGES, CRI_RUNTIME, KeyPath, version_number
from gpuready.errors import InputError

# Version 1 plugin names and the plugin IDs version 2 requires (containerd 1.x's plugin list).
V1_PLUGIN_IDS = {
    "cri": CRI_GRPC,
    "linux": "io.containerd.runtime.v1.linux",
    "cgroups": "io.containerd.monitor.v1.cgroups",
    "scheduler": "io.containerd.gc.v1.scheduler",
    "bolt": "io.containerd.metadata.v1.bolt",
    "opt": "io.containerd.internal.v1.opt",
    "restart": "io.containerd.internal.v1.restart",
    "diff-service": "io.containerd.service.v1.diff-service",
    "tasks-service": "io.containerd.service.v1.tasks-service",
    "task": "io.containerd.runtime.v2.task",
    **{name: f"io.containerd.snapshotter.v1.{name}"
       for name in ("overlayfs", "native", "devmapper", "aufs", "btrfs", "zfs")},
}

# 2 -> 3 (containerd 2.0): the CRI plugin splits. Keys that stay with the streaming server in
# io.containerd.grpc.v1.cri; keys (and tables) that move to io.containerd.cri.v1.images.
STREAMING_KEYS = frozenset({"disable_tcp_service", "stream_server_address", "stream_server_port",
                            "stream_idle_timeout", "enable_tls_streaming",
                            "x509_key_pair_streaming"})
IMAGE_KEYS = frozenset({"registry", "image_decryption", "max_concurrent_downloads",
                        "image_pull_progress_timeout", "image_pull_with_sync_fs",
                        "stats_collect_period"})
IMAGE_CONTAINERD_KEYS = frozenset({"snapshotter", "disable_snapshot_annotations",
                                   "discard_unpacked_layers"})
# Settings containerd 2.0 removed: dropped when empty, refused otherwise.
REMOVED_CRI_KEYS = {
    "systemd_cgroup": "set SystemdCgroup in each runtime's options instead",
    "disable_cgroup": "removed in containerd 2.0",
}
REMOVED_CONTAINERD_KEYS = {
    "default_runtime": "name a runtime in default_runtime_name instead",
    "untrusted_workload_runtime": "use a RuntimeClass instead",
    "no_pivot": "set NoPivotRoot in the runtime's options instead",
}
REMOVED_RUNTIME_KEYS = {
    "runtime_engine": "shim v1 is gone in containerd 2.0",
    "runtime_root": "shim v1 is gone in containerd 2.0",
}
# Settings outside the CRI plugin that 2.x has no place for: 2.1.9's and 2.3.4's recorded
# `config migrate` of 1.6.20's default leaves them out (sched_core = false, plugin_dir = "").
REMOVED_V3: dict[KeyPath, str] = {
    ("plugin_dir",): "containerd 2.1 and 2.3 have no plugin_dir; their config migrate drops it",
    ("plugins", "io.containerd.runtime.v2.task", "sched_core"):
        "containerd 2.1 and 2.3 have no sched_core here; their config migrate drops it",
}
# Plugins containerd 2.0 renamed: 2.1.9's and 2.3.4's recorded `config migrate` write their
# settings under the new ID, the one their `config default` lists.
RENAMED_PLUGINS_V3 = {
    "io.containerd.internal.v1.restart": "io.containerd.monitor.container.v1.restart",
    "io.containerd.monitor.v1.cgroups": "io.containerd.monitor.task.v1.cgroups",
}
# Plugins 2.x does not have (2.1.9's and 2.3.4's full-plugin `config default` lack them), with the
# settings 1.6.20's and 1.7.34's `config default` write for them. containerd's own migration
# copies such a table as it is, and 2.x then ignores it without a word; here it is dropped when
# it holds those defaults, and refused otherwise.
REMOVED_PLUGINS_V3: dict[str, tuple[dict[str, Any], str]] = {
    "io.containerd.runtime.v1.linux": (
        {"no_shim": False, "runtime": "runc", "runtime_root": "", "shim": "containerd-shim",
         "shim_debug": False},
        "containerd 2.x has no io.containerd.runtime.v1.linux plugin (shim v1 is gone)",
    ),
    "io.containerd.snapshotter.v1.aufs": (
        {"root_path": ""},
        "containerd 2.x has no aufs snapshotter",
    ),
}
# Maps whose empty table 2.x's `config migrate` leaves out (recorded: the empty registry tables
# and [proxy_plugins] of 1.6.20's default are not in its output). An empty table sets nothing on
# 2.x, which merges a file key by key, so leaving it out changes nothing.
EMPTY_MAPS_V3: tuple[KeyPath, ...] = (
    ("proxy_plugins",),
    *(("plugins", CRI_IMAGES, "registry", name)
      for name in ("auths", "configs", "headers", "mirrors")),
)

# 3 -> 4 (containerd 2.3): the server tables become plugins; [debug] level and format stay.
SERVER_GRPC = "io.containerd.server.v1.grpc"
MOVES_V4: dict[KeyPath, KeyPath] = {
    ("grpc",): ("plugins", SERVER_GRPC),
    ("grpc", "tcp_address"): ("plugins", "io.containerd.server.v1.grpc-tcp", "address"),
    ("grpc", "tcp_tls_ca"): ("plugins", "io.containerd.server.v1.grpc-tcp", "tls_ca"),
    ("grpc", "tcp_tls_cert"): ("plugins", "io.containerd.server.v1.grpc-tcp", "tls_cert"),
    ("grpc", "tcp_tls_key"): ("plugins", "io.containerd.server.v1.grpc-tcp", "tls_key"),
    ("ttrpc",): ("plugins", "io.containerd.server.v1.ttrpc"),
    ("metrics",): ("plugins", "io.containerd.server.v1.metrics"),
    ("metrics", "grpc_histogram"): ("plugins", "io.containerd.metrics.v1.grpc-prometheus",
                                    "grpc_histogram"),
    ("debug", "address"): ("plugins", "io.containerd.server.v1.debug", "address"),
    ("debug", "uid"): ("plugins", "io.containerd.server.v1.debug", "uid"),
    ("debug", "gid"): ("plugins", "io.containerd.server.v1.debug", "gid"),
}

TARGETS = (3, 4)


@dataclass(frozen=True)
class Drop:
    """A setting the newer version does not have: gone when empty (or equal to ``default``, the
    value the older line's ``config default`` writes), refused otherwise."""

    why: str
    default: Any = None

    def takes(self, value: Any) -> bool:
        """True when dropping ``value`` loses nothing."""
        if facts.sets_nothing(value):
            return True
        return self.default is not None and type(value) is type(self.default) \
            and value == self.default


@dataclass(frozen=True)
class Moved:
    """Where a setting goes, and how its value changes on the way (``None``: unchanged).

    With ``unless_empty`` an empty value is not carried over: the new place keeps its own default.
    """

    path: KeyPath
    convert: Callable[[Any], Any] | None = None
    unless_empty: bool = False


Target = Union[Moved, Drop]


def to_v2(path: KeyPath) -> Target:
    """Version 1 → 2: short plugin names become plugin IDs."""
    if len(path) < 2 or path[0] != "plugins":
        return Moved(path)
    name = path[1]
    if "." in name:
        return Moved(path)
    if name not in V1_PLUGIN_IDS:
        raise KeyError(f"plugin '{name}' has no known version 2 ID")
    return Moved(("plugins", V1_PLUGIN_IDS[name], *path[2:]))


def to_v3(path: KeyPath) -> Target:
    """Version 2 → 3: the CRI plugin splits into runtime, images and the streaming server; some
    plugins are renamed or gone."""
    runtime = ("plugins", CRI_RUNTIME)
    images = ("plugins", CRI_IMAGES)
    if path in REMOVED_V3:
        return Drop(REMOVED_V3[path])
    if path[:2] != ("plugins", CRI_GRPC):
        return _plugin_v3(path)
    if len(path) == 2:  # the table itself: most of what it holds is the runtime's
        return Moved(runtime)
    rest = path[2:]
    if rest[0] in STREAMING_KEYS:
        return Moved(path)
    if rest == ("sandbox_image",):
        return Moved((*images, "pinned_images", "sandbox"))
    if rest[0] in IMAGE_KEYS:
        return Moved((*images, *rest))
    if rest[0] in REMOVED_CRI_KEYS and len(rest) == 1:
        return Drop(REMOVED_CRI_KEYS[rest[0]])
    if rest == ("cni", "bin_dir"):  # 2.1 reads a list of folders
        return Moved((*runtime, "cni", "bin_dirs"), lambda value: [value])
    if rest[0] == "containerd" and len(rest) > 1:
        if rest[1] in IMAGE_CONTAINERD_KEYS:
            return Moved((*images, *rest[1:]))
        if rest[1] in REMOVED_CONTAINERD_KEYS:
            return Drop(REMOVED_CONTAINERD_KEYS[rest[1]])
        if rest[1] == "runtimes" and len(rest) > 3:
            if rest[3] in REMOVED_RUNTIME_KEYS:
                return Drop(REMOVED_RUNTIME_KEYS[rest[3]])
            if rest[3:] == ("options", "CriuPath"):  # 1.x matches option names exactly
                return Drop("containerd 2.0 removed the runc option CriuPath")
            if rest[3] == "sandbox_mode":
                return Moved((*runtime, *rest[:3], "sandboxer", *rest[4:]))
    return Moved((*runtime, *rest))


def _plugin_v3(path: KeyPath) -> Target:
    """Version 2 → 3 for a path outside the CRI plugin: renamed and removed plugins."""
    if len(path) < 2 or path[0] != "plugins":
        return Moved(path)
    plugin, rest = path[1], path[2:]
    if plugin in RENAMED_PLUGINS_V3:
        return Moved(("plugins", RENAMED_PLUGINS_V3[plugin], *rest))
    if plugin in REMOVED_PLUGINS_V3:
        defaults, why = REMOVED_PLUGINS_V3[plugin]
        return Drop(why, defaults.get(rest[0]) if len(rest) == 1 else None)
    return Moved(path)


def to_v4(path: KeyPath) -> Target:
    """Version 3 → 4: ``[grpc]``, ``[ttrpc]``, ``[metrics]`` and ``[debug] address`` become
    server plugins (2.3 ignores them at the top level without a word).

    An empty value is not carried over: 2.3.4's recorded ``config migrate`` of 1.6.20's default
    turned ``[ttrpc] address = ""`` into the plugin's default, ``/run/containerd/containerd.sock.
    ttrpc``, not into an empty address.
    """
    for length in range(len(path), 0, -1):
        if path[:length] in MOVES_V4:
            return Moved((*MOVES_V4[path[:length]], *path[length:]), unless_empty=True)
    return Moved(path)


STEPS: dict[int, Callable[[KeyPath], Target]] = {2: to_v2, 3: to_v3, 4: to_v4}


def migrate_text(text: str, path: Path, *, to: int) -> str:
    """``text`` (a config of version 1 to ``to``) migrated to version ``to``."""
    data = tomllib.loads(text)
    version = version_number(data, path=path)
    if version > to:
        raise InputError(path, f"version {version} is newer than --to {to}; nothing migrated")
    try:
        for step in range(version + 1, to + 1):
            text = _step(text, STEPS[step], path=path, to=step)
            if step >= 3:
                text = _without_empty_maps(text)
            text = set_value(text, ("version",), step).text
    except (KeyError, ValueError) as error:
        reason = error.args[0] if error.args else error
        raise InputError(path, f"cannot migrate to version {to}: {reason}; nothing written") \
            from None
    return text


def _step(text: str, mapper: Callable[[KeyPath], Target], *, path: Path, to: int) -> str:
    data = tomllib.loads(text)
    layout = scan(text)
    cuts: list[tuple[int, int, str]] = []  # (start, end, replacement)
    sets: list[tuple[KeyPath, Any]] = []
    emptied: list[KeyPath] = []
    for header in layout.headers:
        target = mapper(header.path)
        if isinstance(target, Drop):
            emptied.append(header.path)
            continue
        if target.path != header.path:
            cuts.append((header.start, header.end, _renamed(text, header, target.path)))
            if target.unless_empty:  # a table left with nothing to carry over goes too
                emptied.append(target.path)
    for entry in layout.entries:
        if entry.in_array:
            continue
        target = mapper(entry.path)
        table = mapper(entry.table)
        value = facts.lookup(data, entry.path)
        if isinstance(target, Moved) and target.unless_empty and facts.sets_nothing(value) \
                and len(entry.key) == 1 and not entry.inline:
            cuts.append((entry.start, entry.end, ""))
            continue
        implied = (*table.path, *entry.key) if isinstance(table, Moved) else None
        if isinstance(target, Moved) and target.path == implied and target.convert is None:
            continue
        if len(entry.key) > 1 or entry.inline:
            if target != Moved(entry.path):
                raise ValueError(f"{'.'.join(entry.path)} is written as dotted keys or an inline "
                                 "table; write it as a [table] header first")
            continue
        if isinstance(target, Drop):
            if not target.takes(value):
                raise ValueError(f"{'.'.join(entry.path)} = {value!r} has no version {to} "
                                 f"setting ({target.why})")
        else:
            sets.append((target.path, target.convert(value) if target.convert else value))
        cuts.append((entry.start, entry.end, ""))
    for start, end, replacement in sorted(cuts, reverse=True):
        text = text[:start] + replacement + text[end:]
    for key, value in sets:
        text = set_value(text, key, value).text
    return remove_empty_headers(text, emptied) if emptied else text


def _without_empty_maps(text: str) -> str:
    """``text`` without the empty tables of the maps 2.x's ``config migrate`` leaves out."""
    data = tomllib.loads(text)
    empty = [path for path in EMPTY_MAPS_V3 if facts.lookup(data, path) == {}]
    return remove_empty_headers(text, empty) if empty else text


def _renamed(text: str, header: Header, path: KeyPath) -> str:
    """The header line with ``path`` in place of its key, in the file's quoting."""
    line = text[header.start:header.end]
    open_at = line.index("[")
    close_at = _key_end(line, open_at + 1)
    quote = "'" if any(part.startswith("'") for part in header.raw) else '"'
    rendered = ".".join(part if part.replace("-", "").replace("_", "").isalnum()
                        else f"{quote}{part}{quote}" for part in path)
    return line[:open_at + 1] + rendered + line[close_at:]


def _key_end(line: str, start: int) -> int:
    """The offset of the ``]`` closing a header's key (quotes skipped)."""
    quote = None
    for index in range(start, len(line)):
        char = line[index]
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "]":
            return index
    raise ValueError("a header without ']'")

