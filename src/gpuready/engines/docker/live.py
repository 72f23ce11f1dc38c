"""The running dockerd: reload its config, compare what it loaded with daemon.json, probe it.

dockerd re-reads ``runtimes`` and ``default-runtime`` on SIGHUP, so registering a runtime needs
no restart. But a reload it refuses (a runtime named ``runc``, a ``default-runtime`` naming no
runtime, an unknown key) is only logged, and the old runtimes stay: the only proof is to ask
``/info`` afterwards, which :func:`reload` does.
"""

from __future__ import annotations

import io
import os
import signal
import tarfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuready.cri.live import CheckResult, Outcome, live_verdict
from gpuready.engines.docker.api import DockerApi, DockerApiError, socket_of
from gpuready.engines.docker.config import DaemonConfig
from gpuready.engines.docker.facts import supports_cdi
from gpuready.engines.docker.installed import parse_release
from gpuready.errors import RuntimeUnreachableError, UsageError

PROBE_REPO = "gpuready-probe"
PROBE_TAG = "busybox"
RELOAD_TIMEOUT_S = 10.0
# Runtimes dockerd registers itself (20.10 lists the shims beside runc in /info).
BUILTIN_RUNTIMES = frozenset({"runc", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux"})


@dataclass(frozen=True)
class LiveDocker:
    """What dockerd reports in ``/info``."""

    version: str
    runtimes: dict[str, dict[str, Any]]
    default_runtime: str | None
    cgroup_driver: str | None

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> LiveDocker:
        """The fields gpuready compares, from a ``/info`` answer."""
        runtimes = info.get("Runtimes") or {}
        return cls(
            version=str(info.get("ServerVersion", "?")),
            runtimes={name: dict(value or {}) for name, value in runtimes.items()},
            default_runtime=info.get("DefaultRuntime"),
            cgroup_driver=info.get("CgroupDriver"),
        )

    @property
    def release(self) -> tuple[int, int] | None:
        """``(major, minor)`` of the server version."""
        return parse_release(f"version {self.version}")


@dataclass
class DockerProbe:
    """One throw-away container run through the runtime."""

    runtime: str
    ok: bool
    message: str
    container: str | None = None
    runtime_path: str | None = None
    runtime_args: list[str] | None = None
    exit_code: int | None = None
    removed: bool = False
    cleanup_error: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return asdict(self)


@dataclass
class DockerReport:
    """The outcome of ``verify --live --engine docker``."""

    address: str
    config_path: Path
    live: LiveDocker
    pid: int | None
    checks: list[CheckResult] = field(default_factory=list)
    probe: DockerProbe | None = None

    @property
    def ok(self) -> bool:
        """No check failed, and the probe (when run) ran and was removed."""
        return live_verdict(self.checks, self.probe)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``status`` is ``ok`` or ``failed``."""
        return {
            "status": "ok" if self.ok else "failed",
            "engine": "docker",
            "address": self.address,
            "config": str(self.config_path),
            "runtime": {"name": "dockerd", "version": self.live.version, "pid": self.pid},
            "default_runtime": self.live.default_runtime,
            "cgroup_driver": self.live.cgroup_driver,
            "runtimes": self.live.runtimes,
            "checks": [check.to_dict() for check in self.checks],
            "probe": self.probe.to_dict() if self.probe else None,
        }


def daemon_pid(address: str) -> int | None:
    """The pid of the dockerd listening on ``address`` (from /proc), or None."""
    from gpuready.cri.process import listening_inodes, pid_holding

    return pid_holding(listening_inodes(Path(socket_of(address))))


def live_state(address: str, *, timeout: float = 10.0) -> LiveDocker:
    """Ask dockerd's ``/info``."""
    return LiveDocker.from_info(DockerApi(address, timeout=timeout).info())


def reload(address: str, config: DaemonConfig, *,
           timeout: float = RELOAD_TIMEOUT_S) -> tuple[LiveDocker, str | None]:
    """SIGHUP the dockerd on ``address``, then wait until ``/info`` shows the file's runtimes.

    Returns what dockerd loaded, and a note when it keeps runtimes the file no longer has.
    Raises :class:`UsageError` when dockerd keeps its old runtimes: it refused the file, and said
    why only in its log.
    """
    api = DockerApi(address)
    api.info()  # reachable, and dockerd, before signalling anything
    pid = daemon_pid(address)
    if pid is None:
        raise RuntimeUnreachableError(f"{address}: cannot tell which process serves the socket "
                                      "(run as root), so cannot send it SIGHUP")
    os.kill(pid, signal.SIGHUP)
    wanted = {name: value.get("path") for name, value in config.runtimes().items()
              if isinstance(value, dict)}
    deadline = time.monotonic() + timeout
    while True:
        live = LiveDocker.from_info(api.info())
        loaded = {name: live.runtimes.get(name, {}).get("path") for name in wanted}
        stale = _stale_runtimes(live, config)
        if loaded == wanted and (not stale or "runtimes" not in config.data):
            return live, _stale_note(stale)
        if time.monotonic() > deadline:
            raise UsageError(
                f"dockerd (pid {pid}) did not load {config.path} on SIGHUP: it keeps runtimes "
                f"{', '.join(sorted(live.runtimes)) or 'none'}. A reload dockerd refuses is only "
                "logged (journalctl -u docker); run 'gpuready lint --engine docker' on the file"
            )
        time.sleep(0.1)


def _stale_runtimes(live: LiveDocker, config: DaemonConfig) -> list[str]:
    """Live runtimes the file does not have (dockerd's built-in ones aside)."""
    return sorted(name for name in live.runtimes
                  if name not in BUILTIN_RUNTIMES and name not in config.runtimes())


def _stale_note(stale: list[str]) -> str | None:
    # dockerd re-reads "runtimes" on SIGHUP only when the file sets the key: with the key gone
    # (as unconfigure leaves a file that had none) it keeps the runtimes it has until a restart.
    if not stale:
        return None
    return (f"dockerd keeps runtime {', '.join(stale)} until it restarts: a reload re-reads "
            "runtimes only when daemon.json has the key (systemctl restart docker)")


def compare(config: DaemonConfig, live: LiveDocker, *, runtime_name: str) -> list[CheckResult]:
    """daemon.json on disk against what dockerd loaded."""
    checks = [_runtime_check(config, live, runtime_name)]
    default = live.default_runtime
    on_disk = config.data.get("default-runtime", "runc")
    if default != on_disk:
        checks.append(CheckResult("default-runtime", Outcome.FAILED,
                                  f"default runtime is {default} live but {on_disk} in "
                                  f"{config.path}: reload dockerd", on_disk, default))
    elif default == runtime_name:
        checks.append(CheckResult("default-runtime", Outcome.WARNING,
                                  f"default runtime is {default}: every container uses it",
                                  on_disk, default))
    else:
        checks.append(CheckResult("default-runtime", Outcome.OK,
                                  f"default runtime is {default}", on_disk, default))
    checks += _cdi_check(config, live)
    return checks


def _runtime_check(config: DaemonConfig, live: LiveDocker, name: str) -> CheckResult:
    entry = config.runtimes().get(name)
    disk_path = entry.get("path") if isinstance(entry, dict) else None
    loaded = live.runtimes.get(name)
    live_path = loaded.get("path") if loaded else None
    if loaded is None:
        where = (f"it is in {config.path} but dockerd has not loaded it: reload dockerd "
                 "(kill -HUP), or dockerd refused the file (its log says why)"
                 if disk_path else f"it is not in {config.path} either: run 'gpuready "
                 f"configure --engine docker --runtime-name {name}'")
        return CheckResult("runtime", Outcome.FAILED, f"runtime {name} is not live: {where}",
                           disk_path, None)
    if disk_path is not None and disk_path != live_path:
        return CheckResult("runtime", Outcome.FAILED,
                           f"runtime {name} runs {live_path} live but {config.path} says "
                           f"{disk_path}: reload dockerd", disk_path, live_path)
    return CheckResult("runtime", Outcome.OK, f"runtime {name} is live: path {live_path}",
                       disk_path, live_path)


def _cdi_check(config: DaemonConfig, live: LiveDocker) -> list[CheckResult]:
    features = config.data.get("features")
    if not (isinstance(features, dict) and features.get("cdi") is True):
        return []
    if supports_cdi(live.release) is False:
        return [CheckResult("cdi", Outcome.WARNING,
                            f"features.cdi is set but dockerd {live.version} ignores it (CDI "
                            "needs Docker 25.0 or later)", True, None)]
    return [CheckResult("cdi", Outcome.OK, f"features.cdi is set; dockerd {live.version} reads "
                        "it", True, True)]


def probe_archive(binary: Path) -> bytes:
    """A root file system with only ``/bin/busybox`` (a static binary), as a tar."""
    if not binary.is_file():
        raise UsageError(f"{binary}: no such file (install busybox-static, or pass "
                         "--probe-binary)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = archive.gettarinfo(str(binary), arcname="bin/busybox")
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = 0o755
        with binary.open("rb") as handle:
            archive.addfile(info, handle)
    return buffer.getvalue()


def run_probe(address: str, *, runtime: str, binary: Path, timeout: float) -> DockerProbe:
    """Run ``/bin/busybox true`` in a throw-away container through ``runtime``, no network,
    from an image imported from ``binary``; remove the container (and the image if it was
    imported here) whatever happens."""
    api = DockerApi(address, timeout=timeout)
    image = f"{PROBE_REPO}:{PROBE_TAG}"
    imported = False
    started = time.monotonic()
    result = DockerProbe(runtime=runtime, ok=False, message="not started")
    try:
        if not api.image_exists(image):
            api.import_image(probe_archive(binary), repo=PROBE_REPO, tag=PROBE_TAG)
            imported = True
        _run_container(api, result, image=image, timeout=timeout)
    finally:
        _clean_up(api, result, image=image if imported else None)
        result.seconds = round(time.monotonic() - started, 2)
    return result


def _run_container(api: DockerApi, result: DockerProbe, *, image: str, timeout: float) -> None:
    spec = {"Image": image, "Cmd": ["/bin/busybox", "true"], "NetworkDisabled": True,
            "HostConfig": {"Runtime": result.runtime, "NetworkMode": "none"},
            "Labels": {"io.gpuready.probe": "true"}}
    try:
        result.container = api.create_container(spec, name=f"gpuready-probe-{uuid.uuid4().hex[:8]}")
        api.start_container(result.container)
        status = api.wait_container(result.container, timeout=timeout)
    except DockerApiError as error:
        result.message = f"dockerd could not run a container through {result.runtime}: {error}"
        return
    inspected = api.inspect_container(result.container)
    # What dockerd hands containerd's runc shim for this runtime: the binary to call instead of
    # runc (BinaryName) and the arguments put before runc's own (runtimeArgs).
    loaded = api.info().get("Runtimes", {}).get(result.runtime) or {}
    result.runtime_path = loaded.get("path")
    result.runtime_args = list(loaded.get("runtimeArgs") or [])
    result.exit_code = int((status or {}).get("StatusCode", -1))
    used = inspected.get("HostConfig", {}).get("Runtime")
    result.ok = result.exit_code == 0 and used == result.runtime
    result.message = (f"container {result.container[:12]} ran /bin/busybox true through runtime "
                      f"{used}: dockerd passed binary {result.runtime_path} with runtimeArgs "
                      f"{result.runtime_args}, exit code {result.exit_code}")


def _clean_up(api: DockerApi, result: DockerProbe, *, image: str | None) -> None:
    try:
        if result.container:
            api.remove_container(result.container)
        result.removed = True
        if image:
            api.remove_image(image)
    except (DockerApiError, RuntimeUnreachableError) as error:
        result.cleanup_error = f"cleanup failed: {error.message()}"
