"""``setup --engine docker`` and ``check --engine docker``: the eight steps where they apply."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import run_cli

OPERATOR = '{\n    "log-driver": "json-file",\n    "data-root": "/srv/docker"\n}\n'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "docker" / "daemon.json"
    path.parent.mkdir(parents=True)
    path.write_text(OPERATOR)
    return tmp_path


def toolkit(root: Path, name: str) -> str:
    return (root / "root" / "toolkit" / name).read_text()


def test_setup_runs_the_steps_that_apply_and_says_which_do_not(root: Path) -> None:
    result = run_cli("setup", "--engine", "docker", "--root", str(root))
    assert result.code == 0, result.out + result.err
    lines = result.out.splitlines()
    assert [line.split("]")[0] for line in lines[:8]] == [f"[{n}/8" for n in range(1, 9)]
    assert "SystemdCgroup does not apply" in lines[2]
    assert "RuntimeClass" in lines[6] and "does not apply (docker)" in lines[6]
    assert not (root / "root" / "toolkit" / "runtimeclass.yaml").exists()
    daemon = json.loads((root / "etc" / "docker" / "daemon.json").read_text())
    assert daemon["log-driver"] == "json-file" and "nvidia" in daemon["runtimes"]
    assert toolkit(root, "report.txt") == (
        "CONFIG_VERSION=N/A (docker)\nRUNTIME=nvidia\nRUNTIME_TYPE=N/A (docker)\n"
        "SYSTEMD_CGROUP=N/A (docker)\nHANDLER=N/A (docker)\n")
    assert toolkit(root, "parsed.txt") == "VERSION=N/A (docker)\nRUNTIMES=nvidia,runc\n"
    assert toolkit(root, "default.txt") == "DEFAULT=runc\nWHY=opt-in\n"
    assert "kind: nvidia.com/gpu" in (root / "etc" / "cdi" / "nvidia.yaml").read_text()
    assert run_cli("check", "--engine", "docker", "--root", str(root)).code == 0


def test_a_second_setup_changes_no_byte(root: Path) -> None:
    assert run_cli("setup", "--engine", "docker", "--root", str(root)).code == 0
    files = [p for p in root.rglob("*") if p.is_file()]
    before = {p: p.read_bytes() for p in files}
    for path in files:
        os.utime(path, (1_000_000_000, 1_000_000_000))
    again = run_cli("setup", "--engine", "docker", "--root", str(root))
    assert again.code == 0 and "already registered" in again.out
    assert {p: p.read_bytes() for p in files} == before
    assert all(p.stat().st_mtime == 1_000_000_000 for p in files)


def test_dry_run_writes_nothing(root: Path) -> None:
    result = run_cli("setup", "--engine", "docker", "--root", str(root), "--dry-run")
    assert result.code == 0 and "+++ " in result.out
    assert (root / "etc" / "docker" / "daemon.json").read_text() == OPERATOR
    assert not (root / "root").exists()


def test_check_fails_on_a_report_that_does_not_match(root: Path) -> None:
    assert run_cli("setup", "--engine", "docker", "--root", str(root)).code == 0
    report = root / "root" / "toolkit" / "report.txt"
    report.write_text(report.read_text().replace("RUNTIME=nvidia", "RUNTIME=other"))
    result = run_cli("check", "--engine", "docker", "--root", str(root))
    assert result.code == 1 and "FAIL report.txt matches the files" in result.out


def test_bad_daemon_json_stops_setup_before_any_write(root: Path) -> None:
    path = root / "etc" / "docker" / "daemon.json"
    path.write_text('{\n  "debug": tru\n}\n')
    result = run_cli("setup", "--engine", "docker", "--root", str(root))
    assert result.code == 2 and f"{path}:2:" in result.err
    assert not (root / "root").exists() and not (root / "etc" / "cdi").exists()
