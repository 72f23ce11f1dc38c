"""Rules about the runtime table: is the runtime there, of the right type, and runnable."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

from gpuready.containerd import decoding, facts
from gpuready.containerd.runc_options import (
    DEPRECATED_RUNTIME_TYPES,
    RECOMMENDED_RUNTIME_TYPE,
)
from gpuready.containerd.versions import render_key_path
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import ConfigContext, FileContext
from gpuready.rules.placement import runtime_written_elsewhere
from gpuready.rules.shape import runtime_type


def file_runtimes(ctx: FileContext) -> dict[str, Mapping[str, Any]]:
    """The runtimes of one file at the table its version reads (empty if unreadable)."""
    if ctx.data is None or ctx.spec is None:
        return {}
    return facts.runtimes(ctx.data, ctx.spec)


class RuntimeNotRegistered(Rule):
    """The GPU runtime is not in the runtime table containerd reads.

    ## What it does
    Looks for the runtime named by `--runtime-name` (default `nvidia`) under this version's
    `containerd.runtimes` table. When the runtime is written somewhere else in the file
    (another version's table, an unquoted header), the rule that explains why reports it
    instead.

    ## Why is this bad?
    A pod with `runtimeClassName: nvidia` fails with `RunContainerError: no runtime for
    "nvidia" is configured`, and GPUs are not visible in containers.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Use instead
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
        SystemdCgroup = true
    ```

    ## Fix
    Run `gpuready configure`, which adds the runtime at the path of the file's version and
    keeps every comment.
    """

    name = "runtime-not-registered"
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        name = ctx.options.runtime_name
        loaded = ctx.loaded
        if name in loaded.runtimes:
            return
        if name in ctx.runtimes():  # written, but the node's line does not read it
            why = loaded.unread or loaded.why_not_loaded(name)
            yield ctx.report(self, f"runtime {name!r} is not loaded: {why}",
                             ctx.spec.runtime_path(name),
                             fix="write the config in a version this containerd reads "
                             "(gpuready migrate, or a config of its own version)")
            return
        if any(
            file.data is not None and runtime_written_elsewhere(file.data, ctx.spec, name)
            for file in ctx.files
        ):
            return
        table = render_key_path(ctx.spec.runtime_path(name))
        yield ctx.report(
            self,
            f"runtime {name!r} is not registered: no [{table}] table",
            ctx.spec.runtime_path(name),
            fix=f"run 'gpuready configure --runtime-name {name}', or add the table with "
            f'runtime_type = "{RECOMMENDED_RUNTIME_TYPE}"',
        )


class RuntimeTypeMissing(Rule):
    """A runtime without `runtime_type`.

    ## What it does
    Reports every registered runtime whose `runtime_type` is missing or empty.

    ## Why is this bad?
    containerd 2.x rejects it ("container.Runtime.Name must be set"); 1.x falls back to the
    plugin's default type at best, so the runtime does not run through the runc v2 shim with
    its `options`.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
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
    Set `runtime_type = "io.containerd.runc.v2"`. `gpuready lint --fix` does.
    """

    name = "runtime-type-missing"
    severity = Severity.ERROR
    scope = Scope.CONFIG
    fixable = True

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        for name, entry in ctx.runtimes().items():
            if not entry.get("runtime_type"):
                yield ctx.report(
                    self,
                    f"runtime {name!r} has no runtime_type",
                    ctx.spec.runtime_path(name),
                    fix=f'set runtime_type = "{RECOMMENDED_RUNTIME_TYPE}" (gpuready lint --fix)',
                )


class RuntimeTypeDeprecated(Rule):
    """A runtime that uses the shim v1 (`io.containerd.runc.v1`, `runtime_engine`, …).

    ## What it does
    Reports `runtime_type` `io.containerd.runc.v1` or `io.containerd.runtime.v1.linux`, and
    shim v1 keys `runtime_engine` / `runtime_root` set to a non-empty value. (containerd 1.6's
    own default config writes them as `""`, which is harmless and not reported.)

    ## Why is this bad?
    The shim v1 and runc v1 shim are deprecated in 1.x and removed in 2.0: after an upgrade the
    runtime no longer starts containers.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runtime.v1.linux"
      runtime_engine = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Use `runtime_type = "io.containerd.runc.v2"` and move the binary to `options.BinaryName`.
    """

    name = "runtime-type-deprecated"
    severity = Severity.WARNING
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        severity = Severity.ERROR if ctx.semantics and ctx.semantics.major >= 2 else None
        for name, entry in file_runtimes(ctx).items():
            path = ctx.spec.runtime_path(name)
            written = runtime_type(entry)
            if written in DEPRECATED_RUNTIME_TYPES:
                yield ctx.report(
                    self,
                    f"runtime {name!r} uses the deprecated runtime_type {written!r} "
                    "(removed in containerd 2.0)",
                    (*path, "runtime_type"),
                    severity=severity,
                    fix=f'set runtime_type = "{RECOMMENDED_RUNTIME_TYPE}"',
                )
            for key in ("runtime_engine", "runtime_root"):
                if entry.get(key):
                    yield ctx.report(
                        self,
                        f"runtime {name!r} sets the shim v1 key {key} (removed in containerd "
                        "2.0; ignored by the runc v2 shim)",
                        (*path, key),
                        severity=severity,
                        fix=f"remove {key}; set options.BinaryName / options.Root instead",
                    )


class DefaultRuntimeChanged(Rule):
    """`default_runtime_name` is not `runc`.

    ## What it does
    Reports a registered default runtime other than `runc`; an error when it names the GPU
    runtime. (A default that names no runtime is `default-runtime-missing`.)

    ## Why is this bad?
    Every pod, GPU or not, runs through the default runtime: a fault in the NVIDIA runtime
    then stops every pod on the node. GPU pods should opt in with a RuntimeClass.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
    ```

    ## Fix
    Set `default_runtime_name = "runc"` and give GPU pods `runtimeClassName: nvidia`.
    """

    name = "default-runtime-changed"
    severity = Severity.WARNING
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        default = facts.default_runtime_name(ctx.data, ctx.spec)
        if default == facts.RUNC_DEFAULT_NAME or default not in ctx.runtimes():
            return  # an unregistered default is default-runtime-missing, a worse problem
        is_gpu = default == ctx.options.runtime_name
        yield ctx.report(
            self,
            f"default_runtime_name is {default!r}: every pod on the node runs through it"
            + (", not only GPU pods" if is_gpu else ""),
            ctx.spec.default_runtime_path,
            severity=Severity.ERROR if is_gpu else None,
            fix='set default_runtime_name = "runc"; GPU pods opt in with a RuntimeClass',
        )


class DefaultRuntimeMissing(Rule):
    """`default_runtime_name` names a runtime that is not registered.

    ## What it does
    Reports a `default_runtime_name` that names no runtime the node's containerd loads. Mostly
    a name other than `runc`; but containerd 1.x fills in `runc` only while no file writes a
    `runtimes` table: a table that names only other runtimes (as `nvidia-ctk` 1.20 leaves
    Debian's stock file) removes `runc` too.

    ## Why is this bad?
    The CRI plugin fails to load ("no corresponding runtime configured in
    `containerd.runtimes` for default runtime"), and the kubelet cannot run any pod.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "crun"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
    ```

    ## Fix
    Set `default_runtime_name = "runc"`, or register the runtime it names.
    """

    name = "default-runtime-missing"
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        loaded = ctx.loaded
        default = loaded.default_runtime
        if default in loaded.runtimes or loaded.unread:
            return
        cause = loaded.cause
        if cause is not None and cause.kind == "import-replaced":
            return  # import-overrides-cri names the cause, in that file: one cause, one report
        file = _file_of(ctx, cause.file) if cause is not None else None
        if cause is not None and file is not None and cause.kind in ("map-replaced",
                                                                     "default-missing"):
            # containerd 1.x: a runtimes table in a file replaces the built-in runc whole (the
            # model's cause, the same one check, verify --live and the gate give)
            yield file.report(self, cause.message, cause.key_path, fix=cause.fix)
            return
        yield ctx.report(
            self,
            f"default_runtime_name {default!r} names no registered runtime: the CRI plugin "
            "will not load",
            ctx.spec.default_runtime_path,
            fix='set default_runtime_name = "runc"',
        )


def _file_of(ctx: ConfigContext, path: object) -> FileContext | None:
    """The file of ``ctx`` read from ``path``."""
    return next((file for file in ctx.files if file.path == path), None)


def _binary_keys(entry: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], str]]:
    """``(relative key path, value)`` of the runtime's executable paths that are set."""
    options = facts.runtime_options(entry)
    # Any case of the field name reaches the shim (containerd.decoding); snake_case does not.
    for key, how in decoding.spellings_of(options, "BinaryName").items():
        if how is not decoding.Spelling.SNAKE and isinstance(options[key], str) and options[key]:
            yield ("options", key), options[key]
    if isinstance(entry.get("runtime_path"), str) and entry["runtime_path"]:
        yield ("runtime_path",), entry["runtime_path"]


class BinaryPathRelative(Rule):
    """`BinaryName` or `runtime_path` is not an absolute path.

    ## What it does
    Reports a runtime whose `options.BinaryName` or `runtime_path` is a relative path.

    ## Why is this bad?
    The shim looks a relative name up in its own `PATH`, which is containerd's service
    environment, not your shell's: the runtime works when tried by hand and fails under
    systemd.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Write the absolute path (`command -v nvidia-container-runtime`).
    """

    name = "binary-path-relative"
    severity = Severity.WARNING
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        for name, entry in file_runtimes(ctx).items():
            for key, value in _binary_keys(entry):
                if not PurePosixPath(value).is_absolute():
                    yield ctx.report(
                        self,
                        f"runtime {name!r}: {'.'.join(key)} {value!r} is not an absolute path",
                        (*ctx.spec.runtime_path(name), *key),
                        fix=f"write the absolute path, e.g. /usr/bin/{PurePosixPath(value).name}",
                    )


class BinaryMissing(Rule):
    """The runtime's `BinaryName` or `runtime_path` does not exist or is not executable.

    ## What it does
    Checks, under `--root`, that each absolute `options.BinaryName` and `runtime_path` is an
    executable file. A warning: an air-gapped node may be configured before the NVIDIA
    Container Toolkit is installed.

    ## Why is this bad?
    Pods using the runtime fail at creation with `exec: "/usr/bin/nvidia-container-runtime":
    no such file or directory`.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/local/bin/nvidia-container-runtime"   # not installed there
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Install the NVIDIA Container Toolkit, or point `BinaryName` at where it is installed.
    """

    name = "binary-missing"
    severity = Severity.WARNING
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        node = ctx.options.node
        for name, entry in ctx.runtimes().items():
            for key, value in _binary_keys(entry):
                if not PurePosixPath(value).is_absolute():
                    continue  # binary-path-relative reports it
                local = node.path(value)
                if node.is_executable(local):
                    continue
                state = "is not executable" if node.is_file(local) else "does not exist"
                where = "" if node.is_host else f" under {node.root}"
                yield ctx.report(
                    self,
                    f"runtime {name!r}: {'.'.join(key)} {value} {state}{where}",
                    (*ctx.spec.runtime_path(name), *key),
                    fix="install the NVIDIA Container Toolkit, or set the path where it is",
                )


class CriDisabled(Rule):
    """`disabled_plugins` turns the CRI plugin off.

    ## What it does
    Reports `cri`, `io.containerd.grpc.v1.cri` or `io.containerd.cri.v1.runtime` in the
    top-level `disabled_plugins`.

    ## Why is this bad?
    Without the CRI plugin the kubelet cannot talk to containerd at all, and no runtime
    registration has any effect (nvidia-container-toolkit#1430). Docker's packaged
    `config.toml` ships with `disabled_plugins = ["cri"]`.

    ## Example
    ```toml
    disabled_plugins = ["cri"]
    ```

    ## Use instead
    ```toml
    disabled_plugins = []
    ```

    ## Fix
    Remove the CRI plugin from `disabled_plugins` and restart containerd.
    """

    name = "cri-disabled"
    severity = Severity.ERROR
    scope = Scope.CONFIG

    def check(self, ctx: ConfigContext) -> Iterator[Problem]:
        disabled = facts.disabled_cri_plugins(ctx.data)
        if disabled:
            yield ctx.report(
                self,
                f"disabled_plugins turns the CRI plugin off ({', '.join(disabled)}): the "
                "kubelet cannot use containerd and no runtime registration takes effect",
                ("disabled_plugins",),
                fix=f"remove {', '.join(repr(d) for d in disabled)} from disabled_plugins",
            )


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    RuntimeNotRegistered(),
    RuntimeTypeMissing(),
    RuntimeTypeDeprecated(),
    BinaryPathRelative(),
    BinaryMissing(),
    DefaultRuntimeChanged(),
    DefaultRuntimeMissing(),
    CriDisabled(),
)
