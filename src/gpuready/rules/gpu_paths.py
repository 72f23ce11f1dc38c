"""Rules about the ways GPUs reach pods besides the `nvidia` runtime (doctor only): NRI mode, DRA,
and whether the node's containerd reads the CDI specs' version at all.

Each rule first asks whether the node shows the way in use (an NRI plugin set up, a DRA
driver's kubelet plugin folder, a CDI spec containerd reads) and says nothing on a node that
does not. The facts come from :mod:`gpuready.containerd.nri` (NRI as the files set it up),
:mod:`gpuready.containerd.releases` (what a patch release does), :mod:`gpuready.kubernetes.dra`
(the kubelet's folders) and :mod:`gpuready.cdi.versions` (which ``cdiVersion`` a release reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from gpuready.paths import CDI_SPEC
from gpuready.problems import Problem, Severity
from gpuready.records import Record
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import NodeContext, plain_problem

_NRI_MODE = "_gpuready_nri_mode"  # found once per NodeContext, for the rules that ask
_RESTART = "restart containerd (systemctl restart containerd, or its owner's restart)"


class NriMode(Record):
    """A node set up for NRI mode: NRI as containerd runs it, and what shows it is meant."""

    nri: Any  # gpuready.containerd.nri.Nri
    signs: list[str]


def nri_mode(ctx: NodeContext) -> NriMode | None:
    """The node's :class:`NriMode` when it shows it is meant for NRI mode, else None.

    Signs: a config file sets the NRI plugin's ``disable = false`` where the line's default is
    not already false (containerd 1.7 leaves NRI off: turning it on is deliberate), or NRI plugins
    are installed in NRI's plugin or plugin configuration folder. The GPU Operator's NRI plugin
    (``cdi.nriPluginEnabled``) is a pod that leaves no file on the node: on a line where NRI is
    on by default (2.x), a node that uses only it shows nothing to go by.
    """
    if ctx.config is None or not ctx.config.loaded.cri_loaded:
        return None  # containerd does not start, or runs no CRI: the rules about that say why
    if hasattr(ctx, _NRI_MODE):
        return getattr(ctx, _NRI_MODE)
    from gpuready.containerd.nri import DISABLE_PATH, NRI_PLUGIN, nri_of

    nri = nri_of(ctx.config.loaded, ctx.config.data)
    signs = []
    if nri.switched_on:
        file = ctx.config.origin(DISABLE_PATH).display
        signs.append(f'{file} sets disable = false under [plugins."{NRI_PLUGIN}"]')
    node = ctx.options.node
    for folder in (nri.plugin_path, nri.plugin_config_path):
        if _holds_files(node, folder):
            signs.append(f"NRI plugins are set up in {folder}")
    found = NriMode(nri, signs) if signs else None
    setattr(ctx, _NRI_MODE, found)
    return found


def _holds_files(node: Any, folder: PurePosixPath) -> bool:
    host = node.path_text(folder)
    try:
        return node.is_dir(host) and bool(node.listdir(host))
    except OSError:  # a folder gpuready may not list tells nothing
        return False


def _reader(ctx: NodeContext):
    from gpuready.cdi.story import containerd_reader

    return containerd_reader(ctx.config)


def _release_label(line: Any) -> str:
    return line.shown if line.release is not None else f"{line.line} (release not known)"


class NriModeNotReady(Rule):
    """A node set up for NRI mode whose containerd would not inject the GPU.

    ## What it does
    On a node that shows it is meant for NRI mode (a config file turns on the NRI plugin where
    the line leaves it off, or NRI plugins are set up in its plugin folders), checks what NRI
    mode needs: a containerd line with NRI (1.7 and later), NRI on in the effective config
    (`disable` of `[plugins."io.containerd.nri.v1.nri"]`: true by default on 1.7, false on 2.x),
    a release that injects the CDI devices an NRI plugin adds (1.7.30 or later, 2.1.0 or later),
    CDI on (`enable_cdi`), and, while containerd runs (its socket is there), NRI's socket
    (`socket_path`, `/var/run/nri/nri.sock`). The patch release is read from
    `--containerd-version X.Y.Z`, the node's package database or `containerd --version`; when
    only the line is known, the finding is a warning.

    ## Why is this bad?
    NRI mode (the GPU Operator's `cdi.nriPluginEnabled`) edits no containerd config and
    deletes the `nvidia` RuntimeClasses: the GPU reaches a pod only if containerd runs NRI and
    applies the CDI devices the plugin asks for. Releases before 1.7.30 and 2.0.x drop them
    without an error (containerd#12650, #11675; gpu-operator#2382): the pod starts, without a
    GPU.

    ## Example
    ```toml
    # containerd 1.7.25
    version = 2
    [plugins."io.containerd.nri.v1.nri"]
      disable = false
    ```

    ## Use instead
    ```toml
    # containerd 1.7.30 or later
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
    [plugins."io.containerd.nri.v1.nri"]
      disable = false
    ```

    ## Fix
    Upgrade containerd to 1.7.30 or later (or 2.1.0 or later), set `disable = false` under
    `[plugins."io.containerd.nri.v1.nri"]` and `enable_cdi = true` (`gpuready configure
    --enable-cdi`), then restart containerd.
    """

    name = "nri-mode-not-ready"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        mode = nri_mode(ctx)
        if mode is None:
            return
        from gpuready.containerd.releases import NRI_CDI_INJECTION

        config = ctx.config
        line = config.loaded.line
        why = "; ".join(mode.signs)
        if not mode.nri.available:
            yield config.main.report(
                self, f"the node is set up for NRI mode ({why}), but {line.shown} has no NRI "
                "plugin: no GPU reaches a pod through NRI",
                fix=f"upgrade containerd to {NRI_CDI_INJECTION.upgrade_to()}, then turn NRI "
                "on")
            return
        yield from self._enabled(ctx, mode, why)
        yield from self._release(ctx, line, why)
        yield from self._cdi(ctx, why)
        yield from self._socket(ctx, mode)

    def _enabled(self, ctx: NodeContext, mode: NriMode, why: str) -> Iterator[Problem]:
        from gpuready.containerd.nri import DISABLE_PATH

        if mode.nri.enabled:
            return
        said = ("a file sets disable = true" if mode.nri.written is True
                else f"{ctx.config.loaded.line.line}'s default is disable = true")
        yield ctx.config.report(
            self, f"the node is set up for NRI mode ({why}), but containerd's NRI plugin is "
            f"off ({said}): the NRI plugin cannot connect, and no GPU reaches a pod",
            DISABLE_PATH, fix=f"set disable = false under [{_table(DISABLE_PATH)}], then "
            f"{_RESTART}")

    def _release(self, ctx: NodeContext, line: Any, why: str) -> Iterator[Problem]:
        from gpuready.containerd.releases import NRI_CDI_INJECTION, has

        verdict = has(NRI_CDI_INJECTION, release=line.release, version=line.version)
        upgrade = NRI_CDI_INJECTION.upgrade_to(line.line.major)
        if verdict is False:
            yield ctx.config.main.report(
                self, f"{line.shown} drops the CDI devices an NRI plugin adds, without an error "
                f"({NRI_CDI_INJECTION.source}): in NRI mode ({why}) pods start without a GPU",
                fix=f"upgrade containerd to {upgrade}")
        elif verdict is None:
            yield ctx.config.main.report(
                self, f"whether {_release_label(line)} injects the CDI devices an NRI plugin adds "
                f"depends on its patch release ({upgrade} do; older ones drop them silently), "
                f"and NRI mode relies on it ({why})",
                fix="tell the release with --containerd-version X.Y.Z; upgrade containerd to "
                f"{upgrade} if it is older", severity=Severity.WARNING)

    def _cdi(self, ctx: NodeContext, why: str) -> Iterator[Problem]:
        reader = _reader(ctx)
        if reader.reads is False:
            yield ctx.config.report(
                self, f"NRI mode ({why}) injects CDI devices, but containerd does not read CDI: "
                f"{reader.why}", (*ctx.config.loaded.cri_path, "enable_cdi"), fix=reader.fix)

    def _socket(self, ctx: NodeContext, mode: NriMode) -> Iterator[Problem]:
        from gpuready.rules.ownership import served_socket

        node = ctx.options.node
        if not mode.nri.enabled or ctx.ownership is None:
            return
        served = served_socket(ctx)
        if not node.is_socket(node.path(served)) or node.is_socket(node.path(mode.nri.socket)):
            return  # containerd does not run here (or a copy of its files), or NRI listens
        yield plain_problem(
            self, f"containerd runs (its socket {served} is there) but NRI's socket "
            f"{mode.nri.socket} is not: the running containerd has NRI off, though its config "
            "turns it on (it was not restarted since)", file=str(mode.nri.socket),
            fix=_RESTART, severity=Severity.WARNING)


def _table(key_path: tuple[str, ...]) -> str:
    from gpuready.containerd.versions import render_key_path

    return render_key_path(key_path[:-1])


def _same_folder(a: PurePosixPath | str, b: PurePosixPath | str) -> bool:
    """``/var/run/x`` and ``/run/x`` are one folder (``/var/run`` links to ``/run``)."""
    def plain(path: PurePosixPath | str) -> str:
        text = str(PurePosixPath(path))
        return "/run/" + text[len("/var/run/"):] if text.startswith("/var/run/") else text

    return plain(a) == plain(b)


class DraNotReady(Rule):
    """A node running NVIDIA's DRA driver whose containerd would not pass its devices.

    ## What it does
    On a node that shows NVIDIA's DRA driver (k8s-dra-driver-gpu: its kubelet plugin folder
    `/var/lib/kubelet/plugins/gpu.nvidia.com` or `.../compute-domain.nvidia.com`), checks that
    containerd passes the CDI devices the kubelet names (CRI `CDIDevices`, containerd 1.7.2 and
    later), reads CDI (`enable_cdi`), reads `/var/run/cdi` (in `cdi_spec_dirs`), and that
    NVIDIA's device plugin does not run on the same node (its socket
    `/var/lib/kubelet/device-plugins/nvidia-*.sock`).

    ## Why is this bad?
    The DRA driver writes one CDI spec per claim in `/var/run/cdi` and the kubelet asks for its
    devices through CRI: without CDI, or without that folder, the pod fails with "unresolvable
    CDI devices" (or, before 1.7.2, starts without a GPU). A device plugin on the same node
    advertises the same GPUs as `nvidia.com/gpu`, so two pods are given one GPU.

    ## Example
    ```toml
    # containerd 1.7, /var/lib/kubelet/plugins/gpu.nvidia.com present
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
      cdi_spec_dirs = ["/etc/cdi"]
    ```

    ## Use instead
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
      cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
    ```

    ## Fix
    `gpuready configure --enable-cdi` (sets `enable_cdi` and both CDI folders) on containerd
    1.7.2 or later, restart containerd, and remove NVIDIA's device plugin from DRA nodes (the
    GPU Operator's `devicePlugin.enabled=false`, or its DaemonSet's node selector).
    """

    name = "dra-not-ready"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        from gpuready.kubernetes.dra import GPU_DRIVER, device_plugin_sockets, dra_driver_folders

        node = ctx.options.node
        folders = dra_driver_folders(node)
        if not folders:
            return
        shown = ", ".join(map(str, folders))
        if any(folder.name == GPU_DRIVER for folder in folders):
            for socket in device_plugin_sockets(node):
                yield plain_problem(
                    self, f"NVIDIA's device plugin runs on this node ({socket}) beside the DRA "
                    f"driver ({shown}): both hand out the same GPUs, so two pods can be given "
                    "one", file=str(socket), fix="run one of them: remove the device plugin "
                    "from DRA nodes (the GPU Operator's devicePlugin.enabled=false, or its "
                    "DaemonSet's node selector)")
        if ctx.config is not None and ctx.config.loaded.cri_loaded:
            yield from self._containerd(ctx, shown)

    def _containerd(self, ctx: NodeContext, shown: str) -> Iterator[Problem]:
        from gpuready.containerd.releases import CRI_CDI_DEVICES, has
        from gpuready.kubernetes.dra import DRA_CDI_DIR

        config = ctx.config
        line = config.loaded.line
        if has(CRI_CDI_DEVICES, release=line.release, version=line.version) is False:
            yield config.main.report(
                self, f"the DRA driver runs here ({shown}), but {line.shown} does not pass the "
                f"CDI devices the kubelet names (CRI CDIDevices: containerd "
                f"{CRI_CDI_DEVICES.upgrade_to()}); pods with a claim get no GPU",
                fix=f"upgrade containerd to {CRI_CDI_DEVICES.upgrade_to()}, then gpuready "
                "configure --enable-cdi")
            if not line.line.reads_cdi:
                return  # 1.6: no CDI to switch on either
        reader = _reader(ctx)
        cri = config.loaded.cri_path
        if reader.reads is False:
            yield config.report(
                self, f"the DRA driver runs here ({shown}) and its devices are CDI devices, but "
                f"containerd does not read CDI: {reader.why}", (*cri, "enable_cdi"),
                fix=reader.fix)
        elif reader.reads and not any(_same_folder(d, DRA_CDI_DIR) for d in reader.dirs):
            yield config.report(
                self, f"the DRA driver ({shown}) writes a CDI spec per claim in {DRA_CDI_DIR}, "
                f"but containerd reads CDI specs only from cdi_spec_dirs = {list(reader.dirs)}: "
                "pods with a claim fail with 'unresolvable CDI devices'", (*cri, "cdi_spec_dirs"),
                fix=f"add {DRA_CDI_DIR} to cdi_spec_dirs, then {_RESTART}")


class CdiVersionTooNew(Rule):
    """A CDI spec whose `cdiVersion` is newer than the node's containerd reads.

    ## What it does
    For every spec in the folders containerd reads CDI from (when it reads CDI), compares the
    spec's `cdiVersion` with the newest the node's containerd release reads, that of the CDI
    library it is built with: 1.7.0–1.7.11 up to 0.5.0, 1.7.12–1.7.15 0.6.0, 1.7.16–1.7.26
    0.7.0, 1.7.27 and later 0.8.0, 2.0 0.8.0, 2.1 and 2.2 1.0.0, 2.3 1.1.0 (1.6 reads no CDI).
    The release is read from `--containerd-version X.Y.Z`, the node's package database or
    `containerd --version`; when only a 1.7 line is known, a version some of its patch releases
    read is a warning.

    ## Why is this bad?
    containerd's CDI cache refuses a spec of a version it does not know, whole: every device in
    it is "unresolvable" and each pod asking for one fails to start. The reason is only in
    containerd's log. A spec generated on a newer machine, or by a newer tool, is the usual
    cause.

    ## Example
    ```yaml
    # containerd 1.7.20 (reads up to 0.7.0)
    cdiVersion: 0.8.0
    kind: nvidia.com/gpu
    ```

    ## Use instead
    ```yaml
    cdiVersion: 0.5.0
    kind: nvidia.com/gpu
    ```

    ## Fix
    Regenerate the spec at a version the node reads (`gpuready cdi generate --force` writes the
    lowest version its content needs), or upgrade containerd to a release that reads it.
    """

    name = "cdi-version-too-new"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        from gpuready.rules.cdi_node import no_specs

        if ctx.config is None or not ctx.config.loaded.cri_loaded or no_specs(ctx):
            return
        line = ctx.config.loaded.line
        reads = _reads(line)
        if reads is None or not _reader(ctx).reads:
            return  # no release known, no CDI, or CDI off: cdi-not-read says so
        from gpuready.cdi.versions import version_key
        from gpuready.rules.cdi_node import story

        lowest, newest = reads
        for spec in story(ctx).scan.specs:
            if not spec.version or version_key(spec.version) <= version_key(lowest):
                continue
            if version_key(spec.version) > version_key(newest):
                yield self._too_new(ctx, spec, line, newest)
            else:
                yield self._maybe_too_new(spec, line, lowest)

    def _maybe_too_new(self, spec: Any, line: Any, lowest: str) -> Problem:
        from gpuready.cdi.versions import first_containerd_reading

        first = first_containerd_reading(spec.version, major=line.line.major)
        since = ".".join(map(str, first)) if first else "a later release"
        return plain_problem(
            self, f"cdiVersion {spec.version}: {line.shown} reads it from {since} on (its first "
            f"releases read up to {lowest}), and the patch release is not known",
            file=str(spec.path), key_path="cdiVersion", fix="tell the release with "
            f"--containerd-version X.Y.Z; before {since}, regenerate the spec at cdiVersion "
            f"{lowest} or upgrade containerd", severity=Severity.WARNING)

    def _too_new(self, ctx: NodeContext, spec: Any, line: Any, newest: str) -> Problem:
        devices = len(spec.devices)
        return plain_problem(
            self, f"cdiVersion {spec.version} is newer than the {newest} {line.shown} reads: "
            f"containerd refuses the whole spec, and its {devices} device(s) are unresolvable "
            "at pod start", file=str(spec.path), key_path="cdiVersion",
            fix=_version_fix(ctx, spec, line, newest))


def _reads(line: Any) -> tuple[str, str] | None:
    """The oldest and newest ``cdiVersion`` the node's release reads (one when the patch is
    known); None without a release, or on a line without CDI."""
    from gpuready.cdi.versions import containerd_reads, containerd_reads_range

    if line.version is not None:
        newest = containerd_reads(line.version)
        return (newest, newest) if newest else None
    return containerd_reads_range(line.release) if line.release is not None else None


def _version_fix(ctx: NodeContext, spec: Any, line: Any, newest: str) -> str:
    from gpuready.cdi.staleness import read_decoded
    from gpuready.cdi.versions import first_containerd_reading, minimum_version, version_key

    first = (first_containerd_reading(spec.version, major=line.line.major)
             or first_containerd_reading(spec.version))
    upgrade = (f"upgrade containerd to {'.'.join(map(str, first))} or later"
               if first else "upgrade containerd")
    decoded = read_decoded(ctx.options.node, spec.path)
    needs = minimum_version(decoded, as_loader=True) if decoded else None
    if needs is not None and version_key(needs) > version_key(newest):
        return f"{upgrade}: the spec's content needs cdiVersion {needs}"
    node = ctx.options.node
    if node.node_path(spec.path) == node.node_path(node.path(CDI_SPEC)):
        how = "gpuready cdi generate --force writes the lowest version its content needs"
    else:
        how = "with the tool that wrote it"
    return f"regenerate {spec.path} at cdiVersion {needs or newest} ({how}), or {upgrade}"


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    CdiVersionTooNew(),
    NriModeNotReady(),
    DraNotReady(),
)
