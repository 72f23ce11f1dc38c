"""``gpuready verify --live``: ask the running containerd, compare, and optionally probe.

:func:`verify_live` does the work and returns a :class:`LiveReport` (data only); the command line
renders it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready.containerd import decoding, facts
from gpuready.containerd.decoding import Line
from gpuready.containerd.document import ConfigFile, load_config
from gpuready.containerd.versions import parse_release, spec_of
from gpuready.cri import live as live_checks
from gpuready.cri.client import CriClient, RuntimeVersion, socket_path
from gpuready.cri.live import (
    CheckResult,
    Comparison,
    LiveConfig,
    LiveRuntime,
    live_verdict,
)
from gpuready.cri.probe import ProbeResult, RuntimeIntent, run_probe
from gpuready.cri.process import ServingProcess, serving_process
from gpuready.errors import CriNotLoadedError, GpureadyError, UsageError, VerificationError
from gpuready.node import Node

PROBE_IMAGE_MODES = ("node", "build")


@dataclass(frozen=True)
class VerifyOptions:
    """What ``gpuready verify --live`` was asked to do."""

    address: str
    config_path: Path
    root: Path = Path("/")
    runtime_name: str = "nvidia"
    handler: str = "nvidia"
    runtimeclass_files: tuple[Path, ...] = ()
    probe: bool = False
    probe_image: str = "node"
    probe_binary: Path = Path("/bin/busybox")
    timeout: float = 10.0
    probe_timeout: float = 60.0
    containerd_version: str | None = None  # the line the operator says the node runs
    # judge the loaded runtimes' SystemdCgroup by whether systemd runs on the node: verify
    # --live does; the restart transaction does not (its --probe meets the fact itself)
    judge_systemd: bool = False


@dataclass
class PauseImage:
    """The pause image the probe needs: its name, whether it was there, whether we built it."""

    name: str | None
    present: bool | None
    built: bool = False


@dataclass
class LiveReport:
    """The outcome of a live verification."""

    address: str
    config_path: Path
    version: RuntimeVersion
    runtimes: dict[str, LiveRuntime]
    default_runtime_name: str | None
    served_by: ServingProcess | None
    checks: list[CheckResult] = field(default_factory=list)
    probe: ProbeResult | None = None
    pause_image: PauseImage | None = None

    @property
    def ok(self) -> bool:
        """No check failed, and the probe (when run) came up and was cleaned up."""
        return live_verdict(self.checks, self.probe)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``status`` is ``ok`` or ``failed``."""
        return {
            "status": "ok" if self.ok else "failed",
            "address": self.address,
            "config": str(self.config_path),
            "runtime": {
                "name": self.version.runtime_name,
                "version": self.version.runtime_version,
                "cri_api": self.version.runtime_api_version,
                "pid": self.served_by.pid if self.served_by else None,
                "config": str(self.served_by.config_path) if self.served_by else None,
            },
            "default_runtime_name": self.default_runtime_name,
            "runtimes": {name: rt.to_dict() for name, rt in sorted(self.runtimes.items())},
            "checks": [check.to_dict() for check in self.checks],
            "probe": self.probe.to_dict() if self.probe else None,
            "pause_image": vars(self.pause_image) if self.pause_image else None,
        }


def air_gap_hint(image: str, address: str) -> str:
    """What to do when the pause image is missing and cannot be pulled: the ``ctr`` command
    that imports it into the containerd at ``address`` (the CRI's image namespace)."""
    return (
        f"the pause image {image} is not on the node and could not be pulled; on an air-gapped "
        f"node import it ({ctr_command(address, 'import pause.tar')}, with {image} inside) or "
        "rerun with --probe-image build"
    )


def ctr_command(address: str, images: str) -> str:
    """``ctr --address SOCKET -n k8s.io images ...`` for the containerd at ``address``: ctr
    asks the machine's default socket unless told, and the CRI's images live in ``k8s.io``
    (:data:`gpuready.cri.probe_image.CRI_NAMESPACE`, not imported here: it loads tarfile)."""
    return f"ctr --address {socket_path(address)} -n k8s.io images {images}"


def pause_image_name(
    live: LiveConfig, disk: ConfigFile, version: RuntimeVersion
) -> str | None:
    """The pause image the running containerd uses.

    1.6 reports it live (``sandboxImage``); 2.x does not report it at all, so it is the file's
    ``pinned_images.sandbox`` (``sandbox_image`` for a version 2 file), else the running
    release's default.
    """
    named = live.sandbox_image or live_checks.disk_sandbox_image(
        disk.data, spec_of(disk.data, path=disk.path)
    )
    if named:
        return named
    release = parse_release(version.runtime_version or "")
    return facts.DEFAULT_SANDBOX_IMAGE.get(release) if release else None


