"""Rules about runtime options: their place, their spelling, and their types."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpuready.containerd import decoding, facts
from gpuready.containerd.decoding import Spelling, Verdict
from gpuready.containerd.runc_options import (
    CONTAINERD_BOOL_KEYS,
    CRI_BOOL_KEYS,
    RUNTIME_BOOL_KEYS,
    bool_text,
    canonical_option,
    is_runc,
    known_options,
)
from gpuready.containerd.versions import ConfigVersion, KeyPath, render_key_path
from gpuready.problems import Problem, Severity
from gpuready.records import Record
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import ConfigContext, FileContext, plain_problem
from gpuready.rules.placement import foreign_runtimes
from gpuready.suggest import did_you_mean


class Move(Record):
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
    """runc options on the runtime table, and snake_case spellings inside ``options``.

    Every containerd line drops a snake_case key (``binary_name``) without a word (see
    :mod:`gpuready.containerd.decoding`); other spellings are :func:`respelled_options`.
    """
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
            if field is not None and decoding.spelling(key, field) is Spelling.SNAKE:
                moves.append(
                    Move((*spec.options_path(name), key), (*spec.options_path(name), field), value)
                )
    return moves


def respelled_options(data: Mapping[str, Any], spec: ConfigVersion, *, major: int) -> list[Move]:
    """Renames of working but non-canonical spellings (``binaryName`` -> ``BinaryName``).

    Only a field spelled once: two spellings are :class:`OptionSpelledTwice`, fixed by hand.
    """
    moves: list[Move] = []
    for name, entry in facts.runtimes(data, spec).items():
        if not is_runc(entry):
            continue
        options = facts.runtime_options(entry)
        for field in known_options(major=major):
            found = _working_spellings(options, field)
            if len(found) == 1 and found[0][1] is not Spelling.EXACT:
                key = found[0][0]
                path = spec.options_path(name)
                moves.append(Move((*path, key), (*path, field), options[key]))
    return moves


def _working_spellings(options: Mapping[str, Any], field: str) -> list[tuple[str, Spelling]]:
    """The spellings of ``field`` in ``options`` that a containerd line may read (not snake)."""
    return [
        (key, how)
        for key, how in decoding.spellings_of(options, field).items()
        if how is not Spelling.SNAKE
    ]


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
        default = ctx.spec.runtime_path(facts.default_runtime_name(ctx.data, ctx.spec))
        for path in bool_strings(ctx.data, ctx.spec, major=_semantics_major(ctx)):
            value = facts.lookup(ctx.data, path)
            literal = "true" if bool_text(value) else "false"
            everyone = (f"; {default[-1]} is the default runtime: every pod without a "
                        "RuntimeClass fails" if path[:len(default)] == default else "")
            yield ctx.report(
                self,
                f"{path[-1]} is the string {value!r}, not a boolean: containerd fails when a "
                f"container is created{everyone}",
                path,
                fix=f"write {path[-1]} = {literal} without quotes (gpuready lint --fix)",
            )


TYPE_WORDS = {bool: "a boolean", str: "a string", int: "an integer"}


def wrong_types(data: Mapping[str, Any], spec: ConfigVersion, *,
                major: int) -> list[tuple[KeyPath, str, Any, type]]:
    """The runc options of a registered runc runtime whose value containerd cannot decode into
    the option's field: ``(path, runtime, value, field type)``. A boolean written as the string
    "true"/"false" is :class:`BoolAsString`'s; an option's spelling is the spelling rules'."""
    found = []
    for name, entry in facts.runtimes(data, spec).items():
        if not isinstance(entry, Mapping) or not is_runc(entry):
            continue
        for key, value in facts.runtime_options(entry).items():
            field = canonical_option(key, major=major)
            if field is None or decoding.spelling(key, field) is Spelling.SNAKE:
                continue
            expected = known_options(major=major)[field]
            if expected is bool and bool_text(value) is not None:
                continue
            if isinstance(value, expected) and (expected is bool or not isinstance(value, bool)):
                continue
            found.append(((*spec.options_path(name), key), name, value, expected))
    return found


