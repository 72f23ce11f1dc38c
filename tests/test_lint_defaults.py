"""No false alarms on real configs, fixes containerd accepts, an up-to-date rule reference."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.containerd.files import Options
from gpuready.rules import REGISTRY
from gpuready.rules.docs import markdown
from gpuready.rules.engine import lint_paths
from tests.rules_support import ALL_RULES, CASES, DATA, NODE, containerd_accepts, run_cli

DEFAULTS = sorted((DATA / "containerd").glob("*.toml"))
# Each line's recorded full-plugin `config default`, and the line configure is told it runs.
FULL_DEFAULTS = {"1.6.20": "1.6", "1.7.34": "1.7", "2.1.9": "2.1", "2.3.4": "2.3"}
KEY_RULES = {"unknown-key", "moved-key"}
REPO = Path(__file__).resolve().parent.parent
FIXABLE = sorted(name for name, rule in REGISTRY.items() if rule.fixable)


def lint(path: Path, root: Path):
    return lint_paths([path], options=Options(root=root), selected=ALL_RULES).problems


@pytest.mark.parametrize("path", DEFAULTS, ids=lambda p: p.name)
def test_defaults_only_lack_the_runtime(path, tmp_path):
    problems = lint(path, tmp_path)
    assert [p.rule for p in problems] == ["runtime-not-registered"], problems
    assert problems[0].line is not None


@pytest.mark.parametrize("release", sorted(FULL_DEFAULTS))
def test_full_plugin_default_has_no_key_finding_before_or_after_configure(
    release, tmp_path, capsys
):
    source = DATA / "containerd" / f"containerd-{release}-default.toml"
    assert [p for p in lint(source, tmp_path) if p.rule in KEY_RULES] == []
    copy = tmp_path / "config.toml"
    shutil.copy(source, copy)
    code, _, err = run_cli(["configure", "--config", str(copy), "--containerd-version",
                            FULL_DEFAULTS[release]], capsys)
    assert code == 0, err
    assert "nvidia" in copy.read_text()
    problems = [p for p in lint(copy, tmp_path) if p.rule in KEY_RULES]
    assert problems == [], [f"{p.rule}: {p.key_path}" for p in problems]


def test_registered_lab_base_is_clean_when_the_binary_is_there():
    assert lint(DATA / "lab-base-registered.toml", NODE) == []


def test_registered_lab_base_only_misses_the_binary_on_an_empty_root(tmp_path):
    problems = lint(DATA / "lab-base-registered.toml", tmp_path)
    assert [p.rule for p in problems] == ["binary-missing"]


@pytest.mark.parametrize("name", FIXABLE)
def test_every_fixable_rule_has_a_fixable_case(name):
    assert (CASES / name / "bad.toml").is_file()


@pytest.mark.containerd
@pytest.mark.parametrize("name", FIXABLE)
def test_fix_produces_a_clean_file_containerd_accepts(name, tmp_path, capsys):
    path = tmp_path / "config.toml"
    shutil.copy(CASES / name / "bad.toml", path)
    (tmp_path / "etc").mkdir()  # the folder is the node: --root needs an etc/
    code, out, _ = run_cli(["lint", "--fix", "--root", str(tmp_path), str(path)], capsys)
    assert code == 0, out
    assert f"fixed: {name} ×1" in out
    assert lint(path, tmp_path) == []
    assert "# <-" in path.read_text()  # the comment on the repaired line survives
    result = containerd_accepts(path)
    assert result.returncode == 0, result.stderr


@pytest.mark.containerd
@pytest.mark.parametrize("path", DEFAULTS, ids=lambda p: p.name)
def test_fix_leaves_clean_defaults_alone(path, tmp_path, capsys):
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    (tmp_path / "etc").mkdir()
    code, out, _ = run_cli(["lint", "--fix", "--root", str(tmp_path), str(copy)], capsys)
    assert code in (0, 1), out
    assert copy.read_bytes() == path.read_bytes()


def test_rules_md_is_generated_from_the_docstrings():
    assert (REPO / "docs" / "rules.md").read_text() == markdown(), (
        "docs/rules.md is stale: run PYTHONPATH=src python3 scripts/generate_docs.py"
    )


def test_generate_docs_check_mode_agrees():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_docs.py"), "--check"],
        env={"PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_rules_command_lists_and_explains(capsys):
    code, out, _ = run_cli(["rules"], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == list(REGISTRY)
    code, out, _ = run_cli(["rules", "bool-as-string"], capsys)
    assert code == 0 and out.startswith("bool-as-string (error; checked by lint, doctor; fixable")
    for section in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix"):
        assert f"\n{section}\n" in out
    code, _, err = run_cli(["rules", "no-such-rule"], capsys)
    assert code == 2 and "unknown rule" in err
    code, out, _ = run_cli(["rules", "--markdown"], capsys)
    assert out == markdown()
