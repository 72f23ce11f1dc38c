"""CRI-O: the drop-in gpuready writes, comment-keeping edits of an existing one, lint, doctor.

No CRI-O daemon can run here (Debian has no package for it): these tests check the files only,
and gpuready claims no live verification of CRI-O (verify --engine crio says so).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.compat import tomllib
from tests.helpers import run_cli

MAIN = """\
# CRI-O as the distribution ships it
[crio.runtime]
default_runtime = "runc"

[crio.runtime.runtimes.runc]
runtime_path = "/usr/bin/runc"
runtime_type = "oci"
monitor_path = "/usr/libexec/crio/conmon"
monitor_cgroup = "pod"
"""

OPERATOR_DROPIN = """\
# Managed by the platform team: keep this comment
[crio.runtime]
log_level = "info"  # raised while debugging
"""


@pytest.fixture
def node(tmp_path: Path) -> Path:
    (tmp_path / "etc" / "crio" / "crio.conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "crio" / "crio.conf").write_text(MAIN)
    for name in ("nvidia-container-runtime", "runc"):
        binary = tmp_path / "usr" / "bin" / name
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    return tmp_path


def dropin(node: Path) -> Path:
    return node / "etc" / "crio" / "crio.conf.d" / "99-nvidia.toml"


def test_configure_writes_a_drop_in_that_parses_and_names_the_runtime(node: Path) -> None:
    result = run_cli("configure", "--engine", "crio", "--root", str(node))
    assert result.code == 0, result.err
    data = tomllib.loads(dropin(node).read_text())
    entry = data["crio"]["runtime"]["runtimes"]["nvidia"]
    assert entry["runtime_path"] == "/usr/bin/nvidia-container-runtime"
    assert entry["runtime_type"] == "oci"
    # built from the default runtime, as nvidia-ctk builds it: conmon settings carry over
    assert entry["monitor_path"] == "/usr/libexec/crio/conmon" and entry["monitor_cgroup"] == "pod"
    assert (node / "etc" / "crio" / "crio.conf").read_text() == MAIN
    again = run_cli("configure", "--engine", "crio", "--root", str(node))
    assert again.code == 0 and "already registered" in again.out
    assert run_cli("lint", "--engine", "crio", "--root", str(node)).code == 0
    doctor = run_cli("doctor", "--engine", "crio", "--root", str(node), "--format", "json")
    assert doctor.code == 0 and '"status": "ok"' in doctor.out
    removed = run_cli("unconfigure", "--engine", "crio", "--root", str(node))
    assert removed.code == 0 and not dropin(node).exists()  # gpuready created it: it goes


def test_an_existing_drop_in_keeps_its_comments_and_comes_back(node: Path) -> None:
    dropin(node).write_text(OPERATOR_DROPIN)
    assert run_cli("configure", "--engine", "crio", "--root", str(node)).code == 0
    text = dropin(node).read_text()
    assert text.startswith(OPERATOR_DROPIN)
    assert "[crio.runtime.runtimes.nvidia]" in text
    removed = run_cli("unconfigure", "--engine", "crio", "--root", str(node))
    assert removed.code == 0, removed.err
    assert dropin(node).read_text() == OPERATOR_DROPIN
    again = run_cli("unconfigure", "--engine", "crio", "--root", str(node))
    assert again.code == 0 and "not registered" in again.out


def test_detected_when_crio_is_the_only_engine(node: Path) -> None:
    result = run_cli("configure", "--root", str(node))
    assert result.code == 0 and str(dropin(node)) in result.out


def test_bad_toml_in_the_drop_in_is_one_line_and_untouched(node: Path) -> None:
    raw = b"[crio.runtime\nx = 1\n"
    dropin(node).write_bytes(raw)
    result = run_cli("configure", "--engine", "crio", "--root", str(node))
    assert result.code == 2 and f"{dropin(node)}:1:" in result.err
    assert dropin(node).read_bytes() == raw
    lint = run_cli("lint", "--engine", "crio", "--root", str(node))
    assert lint.code == 1 and "crio-toml-syntax" in lint.out


def test_default_runtime_needs_the_confirmation_and_cdi_has_no_switch(node: Path) -> None:
    refused = run_cli("configure", "--engine", "crio", "--root", str(node), "--set-as-default")
    assert refused.code == 2 and not dropin(node).exists()
    done = run_cli("configure", "--engine", "crio", "--root", str(node), "--set-as-default",
                   "--confirm-every-pod-uses-it")
    assert done.code == 0
    data = tomllib.loads(dropin(node).read_text())
    assert data["crio"]["runtime"]["default_runtime"] == "nvidia"
    cdi = run_cli("configure", "--engine", "crio", "--root", str(node), "--enable-cdi")
    assert cdi.code == 2 and "no CRI-O setting" in cdi.err


def test_reserved_names_are_refused(node: Path) -> None:
    result = run_cli("configure", "--engine", "crio", "--root", str(node), "--runtime-name",
                     "crun")
    assert result.code == 2 and not dropin(node).exists()


def test_live_verification_is_not_claimed(node: Path) -> None:
    result = run_cli("verify", "--live", "--engine", "crio", "--root", str(node))
    assert result.code == 2 and "does not claim live verification" in result.err


MISSING_BINARIES = """\
[crio.runtime]
default_runtime = "crun"

[crio.runtime.runtimes.crun]
runtime_path = "/usr/bin/crun"
runtime_type = "oci"

[crio.runtime.runtimes.nvidia]
runtime_path = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
runtime_type = "oci"

[crio.runtime.runtimes.kata]
runtime_path = "/opt/kata/bin/kata-runtime"
runtime_type = "vm"
"""


def test_a_missing_runtime_binary_gets_the_remedy_for_that_binary(tmp_path: Path) -> None:
    (tmp_path / "etc" / "crio" / "crio.conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "crio" / "crio.conf").write_text(MISSING_BINARIES)
    result = run_cli("lint", "--engine", "crio", "--root", str(tmp_path))
    assert result.code == 1, result.out + result.err
    fixes = {}
    for problem, fix in zip(result.out.splitlines(), result.out.splitlines()[1:]):
        if "crio-runtime-path-invalid" in problem:
            fixes[problem.split("runtime '")[1].split("'")[0]] = fix.strip()
    # crun is a package of its own: the NVIDIA Container Toolkit does not bring it
    assert fixes["crun"] == ("fix: install crun, a package of its own (apt-get install crun, or "
                             "dnf install crun), or set runtime_path to where crun is installed")
    assert fixes["nvidia"] == (
        "fix: install the NVIDIA Container Toolkit, which provides nvidia-container-runtime, "
        "or set runtime_path to where nvidia-container-runtime is installed")
    assert "Toolkit" not in fixes["kata"] and "install kata-runtime" in fixes["kata"]
