"""Rules for CRI-O's crio.conf and its drop-ins, from CRI-O's documented configuration.

The facts (keys of a runtime handler, runtime types, table paths) come from
:mod:`gpuready.engines.crio.facts`. No CRI-O runs where gpuready is tested: these rules check
files against the documentation, not against a daemon.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuready.compat import tomllib
from gpuready.containerd.document import toml_error
from gpuready.engines.crio import facts
from gpuready.engines.crio.config import lookup, merge, runtimes
from gpuready.errors import InputError
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import Options
from gpuready.rules.locate import Locator
from gpuready.textfile import without_bom


class CrioFileContext:
    """One CRI-O TOML file: data (or the syntax error) and a locator for positions."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.display = str(path)
        self.text = without_bom(text)
        self.error: InputError | None = None
        self.data: dict[str, Any] = {}
        try:
            self.data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as error:
            self.error = toml_error(str(error), self.text, path)
        self._locator: Locator | None = None

    def position(self, key_path: tuple[str, ...]) -> tuple[int, int] | None:
        """Where ``key_path`` is written."""
        if self._locator is None:
            self._locator = Locator(self.text)
        return self._locator.locate(key_path)


class CrioContext:
    """crio.conf and its drop-ins (in the order CRI-O reads them), and their merged config."""

    def __init__(self, files: list[CrioFileContext], *, options: Options) -> None:
        self.files = files
        self.options = options
        self.merged = merge([_as_file(f) for f in files if f.error is None])

    def origin(self, key_path: tuple[str, ...]) -> CrioFileContext:
        """The last file that sets ``key_path`` (its value wins), else the last file."""
        for file in reversed(self.files):
            if lookup(file.data, key_path) is not None:
                return file
        return self.files[-1]

    def report(self, rule: Rule, message: str, key_path: tuple[str, ...], *, fix: str,
               file: CrioFileContext | None = None) -> Problem:
        """A problem at ``key_path``, in ``file`` or the file whose value wins."""
        where_file = file or self.origin(key_path)
        where = where_file.position(key_path) if key_path else None
        return Problem(rule=rule.name, severity=rule.severity, message=message,
                       file=where_file.display, key_path=".".join(key_path),
                       line=where[0] if where else None, column=where[1] if where else None,
                       fix=fix)


def _as_file(context: CrioFileContext):
    from gpuready.engines.crio.config import CrioFile

    return CrioFile(context.path, context.text, context.data)


def _handlers(ctx: CrioContext) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, entry in runtimes(ctx.merged).items():
        if isinstance(entry, dict):
            yield name, entry


class CrioTomlSyntax(Rule):
    """A CRI-O config file that is not valid TOML.

    ## What it does
    Parses crio.conf and every drop-in and reports the first syntax error with line and column.

    ## Why is this bad?
    CRI-O does not start with a config file it cannot parse; no pod on the node starts.

    ## Example
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = /usr/bin/nvidia-container-runtime
    ```

    ## Use instead
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Correct the syntax at the reported position.
    """

    name = "crio-toml-syntax"
    severity = Severity.ERROR
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        for file in ctx.files:
            if file.error is not None:
                yield Problem(rule=self.name, severity=self.severity,
                              message=file.error.reason, file=file.display,
                              line=file.error.line, column=file.error.column,
                              fix="correct the syntax; CRI-O will not start with this file")


class CrioRuntimeWrongTable(Rule):
    """A runtime table written outside `[crio.runtime.runtimes]`.

    ## What it does
    Finds tables with a `runtime_path` anywhere but directly under `crio.runtime.runtimes`
    (`[crio.runtimes.nvidia]`, `[runtimes.nvidia]`, …).

    ## Why is this bad?
    CRI-O reads runtime handlers only from `[crio.runtime.runtimes.NAME]`: the handler is never
    registered and pods with its RuntimeClass fail.

    ## Example
    ```toml
    [crio.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Move the table under `crio.runtime.runtimes`.
    """

    name = "crio-runtime-wrong-table"
    severity = Severity.ERROR
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        for file in ctx.files:
            for key_path in _tables_with(file.data, "runtime_path", ()):
                if key_path[:-1] != facts.RUNTIMES_PATH:
                    yield ctx.report(self, f"[{'.'.join(key_path)}] is not read by CRI-O: "
                                     "runtime handlers live in [crio.runtime.runtimes.NAME]",
                                     key_path, file=file,
                                     fix=f"rename it [crio.runtime.runtimes.{key_path[-1]}]")


