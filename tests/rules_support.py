"""Shared helpers for the rule, lint and doctor tests: case data, a node sandbox, the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuready.containerd.files import Options
from gpuready.rules import REGISTRY
from gpuready.rules.engine import doctor, lint_paths

DATA = Path(__file__).parent / "data"
CASES = DATA / "rules"
NODE = DATA / "node"
MARKER = "# <-"
ALL_RULES = frozenset(REGISTRY)
# The release doctor applies unless a case says otherwise, so results do not depend on the
# containerd installed where the tests run.
DEFAULT_RELEASE = "1.6.20"


def is_lint_case(name: str) -> bool:
    """True when the rule's cases are single config files (bad.toml/good.toml)."""
    return (CASES / name / "bad.toml").is_file()


def is_docker_case(name: str) -> bool:
    """True when the rule's cases are daemon.json files (bad.json/good.json, bad.lines)."""
    return (CASES / name / "bad.json").is_file()


def _executables(root: Path) -> None:
    """The runtimes the Docker and CRI-O cases name, as executables under the case's root."""
    for name in ("nvidia-container-runtime", "runc", "crun"):
        path = root / "usr" / "bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)


def docker_case(name: str, which: str, tmp_path: Path):
    """Lint a Docker case's ``bad.json``/``good.json`` (its ``docker-version`` file, if any, is
    the release whose keys apply)."""
    from gpuready.engines.docker.installed import parse_release
    from gpuready.engines.docker.lint import lint_daemon_json

    case = CASES / name
    root = tmp_path / "root"
    _executables(root)
    version = case / "docker-version"
    release = parse_release(f"version {version.read_text()}") if version.is_file() else None
    return lint_daemon_json([case / f"{which}.json"], options=Options(root=root),
                            selected=ALL_RULES, release=release).problems


def crio_case(name: str, which: str, tmp_path: Path):
    """Lint a CRI-O case: its ``bad/`` or ``good/`` folder is a node's /etc/crio."""
    from gpuready.engines.crio.lint import lint_crio, node_paths

    root = tmp_path / which
    shutil.copytree(CASES / name / which, root)
    _executables(root)
    options = Options(root=root)
    return lint_crio(node_paths(options.node), options=options, selected=ALL_RULES).problems


def crio_marked(name: str) -> set[tuple[str, int]]:
    """(file name, line) of every ``# <-`` marker in a CRI-O case's ``bad/`` files."""
    found = set()
    for path in (CASES / name / "bad").rglob("*"):
        if path.is_file():
            found |= {(path.name, line) for line in marked_lines(path)}
    return found


def marked_lines(path: Path) -> set[int]:
    """The lines a case file marks with ``# <-``: where the rule must report."""
    return {n for n, line in enumerate(path.read_text().splitlines(), 1) if MARKER in line}


def lint_case(name: str, which: str, tmp_path: Path):
    """Lint ``bad.toml``/``good.toml`` of a case, with the case's ``root/`` as --root."""
    case = CASES / name
    root = case / "root" if (case / "root").is_dir() else tmp_path / "empty-root"
    root.mkdir(exist_ok=True)
    report = lint_paths([case / f"{which}.toml"], options=Options(root=root), selected=ALL_RULES)
    return report.problems


def node_sandbox(tmp_path: Path, overlay: Path | None = None) -> Path:
    """A copy of the base node with ``overlay`` copied over it (its REMOVE file lists deletions)."""
    root = tmp_path / "node"
    shutil.copytree(NODE, root)
    if overlay is not None and overlay.is_dir():
        shutil.copytree(overlay, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("REMOVE"))
        remove = overlay / "REMOVE"
        if remove.is_file():
            for line in remove.read_text().split():
                (root / line).unlink()
    return root


def case_release(name: str) -> str:
    """The containerd release a doctor case is checked against (its ``args`` file, if any)."""
    args = CASES / name / "args"
    if args.is_file():
        words = args.read_text().split()
        return words[words.index("--containerd-version") + 1]
    return DEFAULT_RELEASE


def doctor_case(name: str, which: str, tmp_path: Path):
    """Run doctor on the base node overlaid with a case's ``bad/`` or ``good/`` folder."""
    root = node_sandbox(tmp_path, CASES / name / which)
    report = doctor(
        options=Options(root=root), selected=ALL_RULES, containerd_version=case_release(name)
    )
    return report.problems


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run the gpuready command line in-process; return (exit code, stdout, stderr)."""
    from gpuready.cli import main

    code = main.run(argv)
    out, err = capsys.readouterr()
    return code, out, err


def containerd_binary() -> str:
    """The real containerd; under CI=true its absence fails the test instead of skipping it."""
    found = shutil.which("containerd") or (
        "/usr/bin/containerd" if Path("/usr/bin/containerd").exists() else None
    )
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("containerd is required under CI=true (apt-get install containerd)")
    pytest.skip("containerd is not installed")


def containerd_accepts(config: Path) -> subprocess.CompletedProcess:
    """``containerd --config FILE config dump``: loads the file as containerd would."""
    return subprocess.run(
        [containerd_binary(), "--config", str(config), "config", "dump"],
        capture_output=True,
        text=True,
        timeout=60,
    )