class OptionWrongType(Rule):
    """A runc option of the wrong type (`SystemdCgroup = "yes"`, `BinaryName = 5`).

    ## What it does
    Reports a runc option of a registered runc runtime whose value is not of its field's type:
    `SystemdCgroup`, `NoPivotRoot` and `NoNewKeyring` are booleans, `BinaryName`, `Root` and
    the other paths strings, `IoUid` and `IoGid` integers. A boolean written as the string
    `"true"` or `"false"` is bool-as-string's.

    ## Why is this bad?
    containerd loads the file and cannot decode the options only when a container is created,
    so every container of that runtime fails while the node looks healthy. On the default
    runtime (runc) that is every pod without a RuntimeClass.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = "yes"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    ```

    ## Fix
    Write the value as the option's type. No certain repair exists: say what you mean.
    """

    name = "option-wrong-type"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.spec is None:
            return
        default = facts.default_runtime_name(ctx.data, ctx.spec)
        for path, name, value, expected in wrong_types(ctx.data, ctx.spec,
                                                       major=_semantics_major(ctx)):
            everyone = (f"; {name} is the default runtime: every pod without a RuntimeClass "
                        "fails" if name == default else "")
            yield ctx.report(
                self,
                f"runtime {name!r}: {path[-1]} is {value!r}, not {TYPE_WORDS[expected]}: "
                f"containerd fails when a container is created{everyone}",
                path,
                fix=f"write {path[-1]} as {TYPE_WORDS[expected]}",
            )


class OptionOutsideOptions(Rule):
    """A runc option on the runtime table, or spelled in snake_case inside `options`.

    ## What it does
    Reports runc options (`BinaryName`, `SystemdCgroup`, `NoPivotRoot`, …) written directly in
    the runtime's table instead of its `options` table, and spellings such as `systemd_cgroup`
    or `binary_name` inside `options` (keys match the runc field names in any case, never
    snake_case: measured on containerd 1.6, 2.1 and 2.3).

    ## Why is this bad?
    containerd drops both without a word (every line; the sandbox status shows no
    `binary_name`): the container runs with the plain `runc` binary
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


class OptionSpelling(Rule):
    """A runc option spelled other than its field name (`binaryName`, `BINARYNAME`).

    ## What it does
    Reports a key in a runc runtime's `options` that spells a runc field in another case than
    the field name, when the field is spelled once in the table.

    ## Why is this bad?
    containerd 1.6, 2.1 and 2.3 all match option keys case-insensitively, so `binaryName`
    works (kubespray wrote it this way for years). But a second tool that adds `BinaryName`
    to the same table makes the runtime depend on the containerd release (1.6 reads the field
    name, 2.x the camelCase key), and a case mix that was never recorded (`binaryNAME`) may not
    be read at all.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      binaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Rename the key to the field name. `gpuready lint --fix` does.
    """

    name = "option-spelling"
    severity = Severity.WARNING
    scope = Scope.FILE
    fixable = True

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.spec is None:
            return
        for move in respelled_options(ctx.data, ctx.spec, major=_semantics_major(ctx)):
            key, field = move.source[-1], move.target[-1]
            how = decoding.spelling(key, field)
            if how is Spelling.OTHER_CASE:
                said = (
                    f"{key} spells {field} in a case mix never recorded: whether containerd "
                    "reads it is unknown"
                )
            else:
                said = (
                    f"{key} works ({how.value}; containerd 1.6, 2.1 and 2.3 match option names "
                    f"case-insensitively) but the field is {field}: a second spelling added by "
                    "another tool would make the value depend on the containerd release"
                )
            yield ctx.report(
                self,
                f"runtime {move.source[-3]!r}: {said}",
                move.source,
                fix=f"rename {key} to {field} (gpuready lint --fix)",
            )


def spelled_twice(options: Mapping[str, Any], *, major: int) -> Iterator[tuple[str, list[str]]]:
    """``(field, keys)`` for each runc field that ``options`` spells more than once."""
    for field in known_options(major=major):
        found = _working_spellings(options, field)
        if len(found) > 1:
            yield field, [key for key, _ in found]


def per_line_values(options: Mapping[str, Any], field: str) -> str:
    """Which key's value each recorded containerd line uses, grouped: for messages."""
    groups: dict[str, list[str]] = {}
    for line in decoding.LINES:
        reading = decoding.read_field(options, field, line)
        if reading.verdict is Verdict.UNKNOWN:
            outcome = "unknown (this mix was never recorded)"
        elif reading.key is None:
            outcome = "neither"
        else:
            outcome = f"{reading.key} = {_literal(options[reading.key])}"
        groups.setdefault(outcome, []).append(line.name)
    parts = []
    for what, names in groups.items():
        verb = ("use" if len(names) > 1 else "uses") if "=" in what else "is"
        parts.append(f"containerd {' and '.join(names)} {verb} {what}")
    return "; ".join(parts)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


