"""Rules about the node around the config: imports, RuntimeClasses, CDI specs (doctor only)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from gpuready.containerd.versions import render_key_path
from gpuready.kubernetes.runtimeclass import DNS_LABEL_MAX, is_dns_label
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import NodeContext, RuntimeClassDocument, plain_problem

NVIDIA_KIND = "nvidia.com/gpu"
CDI_SUFFIXES = (".yaml", ".json")


class ImportOverridesCri(Rule):
    """(containerd 1.x) An imported file redefines the CRI plugin table and replaces it whole.

    ## What it does
    Under containerd 1.x semantics, reports an imported file that defines a CRI plugin table
    the main file (or an earlier import) also defines, when that drops settings of the earlier
    file; the message lists what is lost.

    ## Why is this bad?
    containerd 1.x merges imports one top-level plugin table at a time: the later table
    replaces the earlier one whole (containerd#5837). A drop-in that only adds
    `runtimes.nvidia` wipes `runtimes.runc`, `default_runtime_name` and the registry settings
    of the main file (gpu-operator#301).

    ## Example
    ```toml
    # /etc/containerd/conf.d/nvidia.toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Use instead
    ```toml
    # the drop-in carries the whole CRI table: runc, default_runtime_name, and nvidia
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Fix
    Register the runtime in the main file (`gpuready configure`), or copy the entire CRI
    table into the drop-in. containerd 2.x merges tables key by key and does not lose them.
    """

    name = "import-overrides-cri"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        for file, plugin, lost in ctx.replaced_tables:
            shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
            yield file.report(
                self,
                f"this file's [{render_key_path(('plugins', plugin))}] replaces the earlier "
                f"one whole under containerd 1.x, losing {shown}",
                ("plugins", plugin),
                fix="register the runtime in the main config, or copy the whole CRI table "
                "into this file",
            )


class ImportMissing(Rule):
    """An `imports` entry names a file that does not exist.

    ## What it does
    Resolves every `imports` entry (relative to the importing file's folder, absolute paths
    under `--root`) and reports plain paths that name no file. Glob patterns that match
    nothing are not reported: containerd accepts them.

    ## Why is this bad?
    containerd refuses to start when an imported file is missing ("failed to load TOML from
    …: no such file or directory").

    ## Example
    ```toml
    imports = ["/etc/containerd/conf.d/nvidia.toml"]   # file not written yet
    ```

    ## Use instead
    ```toml
    imports = ["/etc/containerd/conf.d/*.toml"]
    ```

    ## Fix
    Create the file, remove the entry, or import with a glob pattern.
    """

    name = "import-missing"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        for file, entry in ctx.missing_imports:
            yield file.report(
                self,
                f"imported file {entry} does not exist: containerd will not start",
                ("imports",),
                fix="create the file, remove it from imports, or use a glob pattern",
            )


class ImportVersionHigher(Rule):
    """An imported file has a higher config version than the main file.

    ## What it does
    Compares each imported file's `version` with the main config's.

    ## Why is this bad?
    containerd 2.3 refuses to start ("drop-in config version 4 higher than root config
    version 2"); 2.0–2.2 leave the older parts unmigrated (containerd#12891); 1.x cannot read
    version 3 at all.

    ## Example
    ```toml
    # config.toml has version = 2; conf.d/nvidia.toml:
    version = 3
    ```

    ## Use instead
    ```toml
    version = 2
    ```

    ## Fix
    Write the drop-in in the main file's version, or migrate the main file first
    (`containerd config migrate` on 2.x).
    """

    name = "import-version-higher"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if not ctx.files or ctx.files[0].version is None:
            return
        main = ctx.files[0].version
        for file in ctx.files[1:]:
            if file.version is not None and file.version > main:
                yield file.report(
                    self,
                    f"imported file has version {file.version}, higher than the main config's "
                    f"version {main}",
                    ("version",),
                    fix=f"write this file as version {main}",
                )


def _handler_position(document: RuntimeClassDocument, field: str) -> tuple[int, int]:
    """The line and column of ``field:`` in the document (its start when not found)."""
    lines = document.text.splitlines()
    pattern = re.compile(rf"^(\s*){re.escape(field)}\s*:")
    for number in range(document.line, len(lines) + 1):
        match = pattern.match(lines[number - 1])
        if match:
            return number, len(match.group(1)) + 1
    return document.line, 1


class HandlerMismatch(Rule):
    """A RuntimeClass handler names no runtime registered in the effective config.

    ## What it does
    Compares each RuntimeClass's `handler` with the runtimes containerd registers after
    merging the main config and its imports.

    ## Why is this bad?
    The handler must equal the runtime's name under `containerd.runtimes` exactly; otherwise
    the pod is scheduled and then fails with `RunContainerError: no runtime for "…" is
    configured`.

    ## Example
    ```yaml
    apiVersion: node.k8s.io/v1
    kind: RuntimeClass
    metadata:
      name: nvidia
    handler: nvidia-runtime
    ```

    ## Use instead
    ```yaml
    apiVersion: node.k8s.io/v1
    kind: RuntimeClass
    metadata:
      name: nvidia
    handler: nvidia
    ```

    ## Fix
    Set `handler` to the runtime's name, or register a runtime of that name.
    """

    name = "handler-mismatch"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if ctx.config is None:
            return
        registered = sorted(ctx.config.runtimes())
        for document in ctx.runtime_classes:
            handler = document.handler
            if not is_dns_label(handler) or handler in registered:
                continue
            line, column = _handler_position(document, "handler")
            yield plain_problem(
                self,
                f"RuntimeClass {document.name!r} has handler {handler!r}, but containerd "
                f"registers only {', '.join(registered) or 'no runtimes'}",
                file=document.file,
                line=line,
                column=column,
                key_path="handler",
                fix=f"set handler to one of: {', '.join(registered)}"
                if registered
                else "register the runtime in containerd's config",
            )


class HandlerInvalid(Rule):
    """A RuntimeClass `handler` or `metadata.name` that is not a lowercase DNS label.

    ## What it does
    Checks `metadata.name` and `handler` against RFC 1123 labels: lowercase letters, digits
    and `-`, starting and ending with a letter or digit, at most 63 characters.

    ## Why is this bad?
    The API server rejects the RuntimeClass, so no pod can use it; containerd runtime names
    such as `nvidia_gpu` can never be a handler.

    ## Example
    ```yaml
    metadata:
      name: NVIDIA
    handler: nvidia
    ```

    ## Use instead
    ```yaml
    metadata:
      name: nvidia
    handler: nvidia
    ```

    ## Fix
    Use a lowercase DNS label, and name the containerd runtime the same.
    """

    name = "handler-invalid"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        for document in ctx.runtime_classes:
            for field, value in (("metadata.name", document.name), ("handler", document.handler)):
                if is_dns_label(value):
                    continue
                line, column = _handler_position(document, field.rsplit(".", 1)[-1])
                yield plain_problem(
                    self,
                    f"RuntimeClass {field} {value!r} is not a lowercase DNS label "
                    f"(a-z, 0-9, '-', at most {DNS_LABEL_MAX} characters)",
                    file=document.file,
                    line=line,
                    column=column,
                    key_path=field,
                    fix=f"use e.g. {_label_hint(value)!r}",
                )


def _label_hint(value: object) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", str(value or "nvidia").lower()).strip("-")
    return text[:DNS_LABEL_MAX].strip("-") or "nvidia"


def cdi_spec_files(directory: Path) -> list[Path]:
    """The spec files a CDI registry reads in ``directory``: ``*.yaml`` and ``*.json``, sorted."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.suffix in CDI_SUFFIXES and p.is_file())


def _load_spec(path: Path) -> tuple[object, str | None, tuple[int, int] | None]:
    """``(data, error, position)`` of one spec file."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return None, f"cannot read: {getattr(error, 'strerror', None) or error}", None
    try:
        return yaml.safe_load(text), None, None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = (mark.line + 1, mark.column + 1) if mark else None
        return None, f"invalid YAML: {getattr(error, 'problem', None) or error}", where


_FIELD_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def yaml_position(path: Path, field_path: str) -> tuple[int, int] | None:
    """The line and column of ``field_path`` (``devices[0].name``) in a YAML file.

    Walks the composed node tree as far as the path exists, so a missing field is reported at
    the mapping it belongs in.
    """
    import yaml

    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if node is None:
        return None
    for key, index in _FIELD_STEP.findall(field_path):
        child = None
        if key and isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if k.value == key), None)
            if child is None:
                return _mark(node)
            # report a key at the key itself, not at its value
            if key == field_path.rsplit(".", 1)[-1]:
                node = next(k for k, v in node.value if k.value == key)
                continue
        elif index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            child = node.value[int(index)]
        if child is None:
            return _mark(node)
        node = child
    return _mark(node)


def _mark(node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class CdiSpecMissing(Rule):
    """No CDI spec for `nvidia.com/gpu` in the CDI directories.

    ## What it does
    Looks in `/etc/cdi` and `/var/run/cdi` (under `--root`) for a `*.yaml` or `*.json` spec
    with `kind: nvidia.com/gpu`.

    ## Why is this bad?
    With CDI enabled (containerd 2.x by default), a request for `nvidia.com/gpu=all` fails
    with "unresolvable CDI devices", and no GPU is injected.

    ## Example
    ```text
    /etc/cdi/        (empty)
    ```

    ## Use instead
    ```text
    /etc/cdi/nvidia.yaml   with  kind: nvidia.com/gpu
    ```

    ## Fix
    Write the spec: `gpuready setup` (or `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`
    on a node whose GPUs are visible).
    """

    name = "cdi-spec-missing"
    severity = Severity.WARNING
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        for directory in ctx.cdi_dirs:
            for path in cdi_spec_files(directory):
                data, _, _ = _load_spec(path)
                if isinstance(data, dict) and data.get("kind") == NVIDIA_KIND:
                    return
                if data is None and NVIDIA_KIND in path.read_text(errors="replace"):
                    return  # there is one, unreadable: cdi-spec-invalid says why
        shown = " or ".join(ctx.display(d) for d in ctx.cdi_dirs)
        yield plain_problem(
            self,
            f"no CDI spec with kind {NVIDIA_KIND} in {shown}",
            file=ctx.display(ctx.cdi_dirs[0]) if ctx.cdi_dirs else "/etc/cdi",
            fix="write /etc/cdi/nvidia.yaml (gpuready setup)",
        )


class CdiSpecInvalid(Rule):
    """A CDI spec the CDI loader would reject.

    ## What it does
    Validates every spec file in the CDI directories the way the CDI loader does: a known
    `cdiVersion` high enough for the content, a `vendor/class` kind, at least one device with
    a valid, unique name and non-empty edits, no unknown fields, and the required fields of
    every edit. One problem per reason, with the field path.

    ## Why is this bad?
    The runtime drops the whole file: every device in it becomes "unresolvable", and the
    reason is only in containerd's log.

    ## Example
    ```yaml
    cdiVersion: 0.5.0
    kind: nvidia.com/gpu
    devices:
      - name: all
        containerEdits: {}
    ```

    ## Use instead
    ```yaml
    cdiVersion: 0.5.0
    kind: nvidia.com/gpu
    devices:
      - name: all
        containerEdits:
          deviceNodes:
            - path: /dev/nvidia0
    ```

    ## Fix
    Correct the field named in the message, or regenerate the spec.
    """

    name = "cdi-spec-invalid"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        from gpuready.rules._cdi_fallback import spec_problems

        for directory in ctx.cdi_dirs:
            for path in cdi_spec_files(directory):
                shown = ctx.display(path)
                data, error, where = _load_spec(path)
                if error:
                    yield plain_problem(
                        self,
                        error,
                        file=shown,
                        line=where[0] if where else None,
                        column=where[1] if where else None,
                        fix="correct the YAML syntax",
                    )
                    continue
                for field_path, reason in spec_problems(data):
                    where = yaml_position(path, field_path) if field_path else None
                    yield plain_problem(
                        self,
                        reason,
                        file=shown,
                        key_path=field_path,
                        line=where[0] if where else None,
                        column=where[1] if where else None,
                        fix=f"correct {field_path or 'the spec'}",
                    )
