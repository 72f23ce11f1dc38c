"""Rules for Docker's daemon.json: what dockerd refuses, and what it silently ignores.

Every fact (keys, reserved names, versions) comes from :mod:`gpuready.engines.docker.facts`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuready.engines.docker import jsontext
from gpuready.engines.docker.facts import (
    KEYS_REMOVED,
    RESERVED_RUNTIMES,
    RUNTIME_KEYS,
    known_key,
    render_release,
    supports_cdi,
)
from gpuready.errors import InputError
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import Options


class DockerFileContext:
    """One daemon.json: its data and where each key is written, or its syntax error."""

    def __init__(self, path: Path, text: str, *, options: Options,
                 release: tuple[int, int] | None) -> None:
        from gpuready.engines.docker.config import parse_daemon_config

        self.path = path
        self.display = str(path)
        self.options = options
        self.release = release
        self.error: InputError | None = None
        self.data: dict[str, Any] = {}
        self.body = ""
        self.spans: jsontext.Node | None = None
        try:
            config = parse_daemon_config(text, path)
        except InputError as error:
            self.error = error
        else:
            self.data, self.body, self.spans = config.data, config.body, config.spans

    def runtimes(self) -> dict[str, Any]:
        """The ``runtimes`` object (empty when absent or not an object)."""
        value = self.data.get("runtimes")
        return value if isinstance(value, dict) else {}

    def report(self, rule: Rule, message: str, key_path: tuple[str, ...] = (), *,
               fix: str = "", value: bool = False) -> Problem:
        """A problem at ``key_path`` (its key, or with ``value`` its value)."""
        found = jsontext.find(self.spans, key_path) if self.spans and key_path else None
        where = None
        if found is not None:
            where = jsontext.position(self.body, found.value.start if value else found.key_start)
        elif self.spans is not None:  # about the file as a whole: its opening brace
            where = jsontext.position(self.body, self.spans.start)
        return Problem(rule=rule.name, severity=rule.severity, message=message,
                       file=self.display, key_path=".".join(key_path),
                       line=where[0] if where else None, column=where[1] if where else None,
                       fix=fix)


class DockerJsonSyntax(Rule):
    """daemon.json is not valid JSON (or not a JSON object).

    ## What it does
    Parses daemon.json as dockerd does and reports the first error with its line and column.

    ## Why is this bad?
    dockerd refuses to start with a daemon.json it cannot parse, and a reload (SIGHUP) with one is
    only logged: every container on the machine depends on this file.

    ## Example
    ```json
    {
      "runtimes": {"nvidia": {"path": "nvidia-container-runtime",}}
    }
    ```

    ## Use instead
    ```json
    {
      "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}
    }
    ```

    ## Fix
    Edit the file at the reported position: JSON has no trailing commas and no comments.
    """

    name = "docker-json-syntax"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        if ctx.error is None:
            return
        yield Problem(rule=self.name, severity=self.severity, message=ctx.error.reason,
                      file=ctx.display, line=ctx.error.line, column=ctx.error.column,
                      fix="correct the JSON at this position; dockerd will not start with it")


class DockerUnknownKey(Rule):
    """A top-level key in daemon.json that the installed dockerd does not know.

    ## What it does
    Compares every top-level key with the keys dockerd accepts (Docker 20.10's, measured, plus
    the keys later releases added or removed, each with its release).

    ## Why is this bad?
    dockerd refuses the whole file when one key is unknown ("the following directives don't
    match any configuration option"): it does not start, or a reload keeps the old settings.

    ## Example
    ```json
    {"default-runtimes": "nvidia"}
    ```

    ## Use instead
    ```json
    {"default-runtime": "nvidia"}
    ```

    ## Fix
    Correct the key's spelling, or remove it; a key from a newer Docker needs that Docker.
    """

    name = "docker-unknown-key"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        for key in ctx.data:
            if known_key(key, ctx.release):
                continue
            removed = KEYS_REMOVED.get(key)
            if removed is not None and known_key(key, None):
                reason = (f"dockerd {render_release(ctx.release)} does not know {key!r} (removed "
                          f"in {render_release(removed)})")
            elif known_key(key, None):
                reason = (f"dockerd {render_release(ctx.release)} does not know {key!r} (a later "
                          "Docker added it)")
            else:
                reason = f"{key!r} is not a daemon.json key"
            yield ctx.report(self, f"{reason}: dockerd refuses the whole file", (key,),
                             fix=f"remove {key!r} or correct its spelling")


class DockerRuntimeUnknownKey(Rule):
    """A key in a `runtimes` entry that dockerd does not read (`args` instead of `runtimeArgs`).

    ## What it does
    Reports keys of a runtime entry other than `path` and `runtimeArgs` (and, from Docker 23,
    `runtimeType` and `options`).

    ## Why is this bad?
    dockerd ignores unknown keys in a runtime entry without a word: arguments written as `args`
    never reach the runtime.

    ## Example
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}}
    ```

    ## Use instead
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}}}
    ```

    ## Fix
    Rename the key to the one dockerd reads, or remove it.
    """

    name = "docker-runtime-unknown-key"
    severity = Severity.WARNING
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        for name, entry in ctx.runtimes().items():
            if not isinstance(entry, dict):
                continue
            for key in entry:
                since = RUNTIME_KEYS.get(key)
                if since is not None and (ctx.release is None or ctx.release >= since):
                    continue
                hint = " (write runtimeArgs)" if key == "args" else ""
                yield ctx.report(self, f"runtime {name!r}: dockerd ignores {key!r}{hint}",
                                 ("runtimes", name, key),
                                 fix=f"keys of a runtime: {', '.join(sorted(RUNTIME_KEYS))}")


class DockerWrongType(Rule):
    """A daemon.json value of the wrong JSON type (`runtimes` not an object, `path` not a string).

    ## What it does
    Checks the types of `runtimes`, each runtime entry, its `path` and `runtimeArgs`,
    `default-runtime` and `features`.

    ## Why is this bad?
    dockerd refuses a file whose values do not decode into its settings ("cannot unmarshal").

    ## Example
    ```json
    {"runtimes": {"nvidia": "/usr/bin/nvidia-container-runtime"}}
    ```

    ## Use instead
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}
    ```

    ## Fix
    Write the value with the type shown in the message.
    """

    name = "docker-wrong-type"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        expected = [(("runtimes",), dict), (("default-runtime",), str), (("features",), dict)]
        for name, entry in ctx.runtimes().items():
            expected.append((("runtimes", name), dict))
            if isinstance(entry, dict):
                expected += [(("runtimes", name, "path"), str),
                             (("runtimes", name, "runtimeArgs"), list)]
        for key_path, kind in expected:
            value = _lookup(ctx.data, key_path)
            if value is not None and not isinstance(value, kind):
                words = {dict: "an object", str: "a string", list: "a list"}
                yield ctx.report(self, f"{'.'.join(key_path)} must be {words[kind]}, not "
                                 f"{type(value).__name__}: dockerd refuses the file",
                                 key_path, value=True, fix=f"write {words[kind]}")


class DockerRuntimePathRelative(Rule):
    """A runtime `path` with a slash that is not absolute.

    ## What it does
    Reports a runtime whose `path` contains `/` but does not start with one. A bare name
    (`nvidia-container-runtime`) is fine: dockerd looks it up in its PATH.

    ## Why is this bad?
    dockerd accepts the file and reloads it, but the path is resolved against whatever folder
    the runtime is started from: containers with `--runtime` fail to start.

    ## Example
    ```json
    {"runtimes": {"nvidia": {"path": "bin/nvidia-container-runtime"}}}
    ```

    ## Use instead
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}
    ```

    ## Fix
    Write the absolute path, or the bare executable name.
    """

    name = "docker-runtime-path-relative"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        for name, entry in ctx.runtimes().items():
            path = entry.get("path") if isinstance(entry, dict) else None
            if isinstance(path, str) and "/" in path and not path.startswith("/"):
                yield ctx.report(self, f"runtime {name!r}: path {path!r} is relative",
                                 ("runtimes", name, "path"), value=True,
                                 fix=f"write /{path.lstrip('./')} or the bare executable name")


class DockerRuntimeMissing(Rule):
    """A runtime `path` (absolute) that does not exist or is not executable.

    ## What it does
    Checks each absolute runtime `path` under `--root`.

    ## Why is this bad?
    dockerd loads the runtime anyway; every container started with it fails.

    ## Example
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/local/bin/nvidia-container-runtime"}}}
    ```

    ## Use instead
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}
    ```

    ## Fix
    Install the NVIDIA Container Toolkit, or write the path where it is.
    """

    name = "docker-runtime-missing"
    severity = Severity.WARNING
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        node = ctx.options.node
        for name, entry in ctx.runtimes().items():
            path = entry.get("path") if isinstance(entry, dict) else None
            if not (isinstance(path, str) and path.startswith("/")):
                continue
            host = node.path(path)
            if not node.is_executable(host):
                yield ctx.report(self, f"runtime {name!r}: {host} does not exist or is not "
                                 "executable", ("runtimes", name, "path"), value=True,
                                 fix="install the NVIDIA Container Toolkit, or set the path "
                                 "where it is")


class DockerRuntimeReserved(Rule):
    """A runtime named `runc` in daemon.json.

    ## What it does
    Reports a `runtimes` entry called `runc`, the name of dockerd's built-in runtime.

    ## Why is this bad?
    dockerd refuses the whole file ("runtime name 'runc' is reserved"): at start it does not
    come up; on reload it logs the error and keeps its old runtimes.

    ## Example
    ```json
    {"runtimes": {"runc": {"path": "/usr/bin/nvidia-container-runtime"}}}
    ```

    ## Use instead
    ```json
    {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}
    ```

    ## Fix
    Give the runtime its own name and start GPU containers with `--runtime NAME`.
    """

    name = "docker-runtime-reserved"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        for name in ctx.runtimes():
            if name in RESERVED_RUNTIMES:
                yield ctx.report(self, f"runtime name {name!r} is reserved: dockerd refuses "
                                 "the whole file", ("runtimes", name),
                                 fix="rename the runtime (for example nvidia)")


class DockerDefaultRuntimeMissing(Rule):
    """`default-runtime` names a runtime that is not registered.

    ## What it does
    Compares `default-runtime` with `runc` and the names under `runtimes`.

    ## Why is this bad?
    dockerd refuses the file ("specified default runtime ... does not exist").

    ## Example
    ```json
    {"default-runtime": "nvidia"}
    ```

    ## Use instead
    ```json
    {"default-runtime": "nvidia",
     "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}
    ```

    ## Fix
    Register the runtime (`gpuready configure --engine docker`), or remove `default-runtime`.
    """

    name = "docker-default-runtime-missing"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        default = ctx.data.get("default-runtime")
        if not isinstance(default, str) or default in RESERVED_RUNTIMES:
            return
        if default not in ctx.runtimes():
            yield ctx.report(self, f"default-runtime {default!r} names no registered runtime: "
                             "dockerd refuses the file", ("default-runtime",), value=True,
                             fix=f"register {default} under runtimes, or remove default-runtime")


class DockerDefaultRuntimeChanged(Rule):
    """`default-runtime` is the GPU runtime: every container uses it.

    ## What it does
    Reports a `default-runtime` equal to the GPU runtime's name.

    ## Why is this bad?
    Every container on the machine, GPU or not, then runs through the NVIDIA runtime, and one
    problem in it (a driver upgrade, a missing library) stops them all.

    ## Example
    ```json
    {"default-runtime": "nvidia"}
    ```

    ## Use instead
    ```json
    {}
    ```
    and `docker run --runtime nvidia` (or `--gpus`) for GPU containers.

    ## Fix
    Remove `default-runtime` unless every container really needs the GPU runtime.
    """

    name = "docker-default-runtime-changed"
    severity = Severity.WARNING
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        default = ctx.data.get("default-runtime")
        if default == ctx.options.runtime_name:
            yield ctx.report(self, f"default-runtime is {default!r}: every container uses it",
                             ("default-runtime",), value=True,
                             fix="remove default-runtime; start GPU containers with --runtime")


class DockerRuntimeNotRegistered(Rule):
    """The GPU runtime is not under `runtimes`.

    ## What it does
    Looks for the runtime named by `--runtime-name` (default `nvidia`) under `runtimes`.

    ## Why is this bad?
    `docker run --runtime nvidia` fails with "unknown or invalid runtime name".

    ## Example
    ```json
    {"log-driver": "json-file"}
    ```

    ## Use instead
    ```json
    {"log-driver": "json-file",
     "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}}}
    ```

    ## Fix
    `gpuready configure --engine docker`, then reload dockerd.
    """

    name = "docker-runtime-not-registered"
    severity = Severity.ERROR
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        name = ctx.options.runtime_name
        if ctx.error is None and name not in ctx.runtimes():
            yield ctx.report(self, f"runtime {name!r} is not registered under runtimes",
                             ("runtimes",) if "runtimes" in ctx.data else (),
                             fix=f"gpuready configure --engine docker --runtime-name {name}")


class DockerCdiIgnored(Rule):
    """`features.cdi` set for a Docker that does not read it (before 25.0).

    ## What it does
    Reports `"features": {"cdi": true}` when the installed dockerd (or `--docker-version`) is
    older than 25.0.

    ## Why is this bad?
    Docker before 25.0 accepts the key and ignores it: `--device nvidia.com/gpu=all` then fails.

    ## Example
    ```json
    {"features": {"cdi": true}}
    ```

    ## Use instead
    Docker 25.0 or later, or `--runtime nvidia` with the NVIDIA runtime on older releases.

    ## Fix
    Upgrade Docker, or use the runtime instead of CDI devices.
    """

    name = "docker-cdi-ignored"
    severity = Severity.WARNING
    scope = Scope.DOCKER

    def check(self, ctx: DockerFileContext) -> Iterator[Problem]:
        features = ctx.data.get("features")
        if not (isinstance(features, dict) and features.get("cdi") is True):
            return
        if supports_cdi(ctx.release) is False:
            yield ctx.report(self, f"dockerd {render_release(ctx.release)} ignores features.cdi "
                             "(CDI needs Docker 25.0 or later)", ("features", "cdi"),
                             fix="upgrade Docker to 25.0 or later")


def _lookup(data: dict[str, Any], key_path: tuple[str, ...]) -> Any:
    value: Any = data
    for key in key_path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    DockerJsonSyntax(),
    DockerUnknownKey(),
    DockerWrongType(),
    DockerRuntimeNotRegistered(),
    DockerRuntimeUnknownKey(),
    DockerRuntimeReserved(),
    DockerRuntimePathRelative(),
    DockerRuntimeMissing(),
    DockerDefaultRuntimeMissing(),
    DockerDefaultRuntimeChanged(),
    DockerCdiIgnored(),
)
