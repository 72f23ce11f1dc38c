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
from pathlib import Path

import pytest

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
    """The issue's case: "default-runtimes" (a typo) in a file whose runtime is live. dockerd
    20.10 has no --validate; its key table refuses the file before anything is written or
    signalled."""
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
