"""Rules about the file as a whole: syntax, version, and where its tables are written."""

from __future__ import annotations

from collections.abc import Iterator

from gpuready.containerd.facts import lookup as facts_lookup
from gpuready.containerd.versions import NEWEST, VERSIONS, render_key_path
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import FileContext
from gpuready.rules.placement import (
    has_fully_qualified_plugins,
    misplaced,
    plugins,
    unquoted_plugin_id,
)


class TomlSyntax(Rule):
    """The file is not valid TOML.

    ## What it does
    Parses the file as TOML and reports the first syntax error with its line and column.

    ## Why is this bad?
    containerd refuses to start with a config it cannot parse ("failed to load TOML"), so every
    container on the node stops with it, not only the GPU ones.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = io.containerd.runc.v2
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Fix
    Edit the file at the reported position; strings need quotes, booleans do not.
    """

    name = "toml-syntax"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        error = ctx.syntax_error
        if error is None:
            return
        reason = error.reason.removeprefix("invalid TOML: ")
        position = (error.line, error.column) if error.line else None
        yield ctx.report(
            self,
            f"not valid TOML: {reason}",
            position=position,
            fix="correct the syntax at this position; containerd will not start with this file",
        )


class VersionMissing(Rule):
    """The file has no `version` key, so containerd reads it as version 1.

    ## What it does
    Reports a config without a top-level `version`. With fully qualified plugin sections
    (`[plugins."io.containerd.grpc.v1.cri"…]`) that is an error: a version 1 file ignores them
    without a word (containerd#5236). Without them the file is a genuine, deprecated version 1
    file (reported as info).

    ## Why is this bad?
    A runtime registered under `plugins."io.containerd.grpc.v1.cri"` in a file without
    `version = 2` is never seen; pods with the RuntimeClass fail with
    `no runtime for "nvidia" is configured`.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Use instead
    ```toml
    version = 2

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Fix
    Add `version = 2` as the first line (`version = 3` for containerd 2.x files that use
    `io.containerd.cri.v1.runtime`).
    """

    name = "version-missing"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or ctx.has_version:
            return
        qualified = has_fully_qualified_plugins(ctx.data)
        if qualified:
            wanted = 3 if any(p.startswith("io.containerd.cri.v1.") for p in qualified) else 2
            shown = render_key_path(("plugins", qualified[0]))
            yield ctx.report(
                self,
                f"no 'version' key: containerd reads this file as version 1 and ignores "
                f"[{shown}] and every other fully qualified plugin section",
                ("plugins", qualified[0]),
                fix=f"add 'version = {wanted}' as the first line",
            )
            return
        yield ctx.report(
            self,
            "no 'version' key: this is a version 1 file, deprecated (containerd 2.x converts it "
            "at every start)",
            position=(1, 1),
            severity=Severity.INFO,
            fix="add 'version = 2' and move the sections to their version 2 names "
            "(containerd config migrate on 2.x does this)",
        )


