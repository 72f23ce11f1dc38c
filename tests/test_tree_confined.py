"""Under ``--root`` the node is the tree: a file or socket named on the command line is the
tree's, a restart goes only where this run's options send it, and nothing of this machine's
containerd is run.

The machine these tests run on has its own /etc/containerd/config.toml (Debian's containerd is
installed here): every test shows that a run on a tree never reads it nor writes it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, run_cli

CONFIG = "/etc/containerd/config.toml"


def tree(tmp_path: Path) -> Path:
    """A node root holding the lab's containerd config."""
    root = tmp_path / "node"
    (root / "etc" / "containerd").mkdir(parents=True)
    (root / "etc" / "containerd" / "config.toml").write_text(LAB_BASE.read_text())
    return root


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("command", [
    ("configure", "--dry-run", "--config", CONFIG),
    ("unconfigure", "--dry-run", "--config", CONFIG),
    ("migrate", "--to", "3", "--dry-run", "--config", CONFIG, "--containerd-version", "2.1"),
    ("show-config", "--config", CONFIG),
    ("lint", CONFIG),
    ("doctor", "--config", CONFIG),
])
def test_a_named_node_file_is_the_trees(tmp_path, command):
    """``--config /etc/containerd/config.toml`` (and ``lint FILE``) under --root is the root's
    file: the run names it, and never this machine's."""
    root = tree(tmp_path)
    before = listing(root)
    line = () if "--containerd-version" in command else ("--containerd-version", "1.7")
    result = run_cli(*command, "--root", str(root), *line)
    assert result.code in (0, 1), result.out + result.err
    shown = result.out + result.err
    inside = str(root / "etc" / "containerd" / "config.toml")
    assert inside in shown or command[0] == "show-config", shown
    for line in shown.splitlines():  # the machine's own file is never named
        assert f" {CONFIG}:" not in f" {line}" and not line.startswith(f"--- {CONFIG}"), line
    assert listing(root) == before  # dry runs and readers write nothing


def test_show_config_reads_the_trees_file_not_the_machines(tmp_path):
    root = tree(tmp_path)
    marker = "# the tree's own config"
    path = root / "etc" / "containerd" / "config.toml"
    path.write_text(marker + "\n" + path.read_text())
    result = run_cli("show-config", "--root", str(root), "--config", CONFIG,
                     "--containerd-version", "1.7", "--format", "json")
    assert result.code == 0, result.err
    assert str(path) in result.out


def test_a_host_path_inside_the_root_is_that_file(tmp_path):
    root = tree(tmp_path)
    inside = root / "etc" / "containerd" / "config.toml"
    result = run_cli("lint", "--root", str(root), str(inside), "--format", "json")
    assert result.code in (0, 1), result.err
    assert str(inside) in result.out and str(root / str(inside).lstrip("/")) not in result.out


@pytest.mark.parametrize("command", [
    ("lint", "config.toml"), ("configure", "--dry-run", "--config", "config.toml"),
    ("cdi", "validate", "spec.yaml"),
])
def test_a_relative_path_outside_the_root_is_refused(tmp_path, monkeypatch, command):
    """A relative path from a folder outside the root names no file of the node: exit 2 with
    the hint, nothing read from the current folder."""
    root = tree(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.toml").write_text(LAB_BASE.read_text())
    monkeypatch.chdir(outside)
    if command[0] == "cdi":
        result = run_cli("cdi", "validate", "--root", str(root), *command[2:])
    else:
        result = run_cli(*command, "--root", str(root))
    assert result.code == 2, result.out + result.err
    assert "under --root" in result.err and "give the node path" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_relative_path_inside_the_root_is_that_file(tmp_path, monkeypatch):
    root = tree(tmp_path)
    monkeypatch.chdir(root / "etc")
    result = run_cli("lint", "--root", str(root), "containerd/config.toml", "--format", "json")
    assert result.code in (0, 1), result.err
    assert str(root / "etc" / "containerd" / "config.toml") in result.out


# -- a restart under --root ---------------------------------------------------------------------


@pytest.mark.parametrize("command", [("configure",), ("unconfigure",), ("migrate", "--to", "3")])
def test_a_restart_under_a_root_needs_this_runs_own_restart_command(tmp_path, command):
    """Without --restart-command a --restart on a tree would restart this machine's containerd
    (systemctl) and poll its socket: refused, nothing written."""
    root = tree(tmp_path)
    before = listing(root)
    result = run_cli(*command, "--root", str(root), "--restart", "--containerd-version", "1.7")
    assert result.code == 2, result.out + result.err
    assert "--restart-command" in result.err and "nothing written" in result.err
    assert listing(root) == before


def fake_containerd(folder: Path) -> Path:
    """A ``containerd`` on PATH that leaves a mark when run: this machine's must never be."""
    folder.mkdir()
    program = folder / "containerd"
    program.write_text(f"#!/bin/sh\ntouch {folder / 'ran'}\nexit 1\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return folder


def test_a_restart_under_a_root_runs_only_this_runs_command_and_no_containerd(
        tmp_path, monkeypatch):
    """The pre-flight on a tree is the model's (no ``containerd config dump`` of this machine),
    the restart is the operator's command, and the CRI is awaited at the socket inside the
    root; nothing answers there, so the change is put back (and, containerd not answering on
    the original either, the journal stays for the next run)."""
    root = tree(tmp_path)
    before = listing(root)
    path_dir = fake_containerd(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{path_dir}{os.pathsep}{os.environ['PATH']}")
    restarted = tmp_path / "restarted"
    result = run_cli("configure", "--root", str(root), "--containerd-version", "1.7",
                     "--restart", "--restart-command", f"echo x >> {restarted}",
                     "--restart-timeout", "1")
    assert result.code == 1, result.out + result.err
    assert not (path_dir / "ran").exists(), "this machine's containerd was run"
    assert f"no answer at unix://{root}/run/containerd/containerd.sock" in result.out
    assert restarted.read_text().count("x") == 2  # restarted on the change, then on the original
    journal = "etc/containerd/config.toml.gpuready.txn.json"
    after = listing(root)
    assert after.pop(journal)  # the node is in no known state: said, and kept for the next run
    assert after == before  # every file put back, byte for byte
