"""``gpuready lint`` end to end: the mistakes operators make, found with rule, line and fix."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from gpuready.rules import REGISTRY
from tests.rules_support import DATA, NODE, containerd_accepts, run_cli

REGISTERED = DATA / "lab-base-registered.toml"
NVIDIA_HEADER = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]'
NVIDIA_OPTIONS = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]'


@pytest.fixture
def node_root(tmp_path):
    """A --root that has the NVIDIA runtime binary, so binary-missing stays quiet; the files
    the tests lint lie in it (under --root, a FILE is a file of the node)."""
    root = tmp_path
    (root / "usr" / "bin").mkdir(parents=True)
    shutil.copy2(NODE / "usr/bin/nvidia-container-runtime", root / "usr/bin")
    return root


def write_variant(tmp_path, old: str, new: str):
    text = REGISTERED.read_text()
    assert old in text
    path = tmp_path / "config.toml"
    path.write_text(text.replace(old, new))
    return path


def line_of(path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_seed_mistake_unquoted_header_is_found_with_line_and_fix(tmp_path, node_root, capsys):
    path = write_variant(
        tmp_path, NVIDIA_HEADER, "[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia]"
    )
    code, out, _ = run_cli(["lint", "--root", str(node_root), str(path)], capsys)
    line = line_of(path, "[plugins.io.containerd")
    assert code == 1
    assert f"{path}:{line}:9: error unquoted-plugin-key: plugin ID io.containerd.grpc.v1.cri" in out
    assert f"fix: write {NVIDIA_HEADER} (gpuready lint --fix)" in out


def test_seed_mistake_systemd_cgroup_string_is_found_with_line_and_fix(tmp_path, node_root, capsys):
    path = write_variant(
        tmp_path,
        'BinaryName = "/usr/bin/nvidia-container-runtime"\n            SystemdCgroup = true',
        'BinaryName = "/usr/bin/nvidia-container-runtime"\n            SystemdCgroup = "true"',
    )
    code, out, _ = run_cli(["lint", "--root", str(node_root), str(path)], capsys)
    line = line_of(path, 'SystemdCgroup = "true"')
    assert code == 1
    assert re.search(
        rf"{re.escape(str(path))}:{line}:13: error bool-as-string: SystemdCgroup is the "
        r"string 'true'",
        out,
    )
    assert "fix: write SystemdCgroup = true without quotes" in out
    assert "1 error, 0 warnings" in out


def test_v3_snippet_pasted_into_v2_file_is_found(tmp_path, node_root, capsys):
    snippet = (
        '\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]\n'
        '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
        "    SystemdCgroup = true\n"
    )
    path = tmp_path / "config.toml"
    path.write_text((DATA / "containerd" / "lab-base.toml").read_text() + snippet)
    code, out, _ = run_cli(["lint", "--root", str(node_root), str(path)], capsys)
    line = line_of(path, 'io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]')
    assert code == 1
    assert f"{path}:{line}:1: error wrong-version-path: runtime 'nvidia' is at" in out
    assert f"fix: move it to {NVIDIA_HEADER} (gpuready lint --fix)" in out
    assert "runtime-not-registered" not in out  # one cause, one report


@pytest.mark.parametrize(
    "header",
    [
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]',
        "[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia.options]",
    ],
    ids=["other-version-path", "unquoted-header"],
)
def test_string_bool_in_a_misplaced_runtime_is_reported_too(header, tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text(f'version = 2\n{header}\n  BinaryName = "/bin/sh"\n  SystemdCgroup = "true"\n')
    (tmp_path / "etc").mkdir()  # the folder is the node: --root needs an etc/
    code, out, _ = run_cli(["lint", "--root", str(tmp_path), str(path)], capsys)
    assert code == 1
    assert f"{path}:4:3: error bool-as-string: SystemdCgroup is the string 'true'" in out
    placement = "wrong-version-path" if "cri.v1.runtime" in header else "unquoted-plugin-key"
    assert f"{path}:2:" in out and f"error {placement}:" in out
    code, out, _ = run_cli(["lint", "--fix", "--root", str(tmp_path), str(path)], capsys)
    assert code == 0, out
    assert "SystemdCgroup = true\n" in path.read_text()


@pytest.mark.containerd
@pytest.mark.parametrize(
    "old,new",
    [
        (NVIDIA_HEADER, "[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia]"),
        (NVIDIA_OPTIONS, "[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia.options]"),
        (
            "            SystemdCgroup = true\n\n    [plugins",
            '            SystemdCgroup = "true"\n\n    [plugins',
        ),
    ],
    ids=["unquoted-runtime", "unquoted-options", "string-bool"],
)
def test_fix_repairs_the_seed_mistakes_and_containerd_accepts_the_result(
    tmp_path, node_root, capsys, old, new
):
    path = write_variant(tmp_path, old, new)
    code, out, _ = run_cli(["lint", "--fix", "--root", str(node_root), str(path)], capsys)
    assert code == 0, out
    assert "fixed:" in out and out.rstrip().endswith("no problems in 1 file")
    assert path.read_text() == REGISTERED.read_text()  # exactly the intended config, comments kept
    assert containerd_accepts(path).returncode == 0


def test_fix_dry_run_shows_the_diff_and_writes_nothing(tmp_path, capsys):
    path = write_variant(
        tmp_path, NVIDIA_HEADER, "[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia]"
    )
    before = path.read_text()
    code, out, _ = run_cli(["lint", "--fix", "--dry-run", str(path)], capsys)
    assert path.read_text() == before
    assert re.search(rf"^\+\s+{re.escape(NVIDIA_HEADER)}$", out, re.MULTILINE)
    assert "would fix: " in out and "unquoted-plugin-key ×1" in out
    assert code == 1  # the file on disk still has the problem


def test_fix_keeps_a_backup_and_a_second_run_changes_nothing(tmp_path, node_root, capsys):
    path = write_variant(
        tmp_path, NVIDIA_HEADER, "[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia]"
    )
    original = path.read_text()
    run_cli(["lint", "--fix", "--root", str(node_root), str(path)], capsys)
    assert (tmp_path / "config.toml.gpuready.bak").read_text() == original
    fixed = path.read_text()
    code, out, _ = run_cli(["lint", "--fix", "--root", str(node_root), str(path)], capsys)
    assert code == 0 and path.read_text() == fixed and "nothing fixed" in out


def test_fix_says_what_it_cannot_fix(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text(
        "version = 2\n"
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
    )
    code, out, _ = run_cli(["lint", "--fix", str(path)], capsys)
    assert code == 1
    assert "cannot fix: wrong-version-path: runtime 'nvidia' is also at" in out


def test_toml_syntax_error_is_a_problem_not_a_crash(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"\n')
    code, out, err = run_cli(["lint", str(path)], capsys)
    assert code == 1 and err == ""
    assert re.search(rf"{re.escape(str(path))}:2:\d+: error toml-syntax: not valid TOML", out)


def test_missing_file_is_exit_2_with_one_line(tmp_path, capsys):
    code, out, err = run_cli(["lint", str(tmp_path / "nope.toml")], capsys)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "nope.toml: no such file" in err


def test_default_file_is_looked_up_under_root(capsys):
    code, out, _ = run_cli(["lint", "--root", str(NODE)], capsys)
    assert code == 0 and "no problems in 1 file" in out


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_rule_name_is_a_usage_error(option, capsys):
    code, _, err = run_cli(["lint", option, "bool-as-string,no-such-rule", str(REGISTERED)], capsys)
    assert code == 2 and "unknown rule 'no-such-rule'" in err


def test_select_and_ignore_choose_the_rules(tmp_path, capsys):
    path = write_variant(
        tmp_path, "SystemdCgroup = true\n\n    [plugins", 'SystemdCgroup = "true"\n\n    [plugins'
    )
    code, out, _ = run_cli(["lint", "--ignore", "bool-as-string,binary-missing", str(path)], capsys)
    assert code == 0 and "no problems" in out
    code, out, _ = run_cli(
        ["lint", "--select", "binary-missing", "--select", "cri-disabled", str(path)], capsys
    )
    assert code == 0 and "binary-missing" in out and "bool-as-string" not in out


def test_json_report_has_a_status_and_positions(tmp_path, capsys):
    path = write_variant(
        tmp_path, "SystemdCgroup = true\n\n    [plugins", 'SystemdCgroup = "true"\n\n    [plugins'
    )
    code, out, _ = run_cli(["lint", "--format", "json", str(path)], capsys)
    report = json.loads(out)
    assert code == 1 and report["status"] == "failed" and report["command"] == "lint"
    assert report["summary"] == {"files": 1, "errors": 1, "warnings": 1, "info": 0}
    problem = next(p for p in report["problems"] if p["rule"] == "bool-as-string")
    assert problem["line"] == line_of(path, '"true"') and problem["column"] == 13
    assert problem["key_path"].endswith("runtimes.nvidia.options.SystemdCgroup")
    code, out, _ = run_cli(
        ["lint", "--format", "json", "--ignore", "bool-as-string", str(path)], capsys
    )
    assert code == 0 and json.loads(out)["status"] == "ok"


def test_sarif_report_lists_the_rules_and_locates_results(tmp_path, capsys):
    path = write_variant(
        tmp_path, "SystemdCgroup = true\n\n    [plugins", 'SystemdCgroup = "true"\n\n    [plugins'
    )
    code, out, _ = run_cli(["lint", "--format", "sarif", str(path)], capsys)
    log = json.loads(out)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(REGISTRY)
    assert all(r["help"]["text"] and r["shortDescription"]["text"] for r in rules)
    result = next(r for r in run["results"] if r["ruleId"] == "bool-as-string")
    assert result["level"] == "error"
    assert rules[result["ruleIndex"]]["id"] == "bool-as-string"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": line_of(path, '"true"'), "startColumn": 13}
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith(
        "file://"
    )


def test_dry_run_without_fix_is_a_usage_error(capsys):
    code, _, err = run_cli(["lint", "--dry-run", str(REGISTERED)], capsys)
    assert code == 2 and "--dry-run goes with --fix" in err


def test_a_file_that_imports_others_is_said_to_be_checked_alone(tmp_path, capsys):
    """lint FILE reads FILE only: a user linting a main config must be told its imports were
    not read; a file without imports gets no such note."""
    main = tmp_path / "config.toml"
    main.write_text('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    alone = tmp_path / "alone.toml"
    alone.write_text("version = 2\n")
    _, out, _ = run_cli(["lint", str(main), str(alone)], capsys)
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and str(main) in notes[0] and "imports were not read" in notes[0]
