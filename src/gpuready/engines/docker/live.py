"""The running dockerd: reload its config, compare what it loaded with daemon.json, probe it.

dockerd re-reads ``runtimes`` and ``default-runtime`` on SIGHUP, so registering a runtime needs
no restart. But a reload it refuses (a runtime named ``runc``, a ``default-runtime`` naming no
runtime, an unknown key) is only logged, and the old settings stay: :func:`reload` waits for the
event dockerd emits only for a reload it accepted, then asks ``/info`` what it loaded.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import stat
import tarfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuready.cri.live import CheckResult, Outcome, live_verdict
from gpuready.engines.docker.api import DockerApi, DockerApiError, socket_of
from gpuready.engines.docker.config import DaemonConfig
from gpuready.engines.docker.facts import supports_cdi
from gpuready.engines.docker.installed import parse_release
from gpuready.errors import ExitCode, GpureadyError, RuntimeUnreachableError, UsageError

if TYPE_CHECKING:
    from gpuready.engines.docker.address import DockerAddress

# The event a reload dockerd accepted leaves on its event stream, and the line it logs first.
RELOAD_EVENTS = {"type": ["daemon"], "event": ["reload"]}
RELOAD_LOGGED = "Got signal to reload configuration"
# How dockerd's own reload code (20.10 and later) begins the error it logs for a reload it did not
# take: reading, checking or applying the file. Any other error line is not about the reload (a
# busy daemon logs many). 20.10 logs the error as the message; later releases log "Error
# reloading configuration" or "Error reconfiguring the daemon" with the cause in an error field.
RELOAD_FAILURES = (
    "unable to configure the Docker daemon with file",
    "file configuration validation failed",
    "conflict labels for",
    "Error reloading configuration",
    "Error reconfiguring the daemon",
    "Error validating authorization plugin",  # fatal: dockerd exits
)
REFUSAL_GRACE_S = 0.5  # after a refusal in the log, how long the event may still come
MAX_LOG_BYTES = 1024 * 1024
JOURNAL_EVERY_S = 0.5  # the journal is asked at most this often while a reload is awaited
# One key=value field of a logfmt line (logrus's text format): a quoted value or a bare one.
_LOGFMT_FIELD = re.compile(r'([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)')
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
    address_source: str = "default"  # "option", "DOCKER_HOST" or "default"

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
            "address_source": self.address_source,
            "config": str(self.config_path),
            "runtime": {"name": "dockerd", "version": self.live.version, "pid": self.pid},
            "default_runtime": self.live.default_runtime,
            "cgroup_driver": self.live.cgroup_driver,
            "runtimes": self.live.runtimes,
            "checks": [check.to_dict() for check in self.checks],
            "probe": self.probe.to_dict() if self.probe else None,
        }


def daemon_pid(address: str | DockerAddress) -> int | None:
    """The pid of the dockerd listening on ``address`` (from /proc), or None."""
    from gpuready.cri.process import listening_inodes, pid_holding

    return pid_holding(listening_inodes(Path(socket_of(address))))


def live_state(address: str | DockerAddress, *, timeout: float = 10.0) -> LiveDocker:
    """Ask dockerd's ``/info``."""
    return LiveDocker.from_info(DockerApi(address, timeout=timeout).info())


class ReloadError(GpureadyError):
    """dockerd refused the reload (no reload event came): a failure with the daemon's reason,
    after which ``configure``/``unconfigure`` put every file back (exit 1)."""

    exit_code = ExitCode.CHECK_FAILED