class OptionSpelledTwice(Rule):
    """One runc option spelled twice in one `options` table (`BinaryName` and `binaryName`).

    ## What it does
    Reports a runc field that a runtime's `options` table sets under two spellings that
    containerd reads (any case; snake_case is dropped and reported by option-outside-options),
    and says which value each containerd line uses.

    ## Why is this bad?
    containerd reads both as the same field, and which one wins depends on the release:
    1.6 uses the exact field name, 2.1 and 2.3 the camelCase key, whatever the order in the
    file (recorded; other mixes were never recorded and are unknown). This is what happens when
    two tools edit one file: after an upgrade to 2.x the node silently runs the other binary.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
      binaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Keep one key, spelled as the field name, with the value you mean.
    """

    name = "option-spelled-twice"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.spec is None:
            return
        for name, entry in facts.runtimes(ctx.data, ctx.spec).items():
            if not is_runc(entry):
                continue
            options = facts.runtime_options(entry)
            for field, keys in spelled_twice(options, major=_semantics_major(ctx)):
                yield ctx.report(
                    self,
                    f"runtime {name!r}: {field} is spelled {len(keys)} times "
                    f"({', '.join(keys)}): {per_line_values(options, field)}",
                    (*ctx.spec.options_path(name), keys[-1]),
                    fix=f"keep only {field}, with the value you mean",
                )


class UnknownOption(Rule):
    """A key in a runc `options` table that runc does not have.

    ## What it does
    Compares each key of a runc runtime's `options` with the runc shim's fields (`NoPivotRoot`,
    `NoNewKeyring`, `SystemdCgroup`, `ShimCgroup`, `BinaryName`, `Root`, `CriuImagePath`,
    `CriuWorkPath`, `IoUid`, `IoGid`, and `CriuPath` on 1.x), ignoring case and underscores
    (other spellings are option-spelling, option-spelled-twice and option-outside-options),
    and suggests the closest field.

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
                if canonical_option(key, major=major):
                    continue
                close = did_you_mean(key, fields)
                hint = f"did you mean {close}?" if close else f"runc options: {', '.join(fields)}"
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


def decoded_option(entry: Mapping[str, Any] | None, field: str, lines) -> Any:
    """The value ``lines`` all give a runc field (False/None defaults kept), else ``...``.

    ``...`` (Ellipsis) means the lines disagree or one of them was never recorded reading this
    spelling: option-spelled-twice and option-spelling report that.
    """
    options = facts.runtime_options(entry)
    values = set()
    for line in lines:
        value, known = decoding.decoded_value(options, field, line)
        if not known:
            return ...
        values.add(repr(value))
    if len(values) != 1:
        return ...
    return decoding.decoded_value(options, field, lines[0])[0]


def systemd_cgroup(entry: Mapping[str, Any] | None, lines) -> bool | None:
    """The runtime's ``SystemdCgroup`` as containerd reads it (False when unset); None when it
    is not a boolean or the containerd lines disagree."""
    value = decoded_option(entry, "SystemdCgroup", lines)
    if value is None:
        return False
    return value if isinstance(value, bool) else None


class CgroupVerdict(Record):
    """The one verdict on the node's cgroup drivers, shared by setup, check, lint and doctor."""

    severity: Severity
    message: str
    fix: str
    runtime: str | None  # the runtime whose SystemdCgroup it is about; None: the kubelet's
    rule: str = "cgroup-driver-mismatch"  # the rule that reports it


INHERIT_ADVICE = "or register the GPU runtime with --systemd-cgroup=inherit to use runc's driver"
NO_SYSTEMD_RULE = "systemd-cgroup-without-systemd"
# what runc says when SystemdCgroup = true meets a node without systemd
RUNC_NO_SYSTEMD = "systemd not running on this host, cannot use systemd cgroups manager"


def _driver(value: bool) -> str:
    return "systemd" if value else "cgroupfs"