def ensure_pause_image(
    client: CriClient,
    options: VerifyOptions,
    live: LiveConfig,
    disk: ConfigFile,
    version: RuntimeVersion,
) -> PauseImage:
    """Find the configured pause image; build and import a local one when asked and absent."""
    name = pause_image_name(live, disk, version)
    if name is None:
        if options.probe_image == "build":
            raise UsageError(
                "cannot tell the pause image's name (none live, none in the file "
                "(sandbox_image or pinned_images.sandbox), and no recorded default for "
                f"containerd {version.runtime_version})"
            )
        return PauseImage(name=None, present=None)
    image = PauseImage(name=name, present=client.image_present(name))
    if image.present or options.probe_image != "build":
        return image
    from gpuready.cri import probe_image  # lazy: only the offline build needs tarfile and ctr

    with tempfile.TemporaryDirectory(prefix="gpuready-probe-") as folder:
        built = probe_image.build_archive(options.probe_binary, name, Path(folder) / "probe.tar")
        probe_image.import_archive(built.archive, socket=socket_path(client.address))
    image.built = True
    image.present = client.image_present(name)
    return image


def intent_of(loaded: LiveRuntime | None) -> RuntimeIntent | None:
    """What the loaded runtime's options mean to run: the field name's value, else any other
    spelling's (an operator who wrote ``binary_name`` meant a BinaryName)."""
    if loaded is None:
        return None
    binary = decoding.intended_value(loaded.options, "BinaryName")
    return RuntimeIntent(
        runtime_type=loaded.runtime_type or None,
        binary_name=binary if isinstance(binary, str) and binary else None,
        systemd_cgroup=decoding.intended_value(loaded.options, "SystemdCgroup") is True,
    )


def probe(
    client: CriClient,
    options: VerifyOptions,
    live: LiveConfig,
    disk: ConfigFile,
    version: RuntimeVersion,
) -> tuple[ProbeResult, PauseImage]:
    """Run the sandbox probe through the handler, with the pause image taken care of."""
    image = ensure_pause_image(client, options, live, disk, version)
    loaded = live.runtimes.get(options.handler)
    decoded = loaded.field("SystemdCgroup") if loaded else None
    intent = intent_of(loaded)
    if decoded is not None and decoded.known:
        systemd = decoded.value is True
    else:
        systemd = bool(intent and intent.systemd_cgroup)
    result = run_probe(
        client,
        handler=options.handler,
        systemd_cgroup=systemd,
        timeout=options.probe_timeout,
        intent=intent,
    )
    if not result.ok and image.present is False and image.name:
        result.message = f"{result.message}; {air_gap_hint(image.name, client.address)}"
    return result, image


def running_lines(version: RuntimeVersion) -> tuple[Line, ...]:
    """The recorded containerd lines whose option decoding applies to the running release."""
    release = parse_release(version.runtime_version or "")
    major = release[0] if release else 2
    return decoding.lines_for(major=major, release=release)


def line_check(expected: str, version: RuntimeVersion) -> live_checks.CheckResult:
    """The running containerd is of the line ``--containerd-version`` names (the line every
    static verdict about this node was given for)."""
    from gpuready.containerd.lines import from_release_text, line_for_release

    wanted = from_release_text(expected, source="--containerd-version").line
    release = parse_release(version.runtime_version or "")
    running = line_for_release(release)[0] if release else None
    outcome = live_checks.Outcome.OK if running == wanted else live_checks.Outcome.FAILED
    shown = version.runtime_version or "an unknown release"
    return live_checks.CheckResult(
        "containerd line", outcome,
        f"the running containerd is {shown} ({running or 'no line gpuready models'}); "
        f"--containerd-version says {wanted}", on_disk=str(wanted), live=shown)


SYSTEMD_CHECK = "cgroup drivers agree"