class ReadBackError(GpureadyError):
    """dockerd accepted the reload (its reload event came), but what it loaded could not be
    confirmed: ``/info`` failed, or shows runtimes other than the file's. The file is what
    dockerd took, so nothing is put back; exit 3 when dockerd became unreachable, else 1."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.CHECK_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def reload(address: str | DockerAddress, config: DaemonConfig, *,
           timeout: float = RELOAD_TIMEOUT_S) -> tuple[LiveDocker, str | None]:
    """SIGHUP the dockerd on ``address``, and tell whether it took the file:
    :func:`await_reload`, then :func:`read_back`.

    Returns what dockerd loaded, and a note when it keeps runtimes the file no longer has.
    Raises :class:`ReloadError` (exit 1) when dockerd refused the file, and
    :class:`ReadBackError` when it took it but what it loaded cannot be confirmed.
    """
    pid = await_reload(address, config, timeout=timeout)
    return read_back(address, config, pid=pid)


def await_reload(address: str | DockerAddress, config: DaemonConfig, *,
                 timeout: float = RELOAD_TIMEOUT_S) -> int:
    """SIGHUP the dockerd on ``address`` and wait until it accepted the reload; its pid.

    dockerd answers a SIGHUP only in its log, so gpuready asks its Engine API instead: a reload
    dockerd accepts ends with a ``reload`` event on its event stream (dockerd emits that event
    only when the reload returned no error), and a refused one (an unknown key, a runtime named
    ``runc``, a key given both as a flag and in the file) has none. gpuready waits for that
    event, which holds for every cause of a refusal, including those it cannot foresee. Where
    the daemon's log can be read (a log file, or the journal), one of dockerd's own reload-failure
    messages ends the wait early and gives dockerd's reason; other error lines are ignored. The
    event stream is asked once more before a refusal is declared: once the event was seen, the
    reload is never called refused.

    Raises :class:`ReloadError` (exit 1) when no reload event came.
    """
    api = DockerApi(address)
    shown = api.address
    pid = reload_target(address)
    log = DaemonLog(pid)
    since = time.time_ns()
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    refused_at = None

    def accepted() -> bool:
        return bool(api.events(since_ns=since, until_ns=time.time_ns(), filters=RELOAD_EVENTS))

    while not accepted():
        reason = log.refusal()
        now = time.monotonic()
        if reason is not None and refused_at is None:
            refused_at = now  # dockerd's refusal in its log: give the event a moment still
        if now > deadline or (refused_at is not None and now - refused_at > REFUSAL_GRACE_S):
            if accepted():  # the event came after all: the reload was taken
                return pid
            because = reason or (f"no reload event within {timeout:g}s (dockerd says why "
                                 "only in its log: journalctl -u docker)")
            raise ReloadError(f"dockerd (pid {pid}) at {shown} refused to reload "
                              f"{config.path}: {because}")
        time.sleep(0.05)
    return pid


def read_back(address: str | DockerAddress, config: DaemonConfig, *,
              pid: int) -> tuple[LiveDocker, str | None]:
    """After the reload event: ``/info`` must show the file's runtimes (else dockerd reads
    another file). What dockerd loaded, and a note when it keeps runtimes the file no longer has.

    Raises :class:`ReadBackError`: exit 3 when dockerd no longer answers, else 1.
    """
    api = DockerApi(address)
    shown = api.address
    wanted = {name: value.get("path") for name, value in config.runtimes().items()
              if isinstance(value, dict)}
    deadline = time.monotonic() + 1.0  # the event follows the reload; /info has it by then
    while True:
        try:
            live = LiveDocker.from_info(api.info())
        except (GpureadyError, ValueError, OSError) as error:
            why = error.message() if isinstance(error, GpureadyError) else str(error)
            code = (ExitCode.UNREACHABLE if isinstance(error, RuntimeUnreachableError)
                    else ExitCode.CHECK_FAILED)
            raise ReadBackError(
                f"dockerd (pid {pid}) at {shown} accepted the reload of {config.path} (its reload "
                f"event came), but what it loaded cannot be read: /info failed: {why}",
                code) from None
        loaded = {name: live.runtimes.get(name, {}).get("path") for name in wanted}
        stale = _stale_runtimes(live, config)
        if loaded == wanted and (not stale or "runtimes" not in config.data):
            return live, _stale_note(stale)
        if time.monotonic() > deadline:
            raise ReadBackError(
                f"dockerd (pid {pid}) at {shown} reloaded, but not {config.path}: it has runtimes "
                f"{', '.join(sorted(live.runtimes)) or 'none'}, so it reads another file "
                "(its --config-file)")
        time.sleep(0.1)


def reload_target(address: str | DockerAddress) -> int:
    """The pid of the dockerd on ``address``, the process a reload signals: asked before
    anything is written, so that an unreachable dockerd (exit 3) leaves every file as it was."""
    api = DockerApi(address)
    api.info()  # reachable, and dockerd
    pid = daemon_pid(address)
    if pid is None:
        raise RuntimeUnreachableError(f"{api.address}: cannot tell which process serves the "
                                      "socket (run as root), so cannot send it SIGHUP")
    return pid


class DaemonLog:
    """What dockerd logs from now on, where gpuready can read it: its standard error when that
    is a file, else the journal (``journalctl _PID=``); nothing when neither can be read."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.since = time.time()
        self.file: str | None = None
        self.offset = 0
        self.read_at = 0.0  # when the journal was last asked, and what it said
        self.journal = ""
        for fd in (2, 1):
            path = f"/proc/{pid}/fd/{fd}"
            try:
                status = os.stat(path)
            except OSError:
                continue
            if stat.S_ISREG(status.st_mode):
                self.file, self.offset = path, status.st_size
                break

    def text(self) -> str:
        """What dockerd logged since this object was made (as far as it can be read)."""
        if self.file is not None:
            try:
                with open(self.file, "rb") as handle:
                    handle.seek(self.offset)
                    return handle.read(MAX_LOG_BYTES).decode("utf-8", "replace")
            except OSError:
                return ""
        return self._journal()

    def _journal(self) -> str:
        import shutil
        import subprocess

        journalctl = shutil.which("journalctl")
        if journalctl is None or time.monotonic() - self.read_at < JOURNAL_EVERY_S:
            return self.journal
        self.read_at = time.monotonic()
        try:
            result = subprocess.run(
                [journalctl, f"_PID={self.pid}", f"--since=@{int(self.since)}", "--output=cat",
                 "--no-pager", "--quiet"], capture_output=True, text=True, timeout=5.0)
        except (OSError, subprocess.SubprocessError):
            return self.journal
        if result.returncode == 0:
            self.journal = result.stdout
        return self.journal

    def refusal(self) -> str | None:
        """dockerd's reason for refusing the reload, once it logged one after the signal."""
        return reload_refusal(self.text())


