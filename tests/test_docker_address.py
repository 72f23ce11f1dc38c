"""Which dockerd gpuready talks to: ``--address`` (alias ``--docker-address``), else
``DOCKER_HOST``, else the default socket; anything but ``unix:///PATH`` is a usage error.

The live tests run a real dockerd (Debian's docker.io) on a private socket and point gpuready at
it through ``DOCKER_HOST`` alone, as every Docker tool is pointed at a daemon.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.containerd import short_tempdir
from tests.harness.dockerd import Dockerd
from tests.harness.standin import write_standin
from tests.helpers import BUSYBOX, REPO, Completed, require

DEFAULT = "unix:///var/run/docker.sock"


def gpuready(*args: str, docker_host: str | None) -> Completed:
    """``python -m gpuready ARGS`` with ``DOCKER_HOST`` set to ``docker_host``, or unset."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DOCKER_HOST", "GPUREADY_DEBUG")}
    environment["PYTHONPATH"] = str(REPO / "src") + os.pathsep + environment.get("PYTHONPATH", "")
    if docker_host is not None:
        environment["DOCKER_HOST"] = docker_host
    result = subprocess.run([sys.executable, "-m", "gpuready", *args], capture_output=True,
                            text=True, env=environment, timeout=120)
    return Completed(result.returncode, result.stdout, result.stderr)


def one_error_line(result: Completed) -> str:
    """The one ``gpuready: error:`` line of a failed run (argparse's usage aside)."""
    lines = [line for line in result.err.splitlines() if line.startswith("gpuready: error:")]
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    return lines[0]


@pytest.fixture
def daemon_json(tmp_path: Path) -> Path:
    path = tmp_path / "daemon.json"
    path.write_text('{\n  "log-level": "info"\n}\n')
    return path


