"""Rules about runtime options: their place, their spelling, and their types."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.runc_options import (
    CONTAINERD_BOOL_KEYS,
    CRI_BOOL_KEYS,
    RUNTIME_BOOL_KEYS,
    bool_text,
    canonical_option,
    is_runc,
    known_options,
    option_matches,
)
from gpuready.containerd.versions import ConfigVersion, KeyPath, render_key_path
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import ConfigContext, FileContext
from gpuready.rules.placement import foreign_runtimes


@dataclass(frozen=True)
class Move:
    """A key to move (and perhaps rename): from ``source`` to ``target``."""

    source: KeyPath
    target: KeyPath
    value: Any


def _semantics_major(ctx: FileContext) -> int:
    return ctx.semantics.major if ctx.semantics else 1


def bool_strings(data: Mapping[str, Any], spec: ConfigVersion, *, major: int) -> list[KeyPath]:
    """The key paths of boolean settings written as the strings "true"/"false"."""
    found: list[KeyPath] = []

    def scan(table: Any, path: KeyPath, keys) -> None:
        if isinstance(table, Mapping):
            for key, value in table.items():
                if keys(key) and bool_text(value) is not None:
                    found.append((*path, key))

    scan(facts.lookup(data, spec.cri_path), spec.cri_path, CRI_BOOL_KEYS.__contains__)
    scan(
        facts.lookup(data, spec.containerd_path),
        spec.containerd_path,
        CONTAINERD_BOOL_KEYS.__contains__,
    )
    runtimes = [
        (spec.runtime_path(name), entry) for name, entry in facts.runtimes(data, spec).items()
    ]
    # A runtime at another version's path is not registered (wrong-version-path says so), but
    # its strings would still break containers once it is moved where it belongs.
    runtimes += foreign_runtimes(data, spec)
    for path, entry in runtimes:
        scan(entry, path, RUNTIME_BOOL_KEYS.__contains__)
        if is_runc(entry):
            scan(facts.runtime_options(entry), (*path, "options"), _bool_option(major))
    return found


def _bool_option(major: int):
    def is_bool_option(key: str) -> bool:
        field = canonical_option(key, major=major)
        return field is not None and known_options(major=major)[field] is bool

    return is_bool_option


def misplaced_options(data: Mapping[str, Any], spec: ConfigVersion, *, major: int) -> list[Move]:
    """runc options on the runtime table, and snake_case spellings inside ``options``."""
    moves: list[Move] = []
    for name, entry in facts.runtimes(data, spec).items():
        if not is_runc(entry):
            continue
        for key, value in entry.items():
            field = canonical_option(key, major=major)
            if field is not None and not isinstance(value, Mapping):
                moves.append(
                    Move((*spec.runtime_path(name), key), (*spec.options_path(name), field), value)
                )
        for key, value in facts.runtime_options(entry).items():
            field = canonical_option(key, major=major)
            if field is not None and not option_matches(key, major=major):
                moves.append(
                    Move((*spec.options_path(name), key), (*spec.options_path(name), field), value)
                )
    return moves


class BoolAsString(Rule):
    """A boolean option written as a string (`SystemdCgroup = "true"`).

    ## What it does
    Reports boolean settings of the runtime, its runc options and the CRI plugin whose value
    is the string `"true"` or `"false"`, also in a runtime written at another config
    version's path or under an unquoted header (which wrong-version-path or
    unquoted-plugin-key reports as well: the string breaks containers once the table is moved).

    ## Why is this bad?
    TOML `"true"` is a string. containerd accepts the file and fails only when a container is
    created (the runc options cannot be decoded), so GPU pods fail while the node looks
    healthy.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      SystemdCgroup = "true"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      SystemdCgroup = true
    ```

    ## Fix
    Remove the quotes. `gpuready lint --fix` does.
    """

    name = "bool-as-string"
    severity = Severity.ERROR
    scope = Scope.FILE
    fixable = True

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.spec is None:
            return
        for path in bool_strings(ctx.data, ctx.spec, major=_semantics_major(ctx)):
            value = facts.lookup(ctx.data, path)
            literal = "true" if bool_text(value) else "false"
            yield ctx.report(
                self,
                f"{path[-1]} is the string {value!r}, not a boolean: containerd fails when a "
                "container is created",
                path,
                fix=f"write {path[-1]} = {literal} without quotes (gpuready lint --fix)",
            )


class OptionOutsideOptions(Rule):
    """A runc option on the runtime table, or spelled in snake_case inside `options`.

    ## What it does
    Reports runc options (`BinaryName`, `SystemdCgroup`, `NoPivotRoot`, …) written directly in
    the runtime's table instead of its `options` table, and spellings such as `systemd_cgroup`
    or `binary_name` inside `options` (keys match the runc field names, never snake_case).

    ## Why is this bad?
    containerd drops both without a word: the container runs with the plain `runc` binary
    (no GPU) or with cgroupfs while the kubelet uses systemd (nvidia-container-toolkit#28).

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Move the key into `options` with the runc field name. `gpuready lint --fix` does, unless
    `options` already sets the same key to another value.
    """

    name = "option-outside-options"
    severity = Severity.ERROR
    scope = Scope.FILE
    fixable = True

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.spec is None:
            return
        for move in misplaced_options(ctx.data, ctx.spec, major=_semantics_major(ctx)):
            target = render_key_path(move.target[:-1])
            if move.source[:-1] == move.target[:-1]:
                message = (
                    f"{move.source[-1]} is not a runc option name; containerd ignores it "
                    f"(the field is {move.target[-1]})"
                )
            else:
                message = (
                    f"{move.source[-1]} is a runc option and has no effect on the runtime "
                    f"table; containerd ignores it here"
                )
            yield ctx.report(
                self,
                message,
                move.source,
                fix=f"write {move.target[-1]} under [{target}] (gpuready lint --fix)",
            )


class UnknownOption(Rule):
    """A key in a runc `options` table that runc does not have.

    ## What it does
    Compares each key of a runc runtime's `options` with the runc shim's fields (`NoPivotRoot`,
    `NoNewKeyring`, `SystemdCgroup`, `ShimCgroup`, `BinaryName`, `Root`, `CriuImagePath`,
    `CriuWorkPath`, `IoUid`, `IoGid`, and `CriuPath` on 1.x), by exact name on 1.x and
    case-insensitively on 2.x, and suggests the closest field.

    ## Why is this bad?
    containerd drops unknown option keys silently, so a typo such as `SystemdCgroups` leaves
    the runtime on cgroupfs with nothing in any log.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      SystemdCgroups = true
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      SystemdCgroup = true
    ```

    ## Fix
    Correct the spelling, or remove the key.
    """

    name = "unknown-option"
    severity = Severity.WARNING
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.spec is None:
            return
        major = _semantics_major(ctx)
        fields = list(known_options(major=major))
        for name, entry in facts.runtimes(ctx.data, ctx.spec).items():
            if not is_runc(entry):
                continue
            for key in facts.runtime_options(entry):
                if option_matches(key, major=major) or canonical_option(key, major=major):
                    continue
                close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
                hint = (
                    f"did you mean {close[0]}?" if close else f"runc options: {', '.join(fields)}"
                )
                yield ctx.report(
                    self,
                    f"runtime {name!r}: {key} is not a runc option; containerd drops it "
                    f"silently{' (removed in containerd 2.0)' if key == 'CriuPath' else ''}",
                    (*ctx.spec.options_path(name), key),
                    fix=hint,
                )


class DeprecatedSystemdCgroup(Rule):
    """The plugin-level `systemd_cgroup = true` of the CRI plugin.

    ## What it does
    Reports `systemd_cgroup = true` on the CRI plugin table itself (not in a runtime's
    `options`). `systemd_cgroup = false`, which containerd 1.6's default config writes, is
    harmless and not reported.

    ## Why is this bad?
    On containerd 1.x the CRI plugin fails to load unless the default runtime is a shim v1
    runtime (containerd#4574); 2.0 removed the key, so there it has no effect at all.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri"]
      systemd_cgroup = true
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    ```

    ## Fix
    Remove the plugin-level key and set `SystemdCgroup = true` in the `options` of every
    runc runtime (runc and nvidia alike).
    """

    name = "deprecated-systemd-cgroup"
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        path = (*ctx.spec.cri_path, "systemd_cgroup")
        value = facts.lookup(ctx.data, path)
        if value is not True and bool_text(value) is not True:
            return
        removed = ctx.semantics.major >= 2
        yield ctx.report(
            self,
            "plugin-level systemd_cgroup = true "
            + (
                "has no effect (removed in containerd 2.0)"
                if removed
                else "makes the CRI plugin fail to load unless the default runtime uses shim v1"
            ),
            path,
            severity=Severity.WARNING if removed else None,
            fix="remove it; set SystemdCgroup = true in each runc runtime's options table",
        )


def _systemd_cgroup(entry: Mapping[str, Any] | None) -> bool | None:
    """The runtime's ``SystemdCgroup`` (False when unset); None when it is not a boolean."""
    value = facts.runtime_options(entry).get("SystemdCgroup", False)
    return value if isinstance(value, bool) else None


class CgroupDriverMismatch(Rule):
    """The GPU runtime's cgroup driver differs from runc's or from the kubelet's.

    ## What it does
    Compares the GPU runtime's `options.SystemdCgroup` with the `runc` runtime's and, under
    `doctor`, with the kubelet's `cgroupDriver` (`/var/lib/kubelet/config.yaml`; the kubelet's
    default is `cgroupfs`).

    ## Why is this bad?
    Two cgroup managers on one node fight over the same cgroups: GPU pods are killed at
    random or stay in `ContainerCreating` (nvidia-container-toolkit#28). Missing
    `SystemdCgroup` on the nvidia runtime while runc has it is the usual cause.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
      SystemdCgroup = true
    ```

    ## Fix
    Give the GPU runtime the same `SystemdCgroup` as runc, matching the kubelet's
    `cgroupDriver` (`systemd` ↔ `true`, `cgroupfs` ↔ `false`).
    """

    name = "cgroup-driver-mismatch"
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        name = ctx.options.runtime_name
        runtimes = ctx.runtimes()
        if name not in runtimes:
            return
        gpu = _systemd_cgroup(runtimes[name])
        if gpu is None:
            return  # bool-as-string reports it
        path = (*ctx.spec.options_path(name), "SystemdCgroup")
        if "runc" in runtimes and name != "runc":
            runc = _systemd_cgroup(runtimes["runc"])
            if runc is not None and runc != gpu:
                yield ctx.report(
                    self,
                    f"runtime {name!r} has SystemdCgroup = {str(gpu).lower()} but runc has "
                    f"{str(runc).lower()}: two cgroup drivers on one node",
                    path,
                    fix=f"set SystemdCgroup = {str(runc).lower()} in "
                    f"[{render_key_path(ctx.spec.options_path(name))}]",
                )
                return
        driver = ctx.kubelet_cgroup_driver
        if driver in ("systemd", "cgroupfs") and gpu != (driver == "systemd"):
            yield ctx.report(
                self,
                f"runtime {name!r} has SystemdCgroup = {str(gpu).lower()} but the kubelet's "
                f"cgroupDriver is {driver} ({ctx.kubelet_file})",
                path,
                fix=f"set SystemdCgroup = {str(driver == 'systemd').lower()} in "
                f"[{render_key_path(ctx.spec.options_path(name))}]",
            )
