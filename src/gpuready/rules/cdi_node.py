"""Rules about CDI over a node's life (doctor only): is the spec read, which file wins, is it
still true of the node. The facts come from :mod:`gpuready.cdi.story` (directory order,
shadowing, conflicts, whether containerd reads CDI) and :mod:`gpuready.cdi.staleness`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuready.paths import CDI_DIRS, CDI_SPEC
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import NodeContext, plain_problem


def _kept(ctx: NodeContext, name: str, compute: Callable[[NodeContext], Any]) -> Any:
    """``compute(ctx)``, worked out once per NodeContext and kept on it as ``name``: every
    rule here asks for the same few facts of the node."""
    found = getattr(ctx, name, None)
    if found is None:
        found = compute(ctx)
        setattr(ctx, name, found)
    return found


def no_specs(ctx: NodeContext) -> bool:
    """True when neither the default CDI directories nor containerd's ``cdi_spec_dirs`` hold a
    spec file: every rule here returns at once, and the CDI modules are not loaded."""
    return _kept(ctx, "_gpuready_cdi_no_specs", _no_specs)


def _no_specs(ctx: NodeContext) -> bool:
    from gpuready.cdi.present import spec_files_exist

    node = ctx.options.node
    folders = list(ctx.cdi_dirs) or [node.path_text(d) for d in CDI_DIRS]
    dirs = ctx.config.loaded.cri_table.get("cdi_spec_dirs") if ctx.config is not None else None
    if isinstance(dirs, list):
        folders += [node.path_text(d) for d in dirs if isinstance(d, str) and d.startswith("/")]
    return not spec_files_exist(node, folders)


def _reader(ctx: NodeContext):
    from gpuready.cdi.story import containerd_reader

    return containerd_reader(ctx.config) if ctx.config is not None else None


def story(ctx: NodeContext):
    """The node's :class:`~gpuready.cdi.story.Story`, over the directories containerd reads
    (``cdi_spec_dirs`` when it reads CDI from others than the defaults)."""
    return _kept(ctx, "_gpuready_cdi_story", _told_story)


def _told_story(ctx: NodeContext):
    from gpuready.cdi.story import node_story, tell

    reader = _reader(ctx)
    node = ctx.options.node
    dirs = (list(reader.dirs) if reader is not None and reader.reads and reader.dirs
            else [str(d) for d in CDI_DIRS])
    host_dirs = [node.path(d) for d in dirs]
    if host_dirs == list(ctx.cdi_dirs):
        return tell(ctx.cdi_scan(), host_dirs)  # the scan the other CDI rules read
    return node_story(node, dirs)


def staleness(ctx: NodeContext) -> list[Any]:
    """:func:`gpuready.cdi.staleness.assess` of every NVIDIA spec a device is taken from."""
    return _kept(ctx, "_gpuready_cdi_staleness", _assessed)


def _assessed(ctx: NodeContext) -> list[Any]:
    from gpuready.cdi.intent import recorded_intent
    from gpuready.cdi.staleness import assess, node_driver, read_decoded

    node = ctx.options.node
    driver = node_driver(node)
    found = []
    for spec in story(ctx).winning_specs():
        decoded = read_decoded(node, spec.path)
        if decoded is not None:
            found.append(assess(node, spec.path, decoded, driver,
                                intent=recorded_intent(node, spec.path)))
    return found


_UVM_FIX = ("load the nvidia-uvm module: nvidia-modprobe -u -c=0 (creates /dev/nvidia-uvm and "
            "/dev/nvidia-uvm-tools; regenerating the spec would leave them out)")


def _shown(names: list[str], limit: int = 6) -> str:
    from gpuready.cdi.names import natural_key

    ordered = sorted(names, key=natural_key)
    return ", ".join(ordered[:limit]) + (f" and {len(ordered) - limit} more"
                                         if len(ordered) > limit else "")


def _regenerate_fix(ctx: NodeContext, file: Path, verdict: Any = None) -> str:
    if verdict is not None and verdict.only_uvm:
        return _UVM_FIX
    if verdict is not None and verdict.driver_gone:
        return (f"install the driver again and run gpuready cdi refresh, or remove {file} "
                "while the node has no driver (gpuready cdi generate --gpus N plans it ahead)")
    if ctx.options.node.node_path(file) == ctx.options.node.node_path(
            ctx.options.node.path(CDI_SPEC)):
        return (f"gpuready cdi refresh (regenerates {CDI_SPEC} from the intent it was generated "
                "with; gpuready cdi refresh --install-units keeps it true after every driver "
                "change), or gpuready cdi generate --force (from the node as it is now; --gpus N "
                "or --inventory FILE when its GPUs are not visible)")
    return (f"regenerate {file} with the tool that wrote it, or remove it and run "
            "gpuready cdi generate --force")


class CdiNotRead(Rule):
    """containerd does not read the node's NVIDIA CDI spec.

    ## What it does
    When an NVIDIA spec (`nvidia.com/gpu`, `management.nvidia.com/gpu`, ...) is in the CDI
    directories, asks the effective config whether containerd resolves CDI devices: 1.6 has
    no CDI; 1.7 reads CDI only with `enable_cdi = true` (its default is false); 2.x reads it
    unless `enable_cdi = false`; and only from `cdi_spec_dirs`. Reported where CDI is off or
    the spec's directory is not in `cdi_spec_dirs`, when the release is known (a version 1 or 2
    file alone could be read by any line) and is 1.7 or later (1.6 has nothing to switch on).

    ## Why is this bad?
    The spec is dead weight: a pod asking for `nvidia.com/gpu=all` through CDI (the device
    plugin's `cdi_devices`, DRA, a `cdi.k8s.io/` annotation) gets no GPU, and nothing says why.

    ## Example
    ```toml
    # containerd 1.7, /etc/cdi/nvidia.yaml present
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      sandbox_image = "registry.k8s.io/pause:3.8"
    ```

    ## Use instead
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
      cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
    ```

    ## Fix
    `gpuready configure --enable-cdi`, then restart containerd.
    """

    name = "cdi-not-read"
    severity = Severity.WARNING
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if no_specs(ctx):
            return
        if ctx.config is None:
            return
        from gpuready.cdi.story import tell

        # the specs in containerd's directories, and those in the default ones it may not read
        specs = list({spec.path: spec for spec in story(ctx).nvidia_specs()
                      + tell(ctx.cdi_scan(), list(ctx.cdi_dirs)).nvidia_specs()}.values())
        if not specs:
            return
        reader = _reader(ctx)
        files = ", ".join(str(spec.path) for spec in specs)
        cri = ctx.config.spec.cri_path
        if not ctx.config.loaded.cri_loaded:
            return  # no CRI plugin, no CDI either: the rules about the CRI table say why
        if reader.reads is None or not ctx.config.loaded.line.line.reads_cdi:
            # the release is not known (a version 1 or 2 file: 1.6, 1.7 and 2.x read it
            # differently), or containerd 1.6 (no CDI at all: nothing to switch on; GPUs come
            # through the nvidia runtime): no finding, the spec is kept for later
            return
        if reader.reads is False:
            yield ctx.config.report(
                self, f"the CDI spec(s) {files} are not read: {reader.why}; a pod asking for "
                "an NVIDIA device through CDI gets no GPU", (*cri, "enable_cdi"),
                fix=reader.fix)
        else:
            from gpuready.cdi.story import outside

            node = ctx.options.node
            resolved = story(ctx).nvidia_devices()
            for spec in specs:
                # a spec outside the dirs whose devices another, read, spec provides is harmless
                if outside(reader, spec.path, node) and any(
                        device not in resolved for device in spec.devices):
                    folder = node.node_path(spec.path).parent
                    yield ctx.config.report(
                        self, f"containerd reads CDI specs only from cdi_spec_dirs = "
                        f"{list(reader.dirs)}; {spec.path} is in {folder}, which is not among "
                        "them", (*cri, "cdi_spec_dirs"),
                        fix=f"add {folder} to cdi_spec_dirs, or move the spec into one of them")


class CdiSpecShadowed(Rule):
    """An NVIDIA CDI spec whose devices are taken from another file of a later directory.

    ## What it does
    Reads the CDI directories as the CDI loader does (`/etc/cdi`, then `/var/run/cdi`, or
    containerd's `cdi_spec_dirs`; a device defined in two directories is taken from the later
    one) and reports each NVIDIA spec some of whose devices come from another file, naming it.

    ## Why is this bad?
    The spec you wrote is silently not used. `nvidia-cdi-refresh` and the GPU Operator write
    `/var/run/cdi/nvidia.yaml`, which overrides gpuready's `/etc/cdi/nvidia.yaml` device by
    device: a fix made to one file has no effect, and two tools keep rewriting the same devices.

    ## Example
    ```text
    /etc/cdi/nvidia.yaml       nvidia.com/gpu=0, nvidia.com/gpu=all   (gpuready)
    /var/run/cdi/nvidia.yaml   nvidia.com/gpu=0, nvidia.com/gpu=all   (nvidia-cdi-refresh)
    ```

    ## Use instead
    ```text
    /var/run/cdi/nvidia.yaml   nvidia.com/gpu=0, nvidia.com/gpu=all   (one writer)
    ```

    ## Fix
    Keep one writer: remove the shadowed file (or stop the tool that writes the other one).
    """

    name = "cdi-spec-shadowed"
    severity = Severity.WARNING
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if no_specs(ctx):
            return
        from gpuready.cdi.story import is_nvidia_kind

        told = story(ctx)
        order = None
        for shadow in told.shadowed:
            if not is_nvidia_kind(shadow.spec.kind):
                continue
            if order is None:  # named in the message only: most nodes shadow nothing
                order = " then ".join(str(ctx.options.node.node_path(d)) for d in told.dirs)
            winners = sorted(set(shadow.winners.values()))
            by = ", ".join(str(w) for w in winners)
            which = ("every device of this spec is" if shadow.whole else
                     f"device(s) {_shown(list(shadow.winners))} of this spec are")
            unused = "; this file is not used" if shadow.whole else ""
            yield plain_problem(
                self,
                f"{which} taken from {by}: the CDI loader reads {order}, and a later directory "
                f"wins{unused}",
                file=str(shadow.spec.path),
                fix=f"keep one writer: remove {shadow.spec.path}, or remove {by} and stop the "
                "tool that writes it (nvidia-cdi-refresh, the GPU Operator)")


class CdiDeviceConflict(Rule):
    """A CDI device defined in two spec files of one directory: the loader drops it.

    ## What it does
    Reports every fully-qualified device (`nvidia.com/gpu=0`) that two or more files of the
    same CDI directory define.

    ## Why is this bad?
    The CDI loader does not pick one: it drops the device from both files (a "conflicting
    device" error in the runtime's log only), and it stays dropped even where a later
    directory defines it again. A pod asking for it fails with "unresolvable CDI devices".

    ## Example
    ```text
    /etc/cdi/nvidia.yaml      nvidia.com/gpu=0
    /etc/cdi/nvidia-ctk.yaml  nvidia.com/gpu=0
    ```

    ## Use instead
    ```text
    /etc/cdi/nvidia.yaml      nvidia.com/gpu=0
    ```

    ## Fix
    Remove one of the files (or keep each device in one file of the directory).
    """

    name = "cdi-device-conflict"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if no_specs(ctx):
            return
        for conflict in story(ctx).conflicts:
            first, *others = conflict.files
            yield plain_problem(
                self,
                f"{conflict.device} is defined here and in {', '.join(map(str, others))} (one "
                "directory): the CDI loader drops the device, and a pod asking for it fails "
                "with 'unresolvable CDI devices'",
                file=str(first),
                fix=f"remove one of the files, or keep {conflict.device} in one file of the "
                "directory")


class CdiSpecStale(Rule):
    """An NVIDIA CDI spec that no longer describes the node (driver upgraded, removed, MIG).

    ## What it does
    For each NVIDIA spec a device is taken from, on a node that shows an NVIDIA driver
    (`/proc/driver/nvidia`, `/sys/module/nvidia`, `libcuda.so.*`, `/dev/nvidia*`): checks that
    every host path it names exists (mount `hostPath`, device node, hook `path`), that the
    driver version in its library names (`libcuda.so.<version>`) is the node's
    (`/sys/module/nvidia/version`, `/proc/driver/nvidia/version`, else the `libcuda.so.*` the
    library folders hold), and that its GPUs and MIG devices are those the node shows
    (`/proc/driver/nvidia/gpus`, `/dev/nvidia<N>`, the MIG capabilities under
    `/proc/driver/nvidia/capabilities`). No GPU is needed. A node that shows no driver at all
    is not judged: a spec written ahead (`cdi generate --gpus N`) is not yet verifiable; but a
    spec whose intent record (`<spec>.gpuready.intent`, written by `cdi generate`) says its
    GPUs were detected on the node is stale there: the driver was removed.

    ## Why is this bad?
    A spec names driver files by version: after a driver upgrade `libcuda.so.<old>` is gone
    and every GPU container fails to start with a mount error; after a MIG re-partition the
    spec's MIG devices no longer exist.

    ## Example
    ```text
    spec:  hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    node:  /sys/module/nvidia/version = 570.86.15
    ```

    ## Use instead
    ```text
    spec:  hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15
    ```

    ## Fix
    Regenerate the spec: `gpuready cdi refresh` (from the intent it was generated with;
    `--install-units` runs it after every driver change) or `gpuready cdi generate --force` for
    `/etc/cdi/nvidia.yaml`, or the tool that wrote it for another file.
    """

    name = "cdi-spec-stale"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        if no_specs(ctx):
            return
        for verdict in staleness(ctx):
            if verdict.stale:
                yield plain_problem(
                    self, "stale CDI spec: " + "; ".join(verdict.reasons())
                    + "; every GPU container using it fails to start",
                    file=str(verdict.file), fix=_regenerate_fix(ctx, verdict.file, verdict))


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    CdiNotRead(),
    CdiSpecShadowed(),
    CdiDeviceConflict(),
    CdiSpecStale(),
)


def engine_problems(node: Any, engine: str, *,
                    docker_release: tuple[int, int] | None = None) -> list[Problem]:
    """The CDI story's findings on a Docker or CRI-O node (``doctor --engine docker|crio``):
    whether the engine reads the NVIDIA specs (:func:`gpuready.cdi.story.engine_reader`), which
    are shadowed or in conflict in the directories it reads, and which are stale."""
    from gpuready.cdi.intent import recorded_intent
    from gpuready.cdi.staleness import assess, node_driver, read_decoded
    from gpuready.cdi.story import engine_reader, is_nvidia_kind, node_story

    reader = engine_reader(node, engine, docker_release=docker_release)
    dirs = list(reader.dirs) or [str(d) for d in CDI_DIRS]
    told = node_story(node, dirs)
    found: list[Problem] = []
    specs = told.nvidia_specs()
    if specs and reader.reads is False:
        files = ", ".join(str(spec.path) for spec in specs)
        found.append(plain_problem(
            CdiNotRead(), f"the CDI spec(s) {files} are not read: {reader.why}; a container "
            "asking for an NVIDIA device through CDI gets no GPU", file=files, fix=reader.fix))
    order = " then ".join(str(node.node_path(d)) for d in told.dirs)
    for shadow in told.shadowed:
        if is_nvidia_kind(shadow.spec.kind):
            by = ", ".join(str(w) for w in sorted(set(shadow.winners.values())))
            found.append(plain_problem(
                CdiSpecShadowed(), f"device(s) {_shown(list(shadow.winners))} of this spec are "
                f"taken from {by}: the CDI loader reads {order}, and a later directory wins",
                file=str(shadow.spec.path), fix=f"keep one writer: remove {shadow.spec.path}, "
                f"or remove {by}"))
    for conflict in told.conflicts:
        first, *others = conflict.files
        found.append(plain_problem(
            CdiDeviceConflict(), f"{conflict.device} is defined here and in "
            f"{', '.join(map(str, others))} (one directory): the CDI loader drops the device",
            file=str(first), fix="remove one of the files"))
    driver = node_driver(node)
    for spec in told.winning_specs():
        decoded = read_decoded(node, spec.path)
        verdict = decoded and assess(node, spec.path, decoded, driver,
                                     intent=recorded_intent(node, spec.path))
        if verdict and verdict.stale:
            found.append(plain_problem(
                CdiSpecStale(), "stale CDI spec: " + "; ".join(verdict.reasons()),
                file=str(spec.path), fix=_UVM_FIX if verdict.only_uvm else (
                    "gpuready cdi refresh (for /etc/cdi/nvidia.yaml), or the tool that wrote "
                    "it")))
    return found
