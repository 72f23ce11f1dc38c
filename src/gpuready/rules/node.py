"""Rules about the node around the config: imports, RuntimeClasses, CDI specs (doctor only)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from gpuready.containerd import facts
from gpuready.containerd.versions import render_key_path
from gpuready.errors import InputError
from gpuready.kubernetes.labels import DNS_LABEL_MAX, is_dns_label, label_problem
from gpuready.node import FileKind, Node
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import NodeContext, RuntimeClassDocument, plain_problem

NVIDIA_KIND = "nvidia.com/gpu"


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
        cause = ctx.config.loaded.cause if ctx.config is not None else None
        for file, plugin, lost in ctx.replaced_tables:
            shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
            message = (f"this file's [{render_key_path(('plugins', plugin))}] replaces the "
                       f"earlier one whole under containerd 1.x, losing {shown}")
            fix = ("register the runtime in the main config, or copy the whole CRI table "
                   "into this file")
            if cause is not None and cause.kind == "import-replaced" and cause.file == file.path:
                # the loss stops the CRI plugin: the model's cause, as every command says it
                message = f"{message}: {cause.message.split(': ', 1)[-1]}"
                fix = cause.fix
            yield file.report(self, message, ("plugins", plugin), fix=fix)


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
    merging the main config and its imports. On a node set up for NRI mode (see
    `nri-mode-not-ready`), which registers no runtime by design, it says so, and the fix is to
    drop the RuntimeClass.

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
            message = (f"RuntimeClass {document.name!r} has handler {handler!r}, but containerd "
                       f"registers only {', '.join(registered) or 'no runtimes'}")
            fix = (f"set handler to one of: {', '.join(registered)}" if registered
                   else "register the runtime in containerd's config")
            if _nri_mode(ctx):
                # NRI mode registers no runtime by design (the GPU Operator deletes its
                # RuntimeClasses): a pod naming this class fails instead of getting its GPU
                message += ("; this node is set up for NRI mode, which leaves the runtime "
                            "unregistered")
                fix = ("in NRI mode pods need no runtimeClassName: delete this RuntimeClass "
                       "and drop it from the pods, or register the runtime (gpuready configure)")
            yield plain_problem(self, message, file=document.file, line=line, column=column,
                                key_path="handler", fix=fix)


def _nri_mode(ctx: NodeContext) -> bool:
    from gpuready.rules.gpu_paths import nri_mode

    return nri_mode(ctx) is not None


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
                problem = label_problem(value)
                if problem is None:
                    continue
                line, column = _handler_position(document, field.rsplit(".", 1)[-1])
                yield plain_problem(
                    self,
                    f"RuntimeClass {field} {problem}",
                    file=document.file,
                    line=line,
                    column=column,
                    key_path=field,
                    fix=f"use e.g. {_label_hint(value)!r}",
                )


def _label_hint(value: object) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", str(value or "nvidia").lower()).strip("-")
    return text[:DNS_LABEL_MAX].strip("-") or "nvidia"


class CdiSpecMissing(Rule):
    """No CDI spec for `nvidia.com/gpu` in the CDI directories.

    ## What it does
    Looks in `/etc/cdi` and `/var/run/cdi` (under `--root`) for a `*.yaml` or `*.json` spec
    with `kind: nvidia.com/gpu`.

    ## Why is this bad?
    With CDI enabled (containerd 2.x by default), a request for `nvidia.com/gpu=all` fails
    with "unresolvable CDI devices", and no GPU is injected. The finding is an error when the
    effective config enables CDI, a warning otherwise.

    ## Example
    ```text
    /etc/cdi/        (empty)
    ```

    ## Use instead
    ```text
    /etc/cdi/nvidia.yaml   with  kind: nvidia.com/gpu
    ```

    ## Fix
    Write the spec: `gpuready cdi generate` (with `--gpus N` or `--inventory FILE` before the
    GPUs are visible); `gpuready setup` writes it too.
    """

    name = "cdi-spec-missing"
    severity = Severity.WARNING
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        scan = ctx.cdi_scan()
        if any(name.startswith(f"{NVIDIA_KIND}=") for name in scan.devices):
            return
        for spec in scan.specs:
            # there is one, rejected: cdi-spec-invalid says why
            if not spec.accepted and _mentions_nvidia(ctx.options.node, spec.path):
                return
        shown = " or ".join(ctx.display(d) for d in ctx.cdi_dirs)
        message = f"no CDI spec with kind {NVIDIA_KIND} in {shown}"
        enabled = ctx.config is not None and facts.cdi_enabled(ctx.config.data, ctx.config.spec)
        if enabled:
            message += (
                f"; CDI is enabled in containerd, so a pod asking for {NVIDIA_KIND}=all fails "
                "with 'unresolvable CDI devices'"
            )
        yield plain_problem(
            self,
            message,
            file=ctx.display(ctx.cdi_dirs[0]) if ctx.cdi_dirs else "/etc/cdi",
            fix="write /etc/cdi/nvidia.yaml: gpuready cdi generate (--gpus N before the GPUs "
            "are visible)",
            severity=Severity.ERROR if enabled else None,
        )


def _mentions_nvidia(node: Node, path: Path) -> bool:
    try:
        return NVIDIA_KIND in node.read_text(path, kind=FileKind.CDI_SPEC)
    except InputError:
        return False


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
        scan = ctx.cdi_scan()
        for problem in scan.problems:
            if problem.rule == self.name:
                yield problem
        for error in scan.unreadable:
            yield plain_problem(
                self,
                f"cannot read: {error.reason}",
                file=error.path,
                line=error.line,
                column=error.column,
                fix="make the spec readable and valid",
            )

class SettingShadowed(Rule):
    """A setting in one file that containerd does not run, because a later file wins.

    ## What it does
    Follows the node's files in the order containerd reads them (the main file, then its
    `imports`) and reports each setting under `plugins` whose value is not the one that runs,
    naming the file whose value wins and why. On containerd 1.x a later file's plugin table
    replaces the earlier one whole; on 2.x the last file's value for a key wins. (A setting the
    later 1.x table leaves out entirely is `import-overrides-cri`, reported in that file.)

    ## Why is this bad?
    The edit looks applied and containerd runs something else. After a drop-in that copies the
    whole CRI table (nvidia-ctk 1.20's, or `configure --drop-in`), a later change of
    `sandbox_image` or a runtime's `BinaryName` in the main file has no effect on 1.x.

    ## Example
    ```toml
    # /etc/containerd/config.toml (imports conf.d/*.toml)
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/opt/nvidia/bin/nvidia-container-runtime"
    # /etc/containerd/conf.d/99-nvidia.toml holds the whole CRI table, with
    #   BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Use instead
    ```toml
    # make the change in the file that wins: /etc/containerd/conf.d/99-nvidia.toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/opt/nvidia/bin/nvidia-container-runtime"
    ```

    ## Fix
    Make the change in the file that wins (`gpuready configure --drop-in` that file), or remove
    that file's copy of the setting.
    """

    name = "setting-shadowed"
    severity = Severity.WARNING
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if ctx.config is None or len(ctx.files) < 2:
            return
        from gpuready.containerd.provenance import shadowed

        loaded = ctx.config.loaded
        if loaded.unread:
            return
        by_path = {file.path: file for file in ctx.files}
        runtimes = {ctx.options.runtime_name, loaded.default_runtime}
        for shadow in shadowed(loaded.sources, loaded.line.major):
            file = by_path.get(shadow.file)
            if file is None:
                continue
            key = render_key_path(shadow.key_path)
            in_runtime = (len(shadow.key_path) > 4 and shadow.key_path[3] == "runtimes"
                          and shadow.key_path[4] in runtimes)
            yield file.report(
                self,
                f"{key} = {shadow.value!r} here is not what {loaded.line.line} runs "
                f"({shadow.effective!r}): {shadow.reason}",
                shadow.key_path,
                fix=f"make the change in {shadow.winner} (the file that wins), or remove the "
                "setting there",
                severity=Severity.ERROR if in_runtime else None,
            )

class BaseRuntimeSpecMissing(Rule):
    """(containerd 1.x) A runtime's `base_runtime_spec` names a file the node does not have.

    ## What it does
    For each runtime containerd would load, reports a `base_runtime_spec` that names no file
    on the node (under `--root`).

    ## Why is this bad?
    containerd 1.x reads every runtime's base OCI spec when its CRI plugin starts; one missing
    file stops the whole plugin ("failed to create CRI service: failed to load base OCI spec
    from file", recorded on Debian's 1.6.20), and no pod starts on the node, GPU or not. The
    config looks fine to every check that only parses it.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "/etc/containerd/cri-base.json"   # not on this node
    ```

    ## Use instead
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    ```

    ## Fix
    Write the file (kubespray renders `/etc/containerd/cri-base.json`), or remove the setting.
    """

    name = "base-runtime-spec-missing"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if ctx.config is None:
            return
        loaded = ctx.config.loaded
        # recorded on 1.6.20 only: 2.x was not seen to refuse, so it is not judged
        if loaded.line.major != 1 or not loaded.cri_loaded:
            return
        node = ctx.options.node
        for name, entry in sorted(loaded.runtimes.items()):
            spec = entry.get("base_runtime_spec")
            if not isinstance(spec, str) or not spec or node.is_file(node.path(spec)):
                continue
            key_path = (*loaded.cri_path, "containerd", "runtimes", name, "base_runtime_spec")
            yield ctx.config.report(
                self,
                f"runtime {name!r}: base_runtime_spec {spec} does not exist on the node: "
                f"{loaded.line.line}'s CRI plugin does not load without it (no pod starts)",
                key_path,
                fix=f"write {spec}, or remove base_runtime_spec from runtime {name!r}",
            )


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    ImportOverridesCri(),
    SettingShadowed(),
    BaseRuntimeSpecMissing(),
    ImportMissing(),
    ImportVersionHigher(),
    HandlerMismatch(),
    HandlerInvalid(),
    CdiSpecMissing(),
    CdiSpecInvalid(),
)