def cgroup_verdict(
    runtimes: Mapping[str, Mapping[str, Any]],
    name: str,
    *,
    lines,
    kubelet_driver: str | None,
    kubelet_file: str | None,
    systemd=None,
) -> CgroupVerdict | None:
    """Compare the GPU runtime's cgroup driver with runc's, the kubelet's and the node's; None
    when fine.

    ``systemd`` (a :class:`gpuready.init_system.SystemdFact`, None when the node is not judged)
    comes first: on a node that shows no systemd, a runc runtime with ``SystemdCgroup = true``
    or the kubelet's ``cgroupDriver: systemd`` is an error (systemd-cgroup-without-systemd).
    Otherwise the kubelet's configured driver decides when it is known: a runtime that differs
    is an error. When it is unknown, runc and the GPU runtime on different drivers is a warning:
    one of them is wrong, and only the kubelet can tell which. Where systemd may run, the advice
    never asks to turn the GPU runtime's ``SystemdCgroup = true`` (what gpuready registers) into
    false.
    """
    if systemd is not None and systemd.absent:  # whatever else is registered
        return _without_systemd(runtimes, name, lines, systemd.evidence, kubelet_driver,
                                kubelet_file)
    if name not in runtimes:
        return None
    gpu = systemd_cgroup(runtimes[name], lines)
    has_runc = "runc" in runtimes and name != "runc"
    runc = systemd_cgroup(runtimes["runc"], lines) if has_runc else None
    if gpu is None:
        return None  # bool-as-string or option-spelled-twice reports it
    if kubelet_driver in ("systemd", "cgroupfs"):
        want = kubelet_driver == "systemd"
        for runtime, value in ((name, gpu), ("runc", runc)):
            if value is None or value == want:
                continue
            if want:
                fix = f"set SystemdCgroup = true in runtime {runtime!r}'s options"
            else:
                fix = (
                    f"set cgroupDriver: systemd in {kubelet_file} and SystemdCgroup = true for "
                    f"runc, {INHERIT_ADVICE}"
                )
            return CgroupVerdict(
                Severity.ERROR,
                f"runtime {runtime!r} has SystemdCgroup = {str(value).lower()} but the kubelet's "
                f"cgroupDriver is {kubelet_driver} ({kubelet_file}): its pods fail to start",
                fix,
                runtime,
            )
        return None
    if runc is not None and runc != gpu:
        return CgroupVerdict(
            Severity.WARNING,
            f"runtime {name!r} uses {_driver(gpu)} (SystemdCgroup = {str(gpu).lower()}) but runc "
            f"uses {_driver(runc)}: pods on this node would use two cgroup drivers, and the "
            "kubelet's cgroupDriver is unknown",
            "align runc's SystemdCgroup with the kubelet's cgroupDriver (true for systemd), "
            + INHERIT_ADVICE,
            name,
        )
    return None


def _without_systemd(
    runtimes: Mapping[str, Mapping[str, Any]], name: str, lines, evidence: str,
    kubelet_driver: str | None, kubelet_file: str | None,
) -> CgroupVerdict | None:
    """The verdict on a node without systemd: every runc runtime and the kubelet on cgroupfs."""
    order = [name, "runc", *sorted(runtimes)]
    on_systemd = [runtime for runtime in dict.fromkeys(order) if runtime in runtimes
                  and isinstance(runtimes[runtime], Mapping) and is_runc(runtimes[runtime])
                  and systemd_cgroup(runtimes[runtime], lines) is True]
    kubelet = kubelet_driver == "systemd"
    if not on_systemd and not kubelet:
        return None
    kubelet_fix = f"set cgroupDriver: cgroupfs in {kubelet_file}"
    if not on_systemd:
        return CgroupVerdict(
            Severity.ERROR,
            f"the kubelet's cgroupDriver is systemd ({kubelet_file}) but systemd does not run on "
            f"this node ({evidence}): the kubelet cannot manage pod cgroups through systemd",
            f"{kubelet_fix} (the runtimes already use cgroupfs), or run the node with systemd",
            None, NO_SYSTEMD_RULE)
    named = " and ".join(repr(runtime) for runtime in on_systemd)
    plural = len(on_systemd) > 1
    how = (f" ('gpuready configure --systemd-cgroup false' does it for {name!r})"
           if name in on_systemd else "")
    fix = (f"set SystemdCgroup = false (the cgroupfs driver) in the options of runtime"
           f"{'s' if plural else ''} {named}{how}")
    if kubelet:
        fix += f", and {kubelet_fix}"
    return CgroupVerdict(
        Severity.ERROR,
        f"runtime{'s' if plural else ''} {named} {'have' if plural else 'has'} SystemdCgroup = "
        f"true but systemd does not run on this node ({evidence}): "
        f"{'their' if plural else 'its'} pods fail to start (runc: \"{RUNC_NO_SYSTEMD}\")",
        fix + ", or run the node with systemd",
        on_systemd[0], NO_SYSTEMD_RULE)


