"""``gpuready setup`` and ``gpuready check`` in a sandbox root: the contract, file by file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, into_root, run_cli, stage_fixture

CONTRACT_FILES = {
    "root/toolkit/default.txt": "DEFAULT=runc\nWHY=runtimeclass\n",
    "root/toolkit/parsed.txt": "VERSION=2\nRUNTIMES=nvidia,runc\n",
    "root/toolkit/report.txt": (
        "CONFIG_VERSION=2\nRUNTIME=nvidia\nRUNTIME_TYPE=io.containerd.runc.v2\n"
        "SYSTEMD_CGROUP=true\nHANDLER=nvidia\n"
    ),
}


@pytest.fixture
def node(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    stage_fixture(root)
    return root


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_setup_produces_the_contract_files_exactly(node: Path) -> None:
    result = run_cli("setup", "--root", str(node))
    assert result.code == 0, result.out + result.err
    for relative, content in CONTRACT_FILES.items():
        assert (node / relative).read_text() == content, relative
    import yaml

    manifest = yaml.safe_load((node / "root/toolkit/runtimeclass.yaml").read_text())
    assert manifest == {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"},
        "handler": "nvidia",
    }
    spec_text = (node / "etc/cdi/nvidia.yaml").read_text()
    assert "kind: nvidia.com/gpu" in spec_text
    keys = list(yaml.safe_load(spec_text))
    assert (node / "root/toolkit/cdi-keys.txt").read_text() == "".join(f"{k}\n" for k in keys)
    config = (node / "etc/containerd/config.toml").read_text()
    assert config.startswith(LAB_BASE.read_text().split("[plugins]")[0])
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in config


def test_setup_prints_one_line_per_step_with_absolute_paths(node: Path) -> None:
    out = run_cli("setup", "--root", str(node)).out
    step_lines = [line for line in out.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] + "]" for line in step_lines] == [f"[{n}/8]" for n in range(1, 9)]
    assert f"base: fixture {node}/opt/fixtures/gpu-airgap/containerd/config.toml.base" in out
    assert f"{node}/root/toolkit/report.txt" in step_lines[7]


@pytest.mark.parametrize(("engine", "previewed"), [
    ("containerd", [1, 2, 4, 5, 6, 7, 8]),
    ("docker", [1, 2, 4, 5, 6, 8]),  # no RuntimeClass for Docker
])
def test_step_lines_say_would_in_a_dry_run_and_what_was_done_in_a_real_one(
    tmp_path: Path, engine: str, previewed: list[int]
) -> None:
    """Every file is planned in memory before the real writes: the lines of a real run must
    still say what was done, not what would be."""

    def outcomes(*args: str) -> list[str]:  # "[n/8] title: path: outcome" -> outcome
        out = run_cli("setup", "--engine", engine, "--root", str(tmp_path), *args).out
        return [line.split(": ", 2)[2] for line in out.splitlines() if line.startswith("[")]

    dry = outcomes("--dry-run")
    assert [n for n in range(1, 9) if "would " in dry[n - 1]] == previewed
    real = outcomes()
    assert not [line for line in real if "would" in line]
    assert real[3].endswith("(created)") and real[7] == "created"


def test_second_setup_changes_no_byte(node: Path) -> None:
    assert run_cli("setup", "--root", str(node)).code == 0
    first = _snapshot(node)
    second = run_cli("setup", "--root", str(node))
    assert second.code == 0
    assert "already registered" in second.out
    assert _snapshot(node) == first


def test_dry_run_writes_nothing_and_shows_diffs(tmp_path: Path) -> None:
    root = tmp_path / "node"
    stage_fixture(root)
    before = _snapshot(root)
    result = run_cli("setup", "--root", str(root), "--dry-run")
    assert result.code == 0
    assert "+HANDLER=nvidia" in result.out
    assert "nothing written" in result.out
    assert _snapshot(root) == before


def test_check_passes_after_setup(node: Path) -> None:
    run_cli("setup", "--root", str(node))
    result = run_cli("check", "--root", str(node))
    assert result.code == 0, result.out
    assert result.out.splitlines()[-1] == "17 passed, 0 failed"


def test_setup_uses_the_shipped_base_when_nothing_else_exists(tmp_path: Path) -> None:
    result = run_cli("setup", "--root", str(tmp_path), env={"PATH": "/nonexistent"})
    assert result.code == 0, result.err
    assert "gpuready's built-in base" in result.out
    assert (tmp_path / "root/toolkit/report.txt").read_text() == CONTRACT_FILES[
        "root/toolkit/report.txt"]


def test_setup_keeps_an_existing_cdi_spec(node: Path) -> None:
    spec = node / "etc/cdi/nvidia.yaml"
    spec.parent.mkdir(parents=True)
    text = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: gpu0\n  containerEdits:\n" \
           "    deviceNodes:\n    - path: /dev/nvidia0\n"
    spec.write_text(text)
    assert run_cli("setup", "--root", str(node)).code == 0
    assert spec.read_text() == text
    assert (node / "root/toolkit/cdi-keys.txt").read_text() == "cdiVersion\nkind\ndevices\n"


def _break(node: Path, old: str, new: str, relative: str = "etc/containerd/config.toml") -> None:
    path = node / relative
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


BROKEN = {
    "broken TOML": (
        ('[plugins."io.containerd.grpc.v1.cri".cni]', '[plugins."io.containerd.grpc.v1.cri".cni'),
        "config.toml parses", "invalid TOML",
    ),
    "SystemdCgroup as a string": (
        ("SystemdCgroup = true\n\n    [plugins", 'SystemdCgroup = "true"\n\n    [plugins'),
        "SystemdCgroup is the boolean true", "without quotes",
    ),
    "handler names no runtime": (
        ("handler: nvidia", "handler: nvidia-legacy", "root/toolkit/runtimeclass.yaml"),
        "RuntimeClass handler matches a runtime", "RunContainerError",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_fails_and_says_what_to_fix(node: Path, case: str) -> None:
    edit, failing_check, hint = BROKEN[case]
    assert run_cli("setup", "--root", str(node)).code == 0
    _break(node, *edit)
    result = run_cli("check", "--root", str(node))
    assert result.code == 1
    assert f"FAIL {failing_check}" in result.out
    assert hint in result.out
    assert "Traceback" not in result.out + result.err


def test_setup_report_says_what_is_wrong_when_a_value_cannot_be_derived(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    # "yes" is no boolean, and no spelling of one that setup could repair (as it does "true")
    base.write_text(LAB_BASE.read_text().replace("SystemdCgroup = true", 'SystemdCgroup = "yes"'))
    root = tmp_path / "node"
    result = run_cli("setup", "--root", str(root), "--base", str(into_root(root, base)),
                     "--systemd-cgroup", "inherit")
    assert result.code == 1
    report = (root / "root/toolkit/report.txt").read_text().splitlines()
    assert report[3] == "SYSTEMD_CGROUP=INVALID: runtime nvidia sets no options.SystemdCgroup"
    assert "FAIL SystemdCgroup is the boolean true" in result.out


def test_setup_json_has_status_steps_and_checks(node: Path) -> None:
    result = run_cli("setup", "--root", str(node), "--format", "json")
    report = json.loads(result.out)
    assert report["status"] == "ok"
    assert [step["step"] for step in report["steps"]] == list(range(1, 9))
    assert all(check["ok"] for check in report["checks"])


def test_bad_input_found_late_stops_setup_before_any_write(node: Path) -> None:
    spec = node / "etc/cdi/nvidia.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text("kind: [unclosed\n")
    before = _snapshot(node)
    result = run_cli("setup", "--root", str(node))
    assert result.code == 2
    assert result.err.startswith(f"gpuready: error: {spec}:2:1: invalid YAML")
    assert _snapshot(node) == before


def test_a_kept_cdi_spec_the_loader_rejects_fails_the_checks(node: Path) -> None:
    spec = node / "etc/cdi/nvidia.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    result = run_cli("setup", "--root", str(node))
    assert result.code == 1
    assert "FAIL CDI spec accepted by the CDI loader" in result.out
    assert "gpuready cdi validate" in result.out


def test_step_3_shows_the_options_as_written(tmp_path: Path) -> None:
    result = run_cli("setup", "--root", str(tmp_path), "--base", str(into_root(tmp_path, LAB_BASE)),
                     "--systemd-cgroup", "inherit")
    step3 = next(line for line in result.out.splitlines() if line.startswith("[3/8]"))
    assert step3.endswith('BinaryName = "/usr/bin/nvidia-container-runtime", SystemdCgroup = true')


def test_base_replacing_an_existing_config_says_so(node: Path) -> None:
    assert run_cli("setup", "--root", str(node)).code == 0
    other_base = LAB_BASE.parent / "containerd-1.6.20-default.toml"
    result = run_cli("setup", "--root", str(node), "--base", str(into_root(node, other_base)))
    assert "[1/8] base config" in result.out
    assert "replaced the existing file" in result.out
    assert "config.toml.gpuready.bak" in result.out
