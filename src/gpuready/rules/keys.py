"""Rules about keys containerd does not read: unknown, removed, or read elsewhere in version 4."""

from __future__ import annotations

from collections.abc import Iterator

from gpuready.containerd.keyschema import UnknownKey as Unknown
from gpuready.containerd.runc_options import canonical_option
from gpuready.containerd.versions import CRI_PLUGIN_IDS, render_key_path
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import FileContext


def _owned_elsewhere(found: Unknown, ctx: FileContext) -> bool:
    """Keys other rules report: another version's CRI table (wrong-version-path), runc options
    on a runtime table (option-outside-options), the plugin-level systemd_cgroup
    (deprecated-systemd-cgroup)."""
    path = found.path
    if len(path) >= 2 and path[0] == "plugins" and path[1] in CRI_PLUGIN_IDS:
        if path[1] != ctx.spec.cri_plugin:
            return True
        if path[2:] == ("systemd_cgroup",):
            return True
        tail = path[2:]
        if tail[:2] == ("containerd", "runtimes") and len(tail) == 4:
            return canonical_option(tail[3], major=2 if ctx.spec.number >= 3 else 1) is not None
    return False


def _findings(ctx: FileContext) -> list[Unknown]:
    return [found for found in ctx.unknown_keys() if not _owned_elsewhere(found, ctx)]


class UnknownKey(Rule):
    """A key containerd does not read at this place: a typo, or a key this line removed.

    ## What it does
    Compares every key of the file with the keys the containerd line that reads its config
    version takes (version 2: 1.6 and 1.7, 3: 2.1, 4: 2.3; the schema is generated from each
    line's recorded `containerd config default`, plus documented keys no default prints), and
    suggests the closest known key. Keys a line removed (the CRI `registry.mirrors` and
    `registry.configs` in 2.x) are named as such.

    ## Why is this bad?
    containerd ignores a key it has no field for, without a word: `runtime_typ` leaves the
    runtime without a type, a mirror under a removed table is never used.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_typ = "io.containerd.runc.v2"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Fix
    Correct the key's spelling or place, or remove it.
    """

    name = "unknown-key"
    severity = Severity.WARNING
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        for found in _findings(ctx):
            if found.note is not None and found.path[0] != "plugins":
                continue  # moved-key
            key = found.path[-1]
            where = render_key_path(found.path[:-1]) or "the top level"
            if found.note is not None:
                message, fix = found.note.message, "see the message"
            else:
                message = (
                    f"containerd does not read {key} in [{where}] of a version {ctx.version} "
                    "file; it ignores it without a word"
                )
                fix = (
                    f"did you mean {found.suggestion}?"
                    if found.suggestion
                    else "remove it, or move it where containerd reads it"
                )
            yield ctx.report(self, message, found.path, fix=fix)


class MovedKey(Rule):
    """A top-level server table in a version 4 file, which containerd 2.3 ignores.

    ## What it does
    Reports the top-level `[grpc]`, `[ttrpc]` and `[metrics]` tables and the `address`, `uid`
    and `gid` of `[debug]` in a `version = 4` file.

    ## Why is this bad?
    In version 4 these settings belong to the server plugins
    (`plugins.'io.containerd.server.v1.grpc'` and siblings). containerd 2.3 echoes the top-level
    tables in `config dump` but does not use them: the socket stays at its default path, no
    metrics listener or debug socket is opened, and nothing says so (recorded on 2.3.4). In
    version 3 files the top-level tables work; `[debug] level` and `format` stay top-level.

    ## Example
    ```toml
    version = 4
    [grpc]
      address = "/run/k3s/containerd/containerd.sock"
    ```

    ## Use instead
    ```toml
    version = 4
    [plugins.'io.containerd.server.v1.grpc']
      address = "/run/k3s/containerd/containerd.sock"
    ```

    ## Fix
    Move the keys under the server plugin's table.
    """

    name = "moved-key"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        for found in _findings(ctx):
            if found.note is None or found.path[0] == "plugins":
                continue
            yield ctx.report(
                self,
                found.note.message,
                found.path,
                fix="move it under the plugin table the message names",
            )


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    UnknownKey(),
    MovedKey(),
)
