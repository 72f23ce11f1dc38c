"""Docker end to end against a real dockerd (Debian's docker.io), started by the test harness.

The runtime's binary is the stand-in of tests/harness/standin.py (no GPU here): it records the
arguments dockerd's shim passed to it and hands over to runc, so the probe is proved to reach the
binary the runtime names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuready.engines.docker.api import DockerApi
from tests.harness.containerd import short_tempdir
from tests.harness.dockerd import Dockerd
from tests.harness.standin import recorded_calls, subcommand, write_standin
from tests.helpers import BUSYBOX, require, run_cli

OPERATOR_JSON = """{
    "log-driver": "json-file",
    "log-opts": {
        "max-size": "10m",
        "max-file": "3"
    },
    "deprecated-key-path": "KEY",
    "default-shm-size": "64M"
}
"""


@pytest.fixture
def dockerd():
    """A started dockerd whose daemon.json holds an operator's keys, and its stand-in runtime."""
    require(binaries=("dockerd", "docker", "runc"), files=(BUSYBOX,))
    folder = short_tempdir()
    daemon = Dockerd(folder, daemon_json=OPERATOR_JSON.replace("KEY", str(folder / "key.json")))
    daemon.standin = write_standin(folder / "standin", log=folder / "standin.log")
    try:
        yield daemon.start()
    finally:
        daemon.remove()