def _tables_with(data: dict[str, Any], key: str, prefix: tuple[str, ...]):
    for name, value in data.items():
        if isinstance(value, dict):
            if key in value:
                yield (*prefix, name)
            if len(prefix) < 8:
                yield from _tables_with(value, key, (*prefix, name))


class CrioRuntimeUnknownKey(Rule):
    """A key in a runtime handler table that CRI-O does not document.

    ## What it does
    Compares each key of `[crio.runtime.runtimes.NAME]` with the keys crio.conf(5) and CRI-O's
    config template document.

    ## Why is this bad?
    A misspelt key (`runtime_paths`, `monitor`) is not the setting it looks like: CRI-O uses the
    default instead.

    ## Example
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Correct the key's spelling.
    """

    name = "crio-runtime-unknown-key"
    severity = Severity.WARNING
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        for name, entry in _handlers(ctx):
            for key in entry:
                if key not in facts.RUNTIME_KEYS:
                    path = (*facts.RUNTIMES_PATH, name, key)
                    yield ctx.report(self, f"runtime {name!r}: {key!r} is not a CRI-O runtime "
                                     "handler key", path, fix="correct the key (see "
                                     "crio.conf(5), CRIO.RUNTIME.RUNTIMES TABLE)")


class CrioRuntimeTypeInvalid(Rule):
    """A `runtime_type` other than `oci`, `vm` or `pod`.

    ## What it does
    Checks `runtime_type` of every runtime handler.

    ## Why is this bad?
    CRI-O refuses to start with a runtime type it does not know. `io.containerd.runc.v2`
    (containerd's) is a common paste.

    ## Example
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
    ```

    ## Use instead
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_type = "oci"
    ```

    ## Fix
    Write `runtime_type = "oci"` for the NVIDIA runtime.
    """

    name = "crio-runtime-type-invalid"
    severity = Severity.ERROR
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        for name, entry in _handlers(ctx):
            value = entry.get("runtime_type")
            if value is not None and value not in facts.RUNTIME_TYPES:
                yield ctx.report(self, f"runtime {name!r}: runtime_type {value!r} is not one of "
                                 f"{', '.join(facts.RUNTIME_TYPES)}",
                                 (*facts.RUNTIMES_PATH, name, "runtime_type"),
                                 fix='runtime_type = "oci"')


class CrioRuntimePathInvalid(Rule):
    """A `runtime_path` that is not an absolute path to an executable.

    ## What it does
    Checks `runtime_path` of every handler: it must be absolute, and (under `--root`) exist.

    ## Why is this bad?
    CRI-O checks every handler's `runtime_path` when it starts and refuses to start when one is
    missing ("invalid runtime_path"): the whole node stops, not only GPU pods.

    ## Example
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Write the absolute path of the installed runtime, or install the one named: the NVIDIA
    Container Toolkit provides `nvidia-container-runtime`; `crun` and `runc` are packages of
    their own (`apt-get install crun`, `dnf install crun`).
    """

    name = "crio-runtime-path-invalid"
    severity = Severity.ERROR
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        node = ctx.options.node
        for name, entry in _handlers(ctx):
            value = entry.get("runtime_path")
            key_path = (*facts.RUNTIMES_PATH, name, "runtime_path")
            if not isinstance(value, str) or not value:
                continue
            if not value.startswith("/"):
                yield ctx.report(self, f"runtime {name!r}: runtime_path {value!r} is not "
                                 "absolute", key_path, fix="write the absolute path")
                continue
            host = node.path(value)
            if not node.is_executable(host):
                yield ctx.report(self, f"runtime {name!r}: {host} does not exist or is not "
                                 "executable: CRI-O will not start", key_path,
                                 fix=install_fix(value))