def systemd_checks(options: VerifyOptions, live: LiveConfig,
                   lines: tuple[Line, ...]) -> list[live_checks.CheckResult]:
    """A failed check when the node shows no systemd and a loaded runc runtime has
    ``SystemdCgroup = true``: its first sandbox fails, whatever the comparison says. The
    verdict and the fix are doctor's (``systemd-cgroup-without-systemd``). Only with
    ``options.judge_systemd``."""
    from gpuready.errors import InputError
    from gpuready.init_system import systemd_fact
    from gpuready.kubernetes import kubelet
    from gpuready.rules.options import NO_SYSTEMD_RULE, cgroup_verdict

    node = Node(options.root)
    if not options.judge_systemd:
        return []
    systemd = systemd_fact(node)
    if not systemd.absent:
        return []
    try:
        driver, kubelet_file = kubelet.cgroup_driver(node)
    except InputError:  # the kubelet's own bad file is doctor's to report
        driver, kubelet_file = None, None
    loaded = {name: {"runtime_type": runtime.runtime_type, "options": dict(runtime.options)}
              for name, runtime in live.runtimes.items()}
    verdict = cgroup_verdict(loaded, options.runtime_name, lines=lines, kubelet_driver=driver,
                             kubelet_file=kubelet_file, systemd=systemd)
    if verdict is None or verdict.rule != NO_SYSTEMD_RULE:
        return []
    return [live_checks.CheckResult(
        SYSTEMD_CHECK, live_checks.Outcome.FAILED,
        f"{NO_SYSTEMD_RULE}: {verdict.message} (live); fix: {verdict.fix}, then restart "
        "containerd", on_disk=None, live=verdict.runtime)]


def transaction_checks(options: VerifyOptions) -> list[live_checks.CheckResult]:
    """A failed check when a killed ``--restart`` left its journal beside the config: what runs
    may not be what the files say. Reported only; a reading command never finishes it."""
    from gpuready.workflow import journal

    message = journal.pending_message(Node(options.root), options.config_path)
    if message is None:
        return []
    return [live_checks.CheckResult("transaction pending", live_checks.Outcome.FAILED,
                                    f"{message}; {journal.PENDING_FIX}")]


def _not_loaded_message(error: CriNotLoadedError, options: VerifyOptions, disk) -> str:
    """containerd answered without CRI: the cause the model finds in the files it was started
    on (the same file and reason doctor, lint and check give), else the daemon's answer."""
    from gpuready.containerd.lines import node_line
    from gpuready.containerd.model import load_node

    try:
        line = node_line(root=options.root, flag=options.containerd_version,
                         config_version=disk.data.get("version"))
        loaded = load_node(disk.path, node=Node(options.root), line=line)
    except GpureadyError:
        return error.message()
    cause = loaded.cause
    if cause is None:
        return error.message()
    where = f"{cause.file}: " if cause.file is not None else ""
    fix = f"; fix: {cause.fix}" if cause.fix else ""
    return (f"containerd answers on {socket_path(options.address)} but its CRI plugin did not "
            f"load ({line.label}): {where}{cause.message}{fix}")


def verify_live(options: VerifyOptions, *, connect=CriClient) -> LiveReport:
    """Compare the running containerd with the file on disk, check RuntimeClasses, and probe.

    ``connect(address, timeout=...)`` opens the CRI client (:class:`CriClient` on this machine).
    """
    disk = load_config(options.config_path, node=Node(options.root))
    spec_of(disk.data, path=disk.path)  # an unknown version is bad input, before connecting
    classes = [  # bad YAML is bad input, found before connecting
        found
        for path in options.runtimeclass_files
        for found in live_checks.load_runtimeclasses(path)
    ]
    with connect(options.address, timeout=options.timeout) as client:
        try:
            version = client.version()
        except CriNotLoadedError as error:
            raise CriNotLoadedError(_not_loaded_message(error, options, disk)) from None
        config = client.status(verbose=True).config()
        if config is None:
            raise VerificationError(
                f"{socket_path(client.address)}: the runtime does not report its loaded config "
                "(CRI Status verbose info has no 'config'); is it containerd?"
            )
        lines = running_lines(version)
        live = live_checks.parse_live_config(config, lines=lines)
        # which process serves the socket, where this machine's /proc can tell
        served = serving_process(socket_path(client.address)) if client.local else None
        context = Comparison(
            runtime_name=options.runtime_name,
            handler=options.handler,
            root=options.root,
            served_by=served,
            lines=lines,
        )
        report = LiveReport(
            address=client.address,
            config_path=disk.path,
            version=version,
            runtimes=dict(live.runtimes),
            default_runtime_name=live.default_runtime_name,
            served_by=served,
            checks=live_checks.compare(disk, live, context),
        )
        report.checks += live_checks.runtimeclass_checks(classes, disk, live, context)
        if options.containerd_version:
            report.checks.append(line_check(options.containerd_version, version))
        report.checks += systemd_checks(options, live, lines)
        report.checks += transaction_checks(options)
        if options.probe:
            report.probe, report.pause_image = probe(client, options, live, disk, version)
    return report