def reload_refusal(text: str) -> str | None:
    """dockerd's reason for refusing a reload, from its log ``text``: the first of its own
    reload-failure messages (:data:`RELOAD_FAILURES`) logged after "Got signal to reload
    configuration", with the cause when it is logged apart; else None. Other error lines (a
    busy daemon logs many, unrelated to the reload) are not a refusal."""
    start = text.find(RELOAD_LOGGED)
    if start < 0:
        return None
    for line in text[start:].splitlines()[1:]:
        entry = _error_entry(line)
        if entry is None:
            continue
        message, cause = entry
        if message.startswith(RELOAD_FAILURES):
            return f"{message}: {cause}" if cause and cause not in message else message
    return None


def _error_entry(line: str) -> tuple[str, str | None] | None:
    """The message and the ``error`` field of an error (or fatal) line of dockerd's log
    (logfmt, as dockerd writes it, or JSON), else None."""
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        if not isinstance(entry, dict) or entry.get("level") not in ("error", "fatal"):
            return None
        fields = {key: str(value) for key, value in entry.items() if value is not None}
    else:
        fields = {key: _logfmt_value(value) for key, value in _LOGFMT_FIELD.findall(line)}
        if fields.get("level") not in ("error", "fatal"):
            return None
    message = " ".join(fields.get("msg", "").split())
    cause = " ".join(fields.get("error", "").split()) or None
    return (message, cause) if message else None


def _logfmt_value(value: str) -> str:
    """A logfmt value as written: bare, or quoted as Go's %q does (JSON's escapes, and a few
    more)."""
    if not value.startswith('"'):
        return value
    try:
        return str(json.loads(value))
    except ValueError:
        return value[1:-1].replace('\\"', '"').replace("\\n", " ")


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


def run_probe(address: str | DockerAddress, *, runtime: str, binary: Path,
              timeout: float) -> DockerProbe:
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