class VersionUnsupported(Rule):
    """The config `version` is one this containerd cannot load.

    ## What it does
    Reports a `version` that is not an integer, is below 1 or above 4, or is above the highest
    version the installed containerd loads (1.x: 2; 2.0–2.2: 3; 2.3: 4) when that is known.

    ## Why is this bad?
    containerd 2.x refuses to start on a version above the one it reads. containerd 1.x starts
    and silently leaves every plugin table of a version 3 or 4 file unread (Debian's 1.6.20
    `config dump` exits 0 and drops them): the GPU runtime registered there never loads. A
    config copied from a newer node (`containerd config dump` on 2.3 prints `version = 4`)
    takes the old node down either way.

    ## Example
    ```toml
    version = "2"
    ```

    ## Use instead
    ```toml
    version = 2
    ```

    ## Fix
    Write the version as an integer that matches the section names in the file and the
    containerd on the node; to go back from 3 to 2, rename `io.containerd.cri.v1.runtime` to
    `io.containerd.grpc.v1.cri`.
    """

    name = "version-unsupported"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or not ctx.has_version:
            return
        value = ctx.data["version"]
        if isinstance(value, bool) or not isinstance(value, int):
            yield ctx.report(
                self,
                f"'version' must be an integer, not {type(value).__name__} {value!r}",
                ("version",),
                fix=f"write version = {_integer_hint(value)} (no quotes)",
            )
            return
        if value not in VERSIONS:
            yield ctx.report(
                self,
                f"config version {value} does not exist (containerd knows 1 to {NEWEST})",
                ("version",),
                fix="write the version the section names belong to (2 for "
                "io.containerd.grpc.v1.cri, 3 for io.containerd.cri.v1.runtime)",
            )
            return
        semantics = ctx.semantics
        maximum = semantics.max_config_version if semantics else None
        if maximum is not None and value > maximum:
            # 2.x refuses to start; 1.x starts and leaves the plugin tables under names it does
            # not know unread (recorded on 1.6.20: `config dump` exits 0 and drops them)
            outcome = (f"it refuses to start with version {value}" if semantics.major == 2
                       else f"it starts on version {value} but reads none of its plugin tables "
                       "(no runtime registered there is loaded)")
            yield ctx.report(
                self,
                f"{semantics.label} loads config versions up to {maximum}; {outcome}",
                ("version",),
                fix=f"write a version {maximum} config (runtimes under "
                f"{render_key_path(VERSIONS[maximum].runtimes_path)}), or upgrade containerd",
            )


def _integer_hint(value: object) -> str:
    text = str(value).strip().strip("\"'")
    return text if text.isdigit() else "2"


class UnquotedPluginKey(Rule):
    """A dotted plugin ID written without quotes in a table header.

    ## What it does
    Finds headers such as `[plugins.io.containerd.grpc.v1.cri.containerd]`. TOML splits an
    unquoted key at every dot, so this defines tables `plugins` → `io` → `containerd` → `grpc`
    → … and never the plugin `io.containerd.grpc.v1.cri`.

    ## Why is this bad?
    containerd 1.x with `version = 2` refuses to start ("invalid plugin key URI \"io\" expect
    io.containerd.x.vx"); other versions ignore the table, so the runtime is never registered.
    This is the most common copy-and-paste mistake.

    ## Example
    ```toml
    [plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia]
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
    ```

    ## Fix
    Quote the plugin ID. `gpuready lint --fix` rewrites the header.
    """

    name = "unquoted-plugin-key"
    severity = Severity.ERROR
    scope = Scope.FILE
    fixable = True

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None or "io" not in plugins(ctx.data):
            return
        headers = [h for h in ctx.locator.headers if unquoted_plugin_id(h.path)]
        for header in headers:
            plugin, span = unquoted_plugin_id(header.path)
            meant = ("plugins", plugin, *header.path[span + 1 :])
            yield ctx.report(
                self,
                f"plugin ID {plugin} is not quoted: TOML reads "
                f"[{'.'.join(header.path)}] as nested tables, and containerd never sees "
                f"plugin {plugin!r}",
                header.path,
                position=(header.line, header.column),
                fix=f"write [{render_key_path(meant)}] (gpuready lint --fix)",
            )
        if not headers:
            yield ctx.report(
                self,
                "a plugin ID is written without quotes: 'plugins.io' is read as nested tables",
                ("plugins", "io"),
                fix='quote the plugin ID: plugins."io.containerd.grpc.v1.cri"',
            )