# The OCI runtimes that are packages of their own (same name on Debian, Ubuntu, RHEL, Fedora).
OWN_PACKAGES = ("crun", "runc")
NVIDIA_RUNTIME = "nvidia-container-runtime"  # and its .cdi and .legacy modes


def install_fix(runtime_path: str) -> str:
    """How to get the binary ``runtime_path`` names: the NVIDIA Container Toolkit only for the
    NVIDIA runtime; crun and runc from their own packages; any other from what provides it."""
    binary = runtime_path.rsplit("/", 1)[-1]
    where = f"or set runtime_path to where {binary} is installed"
    if binary == NVIDIA_RUNTIME or binary.startswith(NVIDIA_RUNTIME + "."):
        return f"install the NVIDIA Container Toolkit, which provides {binary}, {where}"
    if binary in OWN_PACKAGES:
        return (f"install {binary}, a package of its own (apt-get install {binary}, or "
                f"dnf install {binary}), {where}")
    return f"install {binary} (the runtime this handler runs), {where}"


class CrioRuntimeNotRegistered(Rule):
    """The GPU runtime is not a CRI-O runtime handler.

    ## What it does
    Looks for `[crio.runtime.runtimes.NAME]` (NAME from `--runtime-name`) in crio.conf and its
    drop-ins merged.

    ## Why is this bad?
    Pods whose RuntimeClass has that handler fail to start.

    ## Example
    ```toml
    [crio.runtime]
    default_runtime = "crun"
    ```

    ## Use instead
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    runtime_type = "oci"
    ```

    ## Fix
    `gpuready configure --engine crio` writes the drop-in.
    """

    name = "crio-runtime-not-registered"
    severity = Severity.ERROR
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        name = ctx.options.runtime_name
        if any(f.error for f in ctx.files) or name in dict(_handlers(ctx)):
            return
        yield ctx.report(self, f"runtime {name!r} is not registered: no "
                         f"[crio.runtime.runtimes.{name}] table", (),
                         fix=f"gpuready configure --engine crio --runtime-name {name}")


class CrioDefaultRuntimeMissing(Rule):
    """`default_runtime` names a runtime handler that no file defines.

    ## What it does
    Compares `crio.runtime.default_runtime` with the handlers of crio.conf and its drop-ins.

    ## Why is this bad?
    CRI-O refuses to start when the default runtime has no table.

    ## Example
    ```toml
    [crio.runtime]
    default_runtime = "nvidia"
    ```

    ## Use instead
    ```toml
    [crio.runtime]
    default_runtime = "crun"
    ```

    ## Fix
    Name a defined handler, or define the one named.
    """

    name = "crio-default-runtime-missing"
    severity = Severity.ERROR
    scope = Scope.CRIO

    def check(self, ctx: CrioContext) -> Iterator[Problem]:
        default = lookup(ctx.merged, facts.DEFAULT_RUNTIME_PATH)
        if not isinstance(default, str) or any(f.error for f in ctx.files):
            return
        if default not in dict(_handlers(ctx)):
            yield ctx.report(self, f"default_runtime {default!r} has no "
                             f"[crio.runtime.runtimes.{default}] table",
                             facts.DEFAULT_RUNTIME_PATH,
                             fix=f"add [crio.runtime.runtimes.{default}] or name a defined one")


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    CrioTomlSyntax(),
    CrioRuntimeWrongTable(),
    CrioRuntimeNotRegistered(),
    CrioRuntimeUnknownKey(),
    CrioRuntimeTypeInvalid(),
    CrioRuntimePathInvalid(),
    CrioDefaultRuntimeMissing(),
)
