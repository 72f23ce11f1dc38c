"""The default runtime counts as much as the GPU runtime (issue 27, part 4).

With runc's ``SystemdCgroup = "true"`` (a string) in the base config, ``setup`` used to rewrite
only the GPU runtime's value and report "all 17 checks passed", ``check`` passed, and ``doctor``
said ``error bool-as-string`` on runc: every pod without a RuntimeClass fails when its container
is created. ``lint --fix`` refused repairs on runc's table with advice about ``--runtime-name``.
These tests run the real command line on a sandbox root.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuready.compat import tomllib
from tests.helpers import LAB_BASE, run_cli, stage_fixture

CONFIG = "etc/containerd/config.toml"
FLAG = "--confirm-every-pod-uses-it"
RUNC_OPTIONS = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]'
# runc's SystemdCgroup written on runc's own table: containerd ignores it there (runc runs on
# cgroupfs), so moving it into options changes how every pod without a RuntimeClass runs
RUNC_TABLE_OPTION = LAB_BASE.read_text().replace(
    f"\n\n          {RUNC_OPTIONS}\n            SystemdCgroup = true",
    "\n          SystemdCgroup = true  # the operator's",
)


def _base_with_string(root: Path) -> str:
    """The contract's base fixture with runc's SystemdCgroup the string "true", commented."""
    fixture = stage_fixture(root)
    text = LAB_BASE.read_text().replace(
        "SystemdCgroup = true", 'SystemdCgroup = "true"  # runc keeps systemd', 1)
    fixture.write_text(text)
    return text


def _runc(root: Path) -> dict:
    data = tomllib.loads((root / CONFIG).read_text())
    return data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"]


def _errors(command: str, root: Path) -> set[str]:
    result = run_cli(command, "--root", str(root), "--containerd-version", "1.7",
                     "--format", "json")
    return {p["rule"] for p in json.loads(result.out)["problems"] if p["severity"] == "error"}


def _failed_checks(root: Path) -> tuple[int, list[dict]]:
    result = run_cli("check", "--root", str(root), "--containerd-version", "1.7",
                     "--format", "json")
    return result.code, [c for c in json.loads(result.out)["checks"] if not c["ok"]]


def test_setup_fixes_runcs_string_boolean_keeping_every_other_byte(tmp_path):
    root = tmp_path / "node"
    base = _base_with_string(root)
    result = run_cli("setup", "--root", str(root), "--containerd-version", "1.7")
    assert result.code == 0, result.out + result.err
    assert "fixed bool-as-string ×1" in result.out
    assert _runc(root)["options"]["SystemdCgroup"] is True
    written = (root / CONFIG).read_text()
    # runc's line keeps its comment; the base's lines before the GPU runtime's table are kept
    assert "SystemdCgroup = true  # runc keeps systemd\n" in written
    fixed_base = base.replace('"true"  # runc', "true  # runc")
    cni = '\n    [plugins."io.containerd.grpc.v1.cri".cni]'
    assert written.startswith(fixed_base.split(cni)[0])


def test_after_setup_check_and_doctor_agree_on_runc(tmp_path):
    root = tmp_path / "node"
    _base_with_string(root)
    assert run_cli("setup", "--root", str(root), "--containerd-version", "1.7").code == 0
    code, failed = _failed_checks(root)
    assert (code, failed) == (0, [])
    assert _errors("doctor", root) == set()


def test_check_fails_on_the_error_doctor_reports_on_runc(tmp_path):
    root = tmp_path / "node"
    stage_fixture(root)
    assert run_cli("setup", "--root", str(root), "--containerd-version", "1.7").code == 0
    config = root / CONFIG
    config.write_text(config.read_text().replace(
        f"{RUNC_OPTIONS}\n            SystemdCgroup = true",
        f'{RUNC_OPTIONS}\n            SystemdCgroup = "true"'))
    assert _errors("doctor", root) == {"bool-as-string"}
    code, failed = _failed_checks(root)
    assert code == 1
    assert [c["name"] for c in failed] == ["doctor: bool-as-string"]
    assert "SystemdCgroup is the string 'true'" in failed[0]["detail"]
    text = run_cli("check", "--root", str(root), "--containerd-version", "1.7")
    assert "FAIL doctor: bool-as-string" in text.out and text.code == 1


def test_setup_stops_on_a_fix_that_changes_how_runc_runs(tmp_path):
    root = tmp_path / "node"
    stage_fixture(root).write_text(RUNC_TABLE_OPTION)
    result = run_cli("setup", "--root", str(root), "--containerd-version", "1.7")
    assert result.code == 1, result.out + result.err
    assert "option-outside-options" in result.err and FLAG in result.err
    assert "nothing written" in result.err
    assert not (root / CONFIG).exists()
    confirmed = run_cli("setup", "--root", str(root), "--containerd-version", "1.7", FLAG)
    assert confirmed.code == 0, confirmed.out + confirmed.err
    assert _runc(root)["options"]["SystemdCgroup"] is True
    assert "SystemdCgroup = true  # the operator's" in (root / CONFIG).read_text()
    assert _failed_checks(root) == (0, [])
    assert _errors("doctor", root) == set()


def test_lint_fix_refusal_on_runcs_table_names_the_flag_and_the_flag_fixes(tmp_path):
    config = tmp_path / CONFIG
    config.parent.mkdir(parents=True)
    config.write_text(RUNC_TABLE_OPTION)
    refused = run_cli("lint", "--fix", "--root", str(tmp_path))
    assert refused.code == 2
    assert FLAG in refused.err and "option-outside-options" in refused.err
    assert "--runtime-name" not in refused.err
    assert config.read_text() == RUNC_TABLE_OPTION
    fixed = run_cli("lint", "--fix", "--root", str(tmp_path), FLAG)
    assert "fixed: option-outside-options ×1" in fixed.out, fixed.out + fixed.err
    assert _runc(tmp_path)["options"]["SystemdCgroup"] is True
    assert "option-outside-options" not in _errors("lint", tmp_path)


def test_a_runc_option_of_the_wrong_type_fails_setup_check_and_doctor_alike(tmp_path):
    root = tmp_path / "node"
    stage_fixture(root).write_text(
        LAB_BASE.read_text().replace("SystemdCgroup = true", 'SystemdCgroup = "yes"', 1))
    setup = run_cli("setup", "--root", str(root), "--containerd-version", "1.7")
    assert setup.code == 1
    assert "FAIL doctor: option-wrong-type" in setup.out
    assert "every pod without a RuntimeClass fails" in setup.out
    code, failed = _failed_checks(root)
    assert code == 1 and [c["name"] for c in failed] == ["doctor: option-wrong-type"]
    assert _errors("doctor", root) == {"option-wrong-type"}