class WrongVersionPath(Rule):
    """A runtime or CRI setting written at another config version's table.

    ## What it does
    Compares where runtimes and CRI settings are written with where this file's `version`
    reads them: version 2 reads `plugins."io.containerd.grpc.v1.cri"`, versions 3 and 4 read
    `plugins."io.containerd.cri.v1.runtime"` (and keep only the streaming settings under
    `io.containerd.grpc.v1.cri`), version 1 reads `plugins.cri`.

    ## Why is this bad?
    The table is accepted and has no effect: a snippet for containerd 2.x pasted into a
    version 2 file registers nothing, and pods fail with `no runtime for "nvidia" is
    configured` (gpu-operator#413).

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Use instead
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Fix
    Move the table to this version's path. `gpuready lint --fix` moves runtimes; other
    settings need a person to decide where they belong.
    """

    name = "wrong-version-path"
    severity = Severity.ERROR
    scope = Scope.FILE
    fixable = True

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        spec = ctx.spec
        # Without a version key, version-missing explains the whole file.
        if ctx.data is None or spec is None or not ctx.has_version:
            return
        for found in misplaced(ctx.data, spec):
            here = render_key_path(found.path)
            if found.runtime is not None:
                target = render_key_path(spec.runtime_path(found.runtime))
                yield ctx.report(
                    self,
                    f"runtime {found.runtime!r} is at [{here}], which a version "
                    f"{spec.number} file does not read: it is not registered",
                    found.path,
                    fix=f"move it to [{target}] (gpuready lint --fix)",
                )
            else:
                keys = ", ".join(found.keys[:4]) + (", …" if len(found.keys) > 4 else "")
                yield ctx.report(
                    self,
                    f"settings under [{here}] ({keys}) have no effect in a version "
                    f"{spec.number} file",
                    found.path,
                    fix=f"move them under [{render_key_path(spec.cri_path)}] or the table "
                    f"version {spec.number} uses for them",
                )


# Where containerd decodes a table or a list of strings: any other type there makes it refuse
# the whole file when it loads it ("cannot decode ... into ..."), so no container starts.
TOP_LEVEL_SHAPES: tuple[tuple[str, str], ...] = (
    ("plugins", "table"),
    ("imports", "list"),
    ("disabled_plugins", "list"),
    ("required_plugins", "list"),
)


def wrong_shapes(data: dict, spec) -> Iterator[tuple[tuple[str, ...], str, object]]:
    """(key path, expected shape, value) for every value containerd cannot decode as expected."""
    for key, shape in TOP_LEVEL_SHAPES:
        if key in data and not _has_shape(data[key], shape):
            yield (key,), shape, data[key]
    if spec is None or not isinstance(data.get("plugins"), dict):
        return
    for path in (spec.cri_path, spec.containerd_path, spec.runtimes_path):
        value = facts_lookup(data, path)
        if value is not None and not isinstance(value, dict):
            yield path, "table", value
            return
    runtimes = facts_lookup(data, spec.runtimes_path) or {}
    for name, entry in runtimes.items():
        if not isinstance(entry, dict):
            yield spec.runtime_path(name), "table", entry
        elif "options" in entry and not isinstance(entry["options"], dict):
            yield spec.options_path(name), "table", entry["options"]


def _has_shape(value: object, shape: str) -> bool:
    if shape == "table":
        return isinstance(value, dict)
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


SHAPE_WORDS = {"table": "a table", "list": "a list of strings"}


class WrongShape(Rule):
    """A table or list that holds another type (`plugins = 5`, `disabled_plugins = "cri"`).

    ## What it does
    Reports `plugins`, the CRI plugin's tables, the runtimes table, a runtime or its `options`
    that is not a table, and `imports`, `disabled_plugins` or `required_plugins` that is not a
    list of strings.

    ## Why is this bad?
    The file is valid TOML, but containerd cannot decode it into its config and refuses to
    start, so every container on the node stops, not only the GPU ones.

    ## Example
    ```toml
    version = 2
    disabled_plugins = "cri"
    ```

    ## Use instead
    ```toml
    version = 2
    disabled_plugins = []
    ```

    ## Fix
    Write the value as the table or list containerd expects, or remove the key.
    """

    name = "wrong-shape"
    severity = Severity.ERROR
    scope = Scope.FILE

    def check(self, ctx: FileContext) -> Iterator[Problem]:
        if ctx.data is None:
            return
        for path, shape, value in wrong_shapes(ctx.data, ctx.spec):
            yield ctx.report(
                self,
                f"{render_key_path(path)} is {value!r}, not {SHAPE_WORDS[shape]}: containerd "
                "refuses the file",
                path,
                fix=f"write {render_key_path(path)} as {SHAPE_WORDS[shape]}, or remove it",
            )


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    TomlSyntax(),
    VersionMissing(),
    VersionUnsupported(),
    UnquotedPluginKey(),
    WrongVersionPath(),
    WrongShape(),
)
