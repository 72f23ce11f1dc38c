"""Debian's real containerd loads what gpuready writes (``containerd config dump``).

``config dump`` loads the file (and its imports) over containerd's defaults and prints the
effective configuration, so a runtime that containerd would ignore is absent from it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from tests.helpers import DATA, require_binary, run_cli

pytestmark = pytest.mark.containerd

CRI = "io.containerd.grpc.v1.cri"


def config_dump(config: Path) -> dict:
    """The effective config containerd builds from ``config``; fails the test if it refuses."""
    binary = require_binary("containerd")
    result = subprocess.run(
        [binary, "--config", str(config), "config", "dump"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return tomllib.loads(result.stdout)


def installed_major() -> int:
    binary = require_binary("containerd")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()
    return int(version[2].split(".")[0])


LOADABLE_BY_1X = ["v1-no-version", "v2-lab-base", "v2-containerd-1.6-default",
                  "v2-version-only", "v2-fix-string-systemd", "v2-inherit-cgroupfs"]


@pytest.mark.parametrize("case", LOADABLE_BY_1X)
def test_containerd_loads_the_registered_runtime(case: str) -> None:
    if installed_major() >= 2 and case.startswith("v1"):
        pytest.skip("containerd 2.x migrates version 1 to its own layout")
    dumped = config_dump(DATA / "register" / case / "expected.toml")
    runtimes = dumped["plugins"][CRI]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    expected_systemd = case != "v2-inherit-cgroupfs"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is expected_systemd
    assert dumped["plugins"][CRI]["containerd"]["default_runtime_name"] == "runc"


def test_containerd_loads_what_setup_writes(tmp_path: Path) -> None:
    assert run_cli("setup", "--root", str(tmp_path)).code == 0
    dumped = config_dump(tmp_path / "etc/containerd/config.toml")
    nvidia = dumped["plugins"][CRI]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["SystemdCgroup"] is True


def test_a_version_3_file_is_silently_ignored_by_containerd_1x() -> None:
    """Why the version table matters: 1.6 loads a v3 file and keeps none of its runtimes."""
    if installed_major() >= 2:
        pytest.skip("containerd 2.x reads version 3")
    dumped = config_dump(DATA / "register" / "v3-containerd-2.1-default" / "expected.toml")
    assert "nvidia" not in dumped["plugins"][CRI]["containerd"]["runtimes"]


def test_enable_cdi_is_accepted_and_dropped_by_containerd_before_1_7(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text((DATA / "containerd" / "lab-base.toml").read_text())
    result = run_cli("configure", "--config", str(config), "--enable-cdi")
    assert result.code == 0
    dumped = config_dump(config)
    cri = dumped["plugins"][CRI]
    binary = require_binary("containerd")
    release = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if " 1.6." in release:
        assert "enable_cdi" not in cri
        assert "ignores enable_cdi" in result.out
    else:
        assert cri["enable_cdi"] is True
