"""Docker's key tables (gpuready/engines/docker/facts.py) replayed against the real dockerd, and
the check ``configure`` makes with them before it writes daemon.json.

dockerd accepts a top-level key when it names one of its command-line flags (or one of a few
keys read without a flag) and refuses the whole file otherwise. Debian's docker.io 20.10 has no
``dockerd --validate``, so for 20.10 gpuready's table is the judge, and these tests hold the table
to what the installed dockerd does, row by row.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpuready.engines.docker.facts import (
    FLAG_NAMES_20_10,
    KEYS_20_10,
    KEYS_ADDED,
    keys_complete,
    known_key,
)
from tests.harness.containerd import short_tempdir
from tests.harness.dockerd import Dockerd, base_daemon_json
from tests.helpers import require, require_binary, run_cli

REFUSED = "don't match any configuration option"


@pytest.fixture(scope="module")
def dockerd():
    """One started dockerd for the module (reloads leave it as they found it)."""
    require(binaries=("dockerd",))
    daemon = Dockerd(short_tempdir())
    try:
        yield daemon.start()
    finally:
        daemon.remove()


def reload_outcome(daemon: Dockerd, data: dict) -> str:
    """Write ``data`` as daemon.json, SIGHUP dockerd, and return what it logged about it."""
    count = daemon.reloads()
    daemon.config_path.write_text(json.dumps(data))
    os.kill(daemon.pid, signal.SIGHUP)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        log = daemon.log_text()
        parts = log.split("Got signal to reload configuration")
        if len(parts) > count + 1:
            after = parts[count + 1]
            if "Reloaded configuration" in after or "level=error" in after:
                return after
        time.sleep(0.1)
    raise AssertionError(f"dockerd logged no outcome of the reload:\n{daemon.log_text()[-2000:]}")


def test_every_key_of_the_table_is_one_dockerd_accepts(dockerd: Dockerd) -> None:
    """The 20.10 key table, row by row, against the real dockerd: a reload with every key is not
    refused for an unknown key, and one with a key outside the table is. "config-file" is left
    out: the harness passes --config-file, so the key is refused as given twice."""
    accepted = (KEYS_20_10 | FLAG_NAMES_20_10) - {"config-file"}
    everything = {key: None for key in sorted(accepted)}
    assert REFUSED not in reload_outcome(dockerd, everything)
    for key in ("cdi-spec-dirs", "default-runtimes"):
        later = {**base_daemon_json(dockerd.folder), key: []}
        assert f"{REFUSED}: {key}" in reload_outcome(dockerd, later)


def test_every_flag_of_the_installed_dockerd_is_in_the_table() -> None:
    """dockerd looks every key up among its flags: each flag its --help lists is a key the
    table accepts for the installed release."""
    binary = require_binary("dockerd")
    release = tuple(int(part) for part in re.search(
        r"version (\d+)\.(\d+)", subprocess.run([binary, "--version"], capture_output=True,
                                                text=True, check=True).stdout).groups())
    if release >= (23, 0):
        pytest.skip(f"dockerd {release} has --validate: its own check is used, not the table")
    text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    flags = set(re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", text, flags=re.MULTILINE))
    assert len(flags) > 50, text
    assert sorted(flag for flag in flags if not known_key(flag, release)) == []


def test_the_tables_say_which_releases_they_describe_completely() -> None:
    assert keys_complete((20, 10)) and not keys_complete(None) and not keys_complete((25, 0))
    assert known_key("default-network-opts", (24, 0)) and not known_key(
        "default-network-opts", (20, 10))
    assert known_key("oom-score-adjust", (25, 0)) and not known_key("oom-score-adjust", (26, 0))
    assert all(not known_key(key, (20, 10)) for key in KEYS_ADDED)


# -- configure's check before writing -----------------------------------------------------------


def operator_file(folder: Path, **keys) -> Path:
    path = folder / "daemon.json"
    path.write_text(json.dumps({"log-level": "info", **keys}, indent=2) + "\n")
    return path


def test_a_flag_spelling_dockerd_accepts_is_not_refused(tmp_path: Path) -> None:
    """"label" names a flag: dockerd 20.10 accepts it (and reads "labels"), so configure must
    not refuse the file for it."""
    require(binaries=("dockerd",))
    path = operator_file(tmp_path, label=["zone=a"])
    result = run_cli("configure", "--engine", "docker", "--config", str(path))
    assert result.code == 0, result.err
    assert "nvidia" in json.loads(path.read_text())["runtimes"]


def test_an_unknown_key_only_warns_where_the_release_is_unknown(tmp_path: Path) -> None:
    """Under --root the machine's dockerd is not the node's: its release is unknown, and the
    table cannot vouch that a key it does not know is unknown to the node's dockerd."""
    path = tmp_path / "etc" / "docker" / "daemon.json"
    path.parent.mkdir(parents=True)
    operator_file(path.parent, **{"future-key": True})
    result = run_cli("configure", "--engine", "docker", "--root", str(tmp_path))
    assert result.code == 0, result.err
    assert ("note: 'future-key' is not among the daemon.json keys gpuready knows (the node's "
            "dockerd, whose release is unknown here)") in result.out
    assert "nvidia" in json.loads(path.read_text())["runtimes"]


# -- Docker 23.0 and later: dockerd --validate ------------------------------------------------

# Docker 23.0 and later cannot be installed here (Debian ships 20.10), so this stand-in plays
# the installed dockerd's command line, as the releases with --validate define it: --help lists
# the option, and --validate --config-file FILE exits 0 for a file it accepts, 1 with its reason
# on standard error for one it refuses. It refuses the key "refused-by-dockerd" only: a key the
# tables know nothing of, so only asking dockerd can refuse it.
STANDIN = """#!/bin/sh
case "$1" in
  --version) echo "Docker version 27.5.1, build 4c9b3b0"; exit 0 ;;
  --help)
    echo "Usage: dockerd [OPTIONS]"
    echo "      --validate   Validate daemon configuration and exit"
    exit 0 ;;
  --validate)
    if grep -q refused-by-dockerd "$3"; then
      printf '%s %s: %s\n' "unable to configure the Docker daemon with file" "$3" \
        "the following directives don't match any configuration option: refused-by-dockerd" >&2
      exit 1
    fi
    echo "configuration OK" >&2; exit 0 ;;
esac
exit 2
"""


@pytest.fixture
def newer_dockerd(tmp_path: Path) -> dict:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "dockerd"
    script.write_text(STANDIN)
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_dockerd_validate_judges_the_file_where_the_installed_dockerd_has_it(
        tmp_path: Path, newer_dockerd: dict) -> None:
    path = operator_file(tmp_path, **{"refused-by-dockerd": True})
    before = path.read_bytes()
    result = run_cli("configure", "--engine", "docker", "--config", str(path), env=newer_dockerd)
    assert result.code == 2, result.out + result.err
    assert f"{path}: dockerd --validate refuses the file as it would be written" in result.err
    assert f"with file {path}: the following directives" in result.err  # its words, our path
    assert path.read_bytes() == before
    # a key only the table does not know (a release newer than it): dockerd accepts it
    accepted = operator_file(tmp_path, **{"newer-than-the-table": True})
    result = run_cli("configure", "--engine", "docker", "--config", str(accepted),
                     env=newer_dockerd)
    assert result.code == 0, result.err
    assert "note:" not in result.out