def docker_info(daemon: Dockerd) -> dict:
    """What the docker command line itself reports (``docker info``)."""
    out = subprocess.run(
        [shutil.which("docker"), "-H", daemon.address, "info", "--format", "{{json .}}"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    return json.loads(out)


def configure(daemon: Dockerd, *extra: str):
    return run_cli("configure", "--engine", "docker", "--config", str(daemon.config_path),
                   "--binary", str(daemon.standin), "--docker-address", daemon.address, *extra)


def test_round_trip_configure_reload_info_probe_unconfigure(dockerd: Dockerd) -> None:
    original = dockerd.config_path.read_bytes()

    result = configure(dockerd, "--reload")
    assert result.code == 0, result.err
    assert "register runtime nvidia" in result.out and "reloaded: dockerd" in result.out
    runtimes = docker_info(dockerd)["Runtimes"]
    assert runtimes["nvidia"]["path"] == str(dockerd.standin)
    assert docker_info(dockerd)["DefaultRuntime"] == "runc"
    # every operator line is still there, in its order and indentation
    text = dockerd.config_path.read_text()
    assert text.startswith(original.decode().rstrip().rstrip("}").rstrip())

    before = dockerd.config_path.read_bytes()
    os.utime(dockerd.config_path, (1_000_000_000, 1_000_000_000))
    again = configure(dockerd, "--reload")
    assert again.code == 0 and "already registered" in again.out
    assert dockerd.config_path.read_bytes() == before
    assert dockerd.config_path.stat().st_mtime == 1_000_000_000

    verified = run_cli("verify", "--live", "--engine", "docker", "--config",
                       str(dockerd.config_path), "--docker-address", dockerd.address, "--probe",
                       "--format", "json")
    assert verified.code == 0, verified.out + verified.err
    report = json.loads(verified.out)
    assert report["runtimes"]["nvidia"]["path"] == str(dockerd.standin)
    assert report["probe"]["ok"] and report["probe"]["removed"]
    assert report["probe"]["exit_code"] == 0
    calls = recorded_calls(dockerd.folder / "standin.log")
    created = [call for call in calls if subcommand(call) == "create"]
    assert created, "dockerd never called the runtime's binary"
    container = report["probe"]["container"]
    assert created[0]["argv"][-1] == container  # dockerd handed the probe's container over
    assert "--bundle" in created[0]["argv"]
    api = DockerApi(dockerd.address)
    assert api.request("GET", "/containers/json", query={"all": "1"}) == []
    assert not api.image_exists("gpuready-probe:busybox")

    removed = run_cli("unconfigure", "--engine", "docker", "--config", str(dockerd.config_path),
                      "--docker-address", dockerd.address, "--reload")
    assert removed.code == 0, removed.err
    assert dockerd.config_path.read_bytes() == original
    # the original has no "runtimes" key, and dockerd reloads runtimes only when the key is set:
    # gpuready says the runtime stays loaded until a restart, and a restart drops it
    assert "keeps runtime nvidia until it restarts" in removed.out
    dockerd.stop()
    dockerd.start()
    assert "nvidia" not in docker_info(dockerd)["Runtimes"]
    again = run_cli("unconfigure", "--engine", "docker", "--config", str(dockerd.config_path))
    assert again.code == 0 and "not registered" in again.out
    assert dockerd.config_path.read_bytes() == original


def test_a_file_dockerd_would_refuse_is_not_written_nor_reloaded(dockerd: Dockerd) -> None:
    """An unknown key makes dockerd refuse the whole file (it logs why, and keeps its old
    settings): configure refuses it before a byte is written, and lint says the same."""
    data = json.loads(dockerd.config_path.read_text())
    data["runtimes"] = {"nvidia": {"path": str(dockerd.standin)}}
    data["no-such-option"] = True
    dockerd.config_path.write_text(json.dumps(data, indent=2))
    before = dockerd.config_path.read_bytes()
    reloads = dockerd.reloads()
    result = configure(dockerd, "--reload")
    assert result.code == 2
    assert "'no-such-option' is not a daemon.json key" in result.err
    assert dockerd.config_path.read_bytes() == before and dockerd.reloads() == reloads
    assert "nvidia" not in docker_info(dockerd)["Runtimes"]
    lint = run_cli("lint", "--engine", "docker", str(dockerd.config_path))
    assert lint.code == 1 and "docker-unknown-key" in lint.out


def test_verify_reports_a_runtime_on_disk_that_dockerd_has_not_loaded(dockerd: Dockerd) -> None:
    assert configure(dockerd).code == 0  # written, but no reload
    result = run_cli("verify", "--live", "--engine", "docker", "--config",
                     str(dockerd.config_path), "--docker-address", dockerd.address)
    assert result.code == 1
    assert "runtime nvidia is not live" in result.out and "reload dockerd" in result.out


def test_enable_cdi_says_this_docker_does_not_read_it(dockerd: Dockerd) -> None:
    """Debian's Docker 20.10 has no features.cdi: only the 'not supported' path is testable."""
    result = configure(dockerd, "--enable-cdi")
    assert result.code == 0, result.err
    assert "does not read features.cdi" in result.out
    assert "features" not in json.loads(dockerd.config_path.read_text())


def test_verify_live_unreachable_socket_exits_3(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_text("{}\n")
    result = run_cli("verify", "--live", "--engine", "docker", "--config", str(config),
                     "--docker-address", f"unix://{tmp_path}/none.sock")
    assert result.code == 3 and "cannot reach dockerd" in result.err


def test_the_daemon_json_setup_writes_is_loaded_by_dockerd(dockerd: Dockerd) -> None:
    """setup --engine docker on a copy of the daemon's file; the result, reloaded, is live."""
    import signal

    root = dockerd.folder / "node"
    node_json = root / "etc" / "docker" / "daemon.json"
    node_json.parent.mkdir(parents=True)
    shutil.copyfile(dockerd.config_path, node_json)
    result = run_cli("setup", "--engine", "docker", "--root", str(root), "--binary",
                     str(dockerd.standin))
    assert result.code == 0, result.out + result.err
    shutil.copyfile(node_json, dockerd.config_path)
    reloads = dockerd.reloads()
    os.kill(dockerd.pid, signal.SIGHUP)
    verified = None
    for _ in range(50):
        verified = run_cli("verify", "--live", "--engine", "docker", "--config",
                           str(dockerd.config_path), "--docker-address", dockerd.address)
        if verified.code == 0:
            break
    assert dockerd.reloads() > reloads
    assert verified.code == 0, verified.out
    assert docker_info(dockerd)["Runtimes"]["nvidia"]["path"] == str(dockerd.standin)
