"""Names, paths and locks: every one validated at the edge, nothing written outside the root.

Each case ends in exit 2 with one line that says why and not a byte changed, or does the right
thing inside the root: a relative ``--toolkit-dir``, a runtime name with a control character, a
backup slot that is a folder or a link, a ``--drop-in`` that is a glob, a folder or gpuready's own
file, and a lock another process holds.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli, stage_fixture
from tests.measure import tree_snapshot
from tests.test_bad_input import _node

CONFIG = "etc/containerd/config.toml"


def _refused(result, tmp: Path, before: dict, *, says: str) -> None:
    """Exit 2, one line naming the problem, nothing changed below ``tmp``."""
    assert result.code == 2, result.out + result.err
    assert says in result.err, result.err
    assert "internal error" not in result.err and "Traceback" not in result.err
    assert tree_snapshot(tmp) == before


@pytest.mark.parametrize("toolkit", ["rel/tk", "../../rel/tk"])
def test_a_relative_toolkit_dir_is_a_node_path_inside_the_root(tmp_path, toolkit):
    root = _node(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = run_cli("setup", "--root", str(root), "--toolkit-dir", toolkit, cwd=work)
    assert result.code == 0, result.out + result.err
    assert list(work.iterdir()) == []
    assert (root / "rel/tk/report.txt").is_file()
    assert not (tmp_path / "rel").exists()


@pytest.mark.parametrize("engine", ["containerd", "docker", "crio"])
@pytest.mark.parametrize("name", ["nvidia\n", "nv\tidia", "nvidia\x7f"])
def test_a_runtime_name_with_a_control_character_is_refused(tmp_path, engine, name):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--engine", engine, "--root", str(root), "--runtime-name", name)
    _refused(result, tmp_path, before, says="control character")


def test_setup_refuses_a_runtime_name_with_a_newline(tmp_path):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("setup", "--root", str(root), "--runtime-name", "nvidia\n")
    _refused(result, tmp_path, before, says="control character")


@pytest.mark.parametrize("kind", ["folder", "link", "dangling link"])
def test_a_backup_slot_that_is_not_a_file_is_refused(tmp_path, kind):
    root = _node(tmp_path)
    backup = root / (CONFIG + ".gpuready.bak")
    if kind == "folder":
        backup.mkdir()
    else:
        target = tmp_path / ("elsewhere" if kind == "link" else "nowhere")
        if kind == "link":
            target.write_text("not the original\n")
        backup.symlink_to(target)
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root))
    _refused(result, tmp_path, before, says="nothing written")
    assert "backup of the original" not in result.out


@pytest.mark.parametrize("drop_in", [
    "/etc/containerd/conf.d/*.toml",
    "/etc/containerd/conf.d/nvidia-[0].toml",
    "/etc/containerd/conf.d/",
    "/etc/containerd/conf.d/.",
    "/etc/containerd/config.toml.gpuready.bak",
    "/etc/containerd/config.toml.gpuready.json",
    "/etc/containerd/conf.d/99-nvidia.toml.gpuready.bak",
    "/etc/containerd/conf.d/99\n.toml",
])
def test_a_drop_in_that_is_no_plain_file_is_refused(tmp_path, drop_in):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), "--drop-in", drop_in)
    _refused(result, tmp_path, before, says="--drop-in")


def test_a_held_lock_is_named_and_given_up_on(tmp_path):
    """Another process holds the folder's lock: gpuready says whom it waits for, then gives up."""
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    fd = os.open(root / "etc/containerd", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for command in (["configure"], ["setup"], ["configure", "--drop-in"]):
            start = time.monotonic()
            result = run_cli(*command, "--root", str(root), env={"GPUREADY_LOCK_WAIT": "1.5"})
            assert time.monotonic() - start < 30
            _refused(result, tmp_path, before, says="nothing written")
            assert "waiting for the lock" in result.err
            assert f"process {os.getpid()}" in result.err
    finally:
        os.close(fd)


def test_the_lock_wait_must_be_seconds(tmp_path):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), env={"GPUREADY_LOCK_WAIT": "nan"})
    _refused(result, tmp_path, before, says="GPUREADY_LOCK_WAIT")


def test_concurrent_setups_wait_for_each_other(tmp_path):
    root = tmp_path / "node"
    root.mkdir()
    stage_fixture(root)
    environment = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    runs = [subprocess.Popen([sys.executable, "-m", "gpuready", "setup", "--root", str(root)],
                             env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True) for _ in range(6)]
    outcomes = [(run.wait(timeout=120), run.stderr.read()) for run in runs]
    for run in runs:
        run.stderr.close()
    assert [code for code, _ in outcomes] == [0] * 6, outcomes
    assert run_cli("setup", "--root", str(root)).code == 0
