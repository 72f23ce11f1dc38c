"""A reload dockerd refuses is a failure, and nothing is left changed; a daemon.json dockerd
would refuse is not written at all.

dockerd answers SIGHUP only in its log. These tests make a real dockerd (Debian's docker.io, on a
private socket) refuse reloads for reasons gpuready cannot see in the file alone (a key the daemon
was also given as a flag), check that gpuready reports the refusal with dockerd's reason, exits 1
and puts every file back byte for byte, and that it still tells a refusal from a success when the
daemon's log cannot be read at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpuready.engines.docker import live
from gpuready.engines.docker.api import DockerApi, DockerApiError
from gpuready.engines.docker.config import parse_daemon_config
from gpuready.errors import RuntimeUnreachableError
from tests import cli_runner
from tests.harness.containerd import short_tempdir
from tests.harness.dockerd import Dockerd
from tests.harness.standin import write_standin
from tests.helpers import BUSYBOX, require, run_cli

# The harness starts dockerd with --storage-driver=vfs: the same key in daemon.json makes dockerd
# refuse the file on reload ("specified both as a flag and in the configuration file"), a refusal
# no key table can foresee, as on a node whose unit file passes -H and daemon.json has "hosts".
FLAG_TOO = {"storage-driver": "vfs"}
DOCKERD_SAYS = "specified both as a flag and in the configuration file: storage-driver"


def start(quiet: bool = False) -> Dockerd:
    require(binaries=("dockerd", "docker", "runc"), files=(BUSYBOX,))
    folder = short_tempdir()
    daemon = Dockerd(folder, quiet=quiet)
    daemon.standin = write_standin(folder / "standin", log=folder / "standin.log")
    try:
        return daemon.start()
    except BaseException:
        daemon.remove()
        raise


@pytest.fixture
def dockerd():
    """A started dockerd whose log gpuready can read (it goes to a file)."""
    daemon = start()
    try:
        yield daemon
    finally:
        daemon.remove()


@pytest.fixture
def quiet_dockerd():
    """A started dockerd whose output goes to /dev/null: no log for gpuready to read."""
    daemon = start(quiet=True)
    try:
        yield daemon
    finally:
        daemon.remove()


def configure(daemon: Dockerd, *extra: str):
    return run_cli("configure", "--engine", "docker", "--config", str(daemon.config_path),
                   "--binary", str(daemon.standin), "--address", daemon.address, *extra)


def edit(daemon: Dockerd, **keys) -> bytes:
    """Change daemon.json by hand (as an operator would); its new bytes."""
    data = json.loads(daemon.config_path.read_text())
    for key, value in keys.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    daemon.config_path.write_text(json.dumps(data, indent=4) + "\n")
    return daemon.config_path.read_bytes()


def folder_files(daemon: Dockerd) -> list[str]:
    return sorted(path.name for path in daemon.folder.glob("daemon.json*"))


def live_runtimes(daemon: Dockerd) -> dict:
    out = subprocess.run([shutil.which("docker"), "-H", daemon.address, "info", "--format",
                          "{{json .Runtimes}}"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return json.loads(out)


def error_line(result) -> str:
    lines = [line for line in result.err.splitlines() if line.startswith("gpuready: error:")]
    assert len(lines) == 1 and "Traceback" not in result.err, result.err
    return lines[0]


def test_a_refused_reload_fails_with_dockerds_reason_and_puts_the_file_back(
        dockerd: Dockerd) -> None:
    before = edit(dockerd, **{"storage-driver": "vfs"})
    reloads = dockerd.reloads()
    result = configure(dockerd, "--reload")
    assert result.code == 1, result.out + result.err
    line = error_line(result)
    assert f"refused to reload {dockerd.config_path}" in line and DOCKERD_SAYS in line
    assert "put back byte for byte, nothing left changed" in line
    assert "reloaded:" not in result.out
    assert dockerd.reloads() == reloads + 1  # it was asked, and said no
    assert dockerd.config_path.read_bytes() == before
    assert folder_files(dockerd) == ["daemon.json"]  # no backup, no record left
    assert "nvidia" not in live_runtimes(dockerd)


def test_a_refused_reload_is_not_claimed_when_the_runtime_is_already_live(
        dockerd: Dockerd) -> None:
    """The runtime is registered and live; then the file gets a key dockerd refuses on reload.
    /info still shows the runtime, and that is no proof the reload was taken."""
    assert configure(dockerd, "--reload").code == 0
    assert "nvidia" in live_runtimes(dockerd)
    before = edit(dockerd, **FLAG_TOO)
    files = folder_files(dockerd)
    result = configure(dockerd, "--reload")
    assert result.code == 1, result.out + result.err
    assert "reloaded:" not in result.out and "has runtimes" not in result.out
    line = error_line(result)
    assert DOCKERD_SAYS in line and "this run had written nothing" in line
    assert dockerd.config_path.read_bytes() == before
    assert folder_files(dockerd) == files


def test_a_refused_reload_after_unconfigure_puts_back_every_file(dockerd: Dockerd) -> None:
    """unconfigure writes the file, removes gpuready's backup and its record: a refused reload
    gives all three back as they were."""
    assert configure(dockerd, "--reload").code == 0
    before = edit(dockerd, **FLAG_TOO)  # edited since gpuready wrote it
    kept = {name: (dockerd.folder / name).read_bytes() for name in folder_files(dockerd)}
    assert set(kept) == {"daemon.json", "daemon.json.gpuready.bak", "daemon.json.gpuready.json"}
    result = run_cli("unconfigure", "--engine", "docker", "--config", str(dockerd.config_path),
                     "--address", dockerd.address, "--reload")
    assert result.code == 1, result.out + result.err
    assert DOCKERD_SAYS in error_line(result)
    assert {name: (dockerd.folder / name).read_bytes() for name in folder_files(dockerd)} == kept
    assert dockerd.config_path.read_bytes() == before


def test_a_key_dockerd_refuses_is_refused_before_a_byte_is_written(dockerd: Dockerd) -> None:
    """A typo'd key ("default-runtimes") in a file whose runtime is live: dockerd 20.10 has no
    --validate, so gpuready's key table of that release refuses the file (exit 2) before
    anything is written or signalled, with or without --reload, and in a dry run."""
    assert configure(dockerd, "--reload").code == 0
    before = edit(dockerd, **{"default-runtimes": "nvidia"})
    os.utime(dockerd.config_path, (1_000_000_000, 1_000_000_000))
    files = folder_files(dockerd)
    reloads = dockerd.reloads()
    for extra in ((), ("--reload",), ("--dry-run",)):
        result = configure(dockerd, *extra)
        assert result.code == 2, result.out + result.err
        line = error_line(result)
        assert "dockerd 20.10 refuses the whole file" in line
        assert "'default-runtimes' is not a daemon.json key (line " in line
        assert "nothing written" in line
    assert dockerd.config_path.read_bytes() == before
    assert dockerd.config_path.stat().st_mtime == 1_000_000_000
    assert folder_files(dockerd) == files
    assert dockerd.reloads() == reloads  # no SIGHUP was sent


@pytest.mark.slow  # waits out the whole reload timeout (10 s): --slow runs it
def test_a_refusal_is_seen_without_the_daemon_log(quiet_dockerd: Dockerd) -> None:
    """With dockerd's output gone, only the Engine API tells: a reload it accepted leaves a
    reload event, a refused one none."""
    daemon = quiet_dockerd
    accepted = configure(daemon, "--reload")
    assert accepted.code == 0, accepted.err
    assert "reloaded: dockerd" in accepted.out
    before = edit(daemon, **FLAG_TOO, debug=True)
    result = configure(daemon, "--reload", "--runtime-name", "gpu")
    assert result.code == 1, result.out + result.err
    line = error_line(result)
    assert "refused to reload" in line and "no reload event within" in line
    assert "put back byte for byte" in line
    assert daemon.config_path.read_bytes() == before
    assert "gpu" not in live_runtimes(daemon)


def test_json_output_of_a_refused_reload(dockerd: Dockerd) -> None:
    edit(dockerd, **FLAG_TOO)
    result = configure(dockerd, "--reload", "--format", "json")
    assert result.code == 1
    document = json.loads(result.out)
    assert document["exit_code"] == 1 and DOCKERD_SAYS in document["error"]


def test_the_refusal_names_docker_host_when_the_address_came_from_it(
        dockerd: Dockerd, tmp_path: Path) -> None:
    edit(dockerd, **FLAG_TOO)
    result = run_cli("configure", "--engine", "docker", "--config", str(dockerd.config_path),
                     "--binary", str(dockerd.standin), "--reload",
                     env={"DOCKER_HOST": dockerd.address})
    assert result.code == 1
    assert f"at {dockerd.address} (from DOCKER_HOST) refused to reload" in error_line(result)


# -- only dockerd's own reload failures are refusals; after the reload event nothing is put back

SIGNALLED_20_10 = ('time="2024-05-02T10:00:00.000000000Z" level=info msg="Got signal to reload '
                   'configuration, reloading from: /etc/docker/daemon.json"')
SIGNALLED_LATER = ('time="2024-05-02T10:00:00.000000000Z" level=info msg="Got signal to reload '
                   'configuration" config-file=/etc/docker/daemon.json')
UNRELATED_ERROR = ('time="2024-05-02T10:00:00.100000000Z" level=error msg="Handler for GET '
                   '/v1.41/containers/gpuready-none/json returned error: No such container: '
                   'gpuready-none"')


@pytest.mark.parametrize(("lines", "reason"), [
    ([SIGNALLED_20_10, 'level=error msg="unable to configure the Docker daemon with file '
      '/etc/docker/daemon.json: the following directives don\'t match any configuration '
      'option: default-runtimes"'],
     "unable to configure the Docker daemon with file /etc/docker/daemon.json: the following "
     "directives don't match any configuration option: default-runtimes"),
    ([SIGNALLED_20_10, UNRELATED_ERROR, 'level=error msg="file configuration validation failed: '
      'runtime name \'runc\' is reserved"'],
     "file configuration validation failed: runtime name 'runc' is reserved"),
    ([SIGNALLED_20_10, 'level=error msg="Error reconfiguring the daemon: boom"'],
     "Error reconfiguring the daemon: boom"),
    ([SIGNALLED_LATER, 'level=error msg="Error reloading configuration" error="file '
      'configuration validation failed: specified default runtime \'gpu\' does not exist"'],
     "Error reloading configuration: file configuration validation failed: specified default "
     "runtime 'gpu' does not exist"),
    ([SIGNALLED_LATER, '{"error":"boom","level":"error","msg":"Error reconfiguring the daemon"}'],
     "Error reconfiguring the daemon: boom"),
    ([SIGNALLED_20_10, UNRELATED_ERROR,
      'level=error msg="Error response from daemon: unrelated" error=x'], None),
    ([SIGNALLED_LATER, '{"level":"error","msg":"Handler for GET /info returned error: x"}'], None),
    (['level=error msg="Error reconfiguring the daemon: an earlier reload"', SIGNALLED_20_10],
     None),
    (['level=error msg="Error reconfiguring the daemon: before any signal"'], None),
])
def test_only_dockerds_reload_failures_are_refusals(lines: list, reason) -> None:
    """A busy daemon logs unrelated errors: only the messages dockerd's reload code logs for a
    reload it did not take (in 20.10's form and in later releases' msg plus error field), after
    the signal, are a refusal."""
    assert live.reload_refusal("\n".join(lines) + "\n") == reason


def test_an_unrelated_error_in_the_log_is_no_refusal(
        dockerd: Dockerd, capsys, monkeypatch) -> None:
    """An error line unrelated to the reload lands in dockerd's log right after the signal, and
    the reload event takes longer than the grace a refusal gets: gpuready waits for the event
    and keeps the file dockerd accepted."""
    real_events = DockerApi.events
    log_at = len(dockerd.log_text())
    state = {"first": None, "appended": False}

    def slow_events(self, **query):
        state["first"] = state["first"] or time.monotonic()
        if not state["appended"] and live.RELOAD_LOGGED in dockerd.log_text()[log_at:]:
            with dockerd.log_path.open("a") as log:
                log.write(UNRELATED_ERROR + "\n")
            state["appended"] = True
        if time.monotonic() - state["first"] < 3 * live.REFUSAL_GRACE_S:
            return []  # a busy daemon: the event is not there yet
        return real_events(self, **query)

    monkeypatch.setattr(DockerApi, "events", slow_events)
    result = cli_runner.run_cli(capsys, monkeypatch, *configure_argv(dockerd, "--reload"))
    assert result.code == 0, result.out + result.err
    assert state["appended"] and UNRELATED_ERROR in dockerd.log_text()
    assert "reloaded: dockerd" in result.out and "has runtimes nvidia" in result.out
    assert "nvidia" in json.loads(dockerd.config_path.read_text())["runtimes"]
    assert "nvidia" in live_runtimes(dockerd)


def test_the_event_stream_is_asked_once_more_before_a_refusal(monkeypatch) -> None:
    """dockerd's refusal is in the log, but the reload event comes just as the grace ends: the
    last look at the event stream finds it, and the reload is not called refused."""
    config = parse_daemon_config('{"runtimes": {"nvidia": {"path": "/usr/bin/nv"}}}\n',
                                 Path("/etc/docker/daemon.json"))
    calls = []

    class Api:
        def __init__(self, address, **_) -> None:
            self.address = address

        def events(self, **_):
            calls.append("events")
            return [{"Type": "daemon", "Action": "reload"}] if len(calls) > 2 else []

        def info(self):
            return {"ServerVersion": "20.10.0", "DefaultRuntime": "runc",
                    "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "/usr/bin/nv"}}}

    class Log:
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def refusal(self) -> str:
            return "Error reconfiguring the daemon: a reload of someone else's"

    signals = []
    monkeypatch.setattr(live, "DockerApi", Api)
    monkeypatch.setattr(live, "DaemonLog", Log)
    monkeypatch.setattr(live, "reload_target", lambda address: 4242)
    monkeypatch.setattr(live.os, "kill", lambda pid, number: signals.append(pid))
    monkeypatch.setattr(live, "REFUSAL_GRACE_S", 0.0)
    loaded, note = live.reload("unix:///nowhere.sock", config)
    assert signals == [4242] and calls == ["events"] * 3
    assert loaded.runtimes["nvidia"] == {"path": "/usr/bin/nv"} and note is None


@pytest.mark.parametrize(("failure", "code", "says"), [
    ("unreachable", 3, "/info failed: unix://"),
    ("answered 500", 1, "/info failed: dockerd answered 500: out of file descriptors"),
    ("other runtimes", 1, "so it reads another file"),
])
def test_after_the_reload_event_the_file_is_kept(
        failure: str, code: int, says: str, dockerd: Dockerd, capsys, monkeypatch) -> None:
    """dockerd accepted the reload (its event came), then /info fails or shows other runtimes:
    the file is what dockerd loaded, so nothing is put back, and the failure says so (exit 3
    when dockerd no longer answers, else 1)."""
    real_events, real_info = DockerApi.events, DockerApi.info
    seen = []

    def events(self, **query):
        found = real_events(self, **query)
        seen.extend(found)
        return found

    def info(self):
        if not seen:
            return real_info(self)
        if failure == "unreachable":
            raise RuntimeUnreachableError(f"{self.address}: cannot reach dockerd: Connection "
                                          "refused")
        if failure == "answered 500":
            raise DockerApiError(500, "out of file descriptors")
        answer = real_info(self)
        answer["Runtimes"].pop("nvidia", None)
        return answer

    monkeypatch.setattr(DockerApi, "events", events)
    monkeypatch.setattr(DockerApi, "info", info)
    result = cli_runner.run_cli(capsys, monkeypatch, *configure_argv(dockerd, "--reload"))
    assert result.code == code, result.out + result.err
    line = error_line(result)
    assert says in line and "put back byte for byte" not in line
    kept = f"{dockerd.config_path} kept as written, not put back: dockerd's reload event came"
    assert kept in line
    assert "reloaded:" not in result.out
    assert "nvidia" in json.loads(dockerd.config_path.read_text())["runtimes"]
    assert set(folder_files(dockerd)) >= {"daemon.json", "daemon.json.gpuready.json"}
    assert "nvidia" in live_runtimes(dockerd)  # what the file says is what dockerd runs


def configure_argv(daemon: Dockerd, *extra: str) -> list:
    return ["configure", "--engine", "docker", "--config", str(daemon.config_path),
            "--binary", str(daemon.standin), "--address", daemon.address, *extra]