COMMANDS = {
    "verify": ("verify", "--live", "--engine", "docker"),
    "configure": ("configure", "--engine", "docker", "--reload"),
    "unconfigure": ("unconfigure", "--engine", "docker", "--reload"),
}
BAD = ["tcp://127.0.0.1:2375", "ssh://admin@node", "npipe:////./pipe/docker_engine",
       "fd://", "/var/run/docker.sock", "unix://", "unix://run/docker.sock"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("value", BAD)
def test_a_docker_host_gpuready_cannot_use_is_a_one_line_usage_error(
        command: str, value: str, daemon_json: Path) -> None:
    before = daemon_json.read_bytes()
    result = gpuready(*COMMANDS[command], "--config", str(daemon_json), docker_host=value)
    assert result.code == 2, result.out + result.err
    line = one_error_line(result)
    assert f"DOCKER_HOST={value}" in line
    assert daemon_json.read_bytes() == before  # nothing written
    assert sorted(p.name for p in daemon_json.parent.iterdir()) == ["daemon.json"]


@pytest.mark.parametrize("flag", ["--address", "--docker-address"])
def test_an_option_that_gpuready_cannot_use_is_named_as_given(flag: str,
                                                              daemon_json: Path) -> None:
    result = gpuready(*COMMANDS["verify"], "--config", str(daemon_json), flag,
                      "tcp://127.0.0.1:2375", docker_host=None)
    assert result.code == 2
    assert f"{flag} tcp://127.0.0.1:2375: the tcp:// scheme is not supported" in (
        one_error_line(result))


@pytest.mark.parametrize("flag", ["--address", "--docker-address"])
@pytest.mark.parametrize("command", ["verify", "configure"])
def test_an_option_wins_over_docker_host(flag: str, command: str, tmp_path: Path,
                                         daemon_json: Path) -> None:
    """DOCKER_HOST names a scheme gpuready refuses; the option given wins, so the run goes on
    to the option's socket (here: none listens, exit 3) instead of refusing DOCKER_HOST."""
    socket = f"unix://{tmp_path}/no-dockerd.sock"
    before = daemon_json.read_bytes()
    result = gpuready(*COMMANDS[command], "--config", str(daemon_json), flag, socket,
                      docker_host="tcp://127.0.0.1:2375")
    assert result.code == 3, result.out + result.err
    line = one_error_line(result)
    assert f"{socket}: cannot reach dockerd" in line and "DOCKER_HOST" not in line
    # configure --reload asks dockerd before it writes: unreachable, nothing is written
    assert daemon_json.read_bytes() == before
    assert sorted(p.name for p in daemon_json.parent.iterdir()) == ["daemon.json"]


def test_docker_host_wins_over_the_default_and_says_so(tmp_path: Path,
                                                       daemon_json: Path) -> None:
    socket = f"unix://{tmp_path}/no-dockerd.sock"
    result = gpuready(*COMMANDS["verify"], "--config", str(daemon_json), docker_host=socket)
    assert result.code == 3
    assert f"{socket} (from DOCKER_HOST): cannot reach dockerd" in one_error_line(result)


@pytest.mark.parametrize("docker_host", [None, ""])
def test_without_an_option_or_docker_host_the_default_socket(docker_host: str | None,
                                                             daemon_json: Path) -> None:
    """An empty DOCKER_HOST counts as unset, as for the docker command line."""
    result = gpuready(*COMMANDS["verify"], "--config", str(daemon_json), "--format", "json",
                      docker_host=docker_host)
    if result.code == 3:  # no dockerd on this machine's default socket
        assert f"{DEFAULT}: cannot reach dockerd" in one_error_line(result)
    else:  # one answers there: the report names it
        assert json.loads(result.out)["address"] == DEFAULT
    assert "DOCKER_HOST" not in result.out + result.err


def test_address_and_its_alias_must_name_one_socket(daemon_json: Path) -> None:
    result = gpuready(*COMMANDS["verify"], "--config", str(daemon_json), "--address",
                      "unix:///run/a.sock", "--docker-address", "unix:///run/b.sock",
                      docker_host=None)
    assert result.code == 2
    assert "--docker-address is --address with --engine docker" in one_error_line(result)


# -- against a real dockerd ---------------------------------------------------------------------


@pytest.fixture
def dockerd():
    """A started dockerd on a private socket, with the stand-in runtime beside it."""
    require(binaries=("dockerd", "docker", "runc"), files=(BUSYBOX,))
    folder = short_tempdir()
    daemon = Dockerd(folder)
    daemon.standin = write_standin(folder / "standin", log=folder / "standin.log")
    try:
        yield daemon.start()
    finally:
        daemon.remove()


def test_verify_live_probe_works_with_only_docker_host(dockerd: Dockerd) -> None:
    """With only DOCKER_HOST naming dockerd (no address option), configure --reload,
    verify --live --probe and unconfigure --reload all reach it and say where the address
    came from."""
    config = str(dockerd.config_path)
    configured = gpuready("configure", "--engine", "docker", "--config", config, "--binary",
                          str(dockerd.standin), "--reload", docker_host=dockerd.address)
    assert configured.code == 0, configured.err
    assert f"at {dockerd.address} (from DOCKER_HOST) has runtimes nvidia" in configured.out

    verified = gpuready("verify", "--live", "--engine", "docker", "--probe", "--config", config,
                        docker_host=dockerd.address)
    assert verified.code == 0, verified.out + verified.err
    assert verified.out.startswith("dockerd ")
    assert f"at {dockerd.address} (from DOCKER_HOST), pid {dockerd.pid}" in verified.out
    assert "probe   ok:" in verified.out and "status: ok" in verified.out

    report = json.loads(gpuready("verify", "--live", "--engine", "docker", "--config", config,
                                 "--format", "json", docker_host=dockerd.address).out)
    assert report["address"] == dockerd.address and report["address_source"] == "DOCKER_HOST"

    removed = gpuready("unconfigure", "--engine", "docker", "--config", config, "--reload",
                       docker_host=dockerd.address)
    assert removed.code == 0, removed.err
    assert f"at {dockerd.address} (from DOCKER_HOST)" in removed.out


@pytest.mark.parametrize("flag", ["--address", "--docker-address"])
def test_address_is_dockerds_socket_with_engine_docker(flag: str, dockerd: Dockerd,
                                                       tmp_path: Path) -> None:
    """--address reaches dockerd (it was ignored with --engine docker), over a DOCKER_HOST that
    names a socket where nothing listens."""
    result = gpuready("configure", "--engine", "docker", "--config", str(dockerd.config_path),
                      "--binary", str(dockerd.standin), "--reload", flag, dockerd.address,
                      docker_host=f"unix://{tmp_path}/nothing.sock")
    assert result.code == 0, result.err
    assert "reloaded: dockerd " in result.out
    assert f"at {dockerd.address} has runtimes nvidia" in result.out
    assert "DOCKER_HOST" not in result.out