class CgroupDriverMismatch(Rule):
    """The GPU runtime's cgroup driver differs from runc's or from the kubelet's.

    ## What it does
    Compares the GPU runtime's `options.SystemdCgroup` (as containerd decodes it) with the
    kubelet's `cgroupDriver` (`/var/lib/kubelet/config.yaml`, read by `doctor`) and with the
    `runc` runtime's. A runtime that differs from the kubelet's configured driver is an error;
    when the kubelet's driver is unknown (lint, or no kubelet config), runc and the GPU runtime
    on different drivers is a warning. On a node that shows no systemd,
    systemd-cgroup-without-systemd gives the verdict instead. `setup` and `check` give the same
    verdict.

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
    Use the kubelet's `cgroupDriver` for every runc runtime (`systemd` ↔ `SystemdCgroup =
    true`): align runc with it, or register the GPU runtime with `--systemd-cgroup=inherit`.
    """

    name = "cgroup-driver-mismatch"
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        yield from _report_verdict(self, ctx)


def _report_verdict(rule: Rule, ctx: ConfigContext) -> Iterator[Problem]:
    """The node's one cgroup verdict, when ``rule`` is the rule that gives it."""
    verdict = cgroup_verdict(
        ctx.runtimes(),
        ctx.options.runtime_name,
        lines=decoding.lines_for(major=ctx.semantics.major, release=ctx.semantics.release),
        kubelet_driver=ctx.kubelet_cgroup_driver,
        kubelet_file=ctx.kubelet_file,
        systemd=ctx.systemd,
    )
    if verdict is None or verdict.rule != rule.name:
        return
    if verdict.runtime is None:  # the kubelet's driver: a problem in the kubelet's file
        yield plain_problem(rule, verdict.message, file=ctx.kubelet_file or "",
                            key_path="cgroupDriver", severity=verdict.severity, fix=verdict.fix)
        return
    yield ctx.report(
        rule,
        verdict.message,
        (*ctx.spec.options_path(verdict.runtime), "SystemdCgroup"),
        severity=verdict.severity,
        fix=verdict.fix,
    )


class SystemdCgroupWithoutSystemd(Rule):
    """`SystemdCgroup = true` on a node where systemd does not run.

    ## What it does
    Looks whether systemd runs on the node (`lint` without FILE, `doctor`, `check` and `setup`;
    `configure` on the file it writes, `verify --live` on the runtimes containerd loaded; never
    `lint FILE`, which judges a file, not a node, nor a `--config` copy outside the node's
    `/etc/containerd`). On this machine:
    `/run/systemd/system` is a folder (as `sd_booted()` decides; runc asks the same), and PID 1's
    name (`/proc/1/comm`) is said beside it. Under `--root` only what the root holds counts: its
    `run/systemd/system`, `proc/1/comm`, and its init (`/sbin/init` linking to systemd, or to
    busybox, openrc-init, ...). A root that holds none of them is unknown and nothing is
    reported. On a node without systemd, reports every runc runtime whose `options.SystemdCgroup`
    is true, and the kubelet's `cgroupDriver: systemd` (`doctor`).

    ## Why is this bad?
    runc's systemd cgroup manager needs systemd: on a host without it (WSL, OpenRC, runit,
    busybox init, a container) every pod of the runtime fails to start with "systemd not running
    on this host, cannot use systemd cgroups manager". containerd loads the config without a
    word, so before this rule only a probe (`verify --live --probe`) found it.

    ## Example
    ```toml
    # a node whose PID 1 is openrc-init, no /run/systemd/system
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
      SystemdCgroup = true
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
      SystemdCgroup = false
    ```

    ## Fix
    Set `SystemdCgroup = false` (the cgroupfs driver) in the options of every runc runtime
    (`gpuready configure --systemd-cgroup false` does it for the GPU runtime; `gpuready setup`
    chooses false by itself on a node that shows no systemd), and `cgroupDriver: cgroupfs` in
    the kubelet's config; or run the node with systemd.
    """

    name = NO_SYSTEMD_RULE
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        yield from _report_verdict(self, ctx)


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    BoolAsString(),
    OptionWrongType(),
    OptionOutsideOptions(),
    OptionSpelling(),
    OptionSpelledTwice(),
    UnknownOption(),
    DeprecatedSystemdCgroup(),
    CgroupDriverMismatch(),
    SystemdCgroupWithoutSystemd(),
)
