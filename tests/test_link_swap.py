"""Writes a link cannot redirect, and edits gpuready never loses (README, Safety).

A folder of the node swapped for a symbolic link to a folder outside ``--root`` while a writing
command runs must not move a single byte out of the root: the command either finishes inside
the root or fails with one line naming the path. The flip is injected before each of the
command's path operations in turn (an audit hook in the child, :data:`RUNNER`), and (``--slow``)
raced freely from a thread, 200 times per command.

An operator's editor that changes the config while gpuready writes it (renaming its copy over
the file, or rewriting it in place) never loses its edit: gpuready either wrote before the edit,
or swaps the edit back and refuses (exit 1).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, REPO, stage_fixture
from tests.link_flip import RUNNER, run_flipped
from tests.measure import tree_snapshot

CONFIG = "etc/containerd/config.toml"



def _configure(root: Path) -> list[str]:
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    return ["configure", "--root", str(root), "--enable-cdi"]


def _cdi_generate(root: Path) -> list[str]:
    (root / "etc").mkdir(parents=True)
    return ["cdi", "generate", "--root", str(root), "--gpus", "8", "--no-hooks"]


def _setup(root: Path) -> list[str]:
    stage_fixture(root)
    (root / "etc").mkdir()
    return ["setup", "--root", str(root), "--gpus", "8"]


def _drop_in(root: Path) -> list[str]:
    _configure(root)
    return ["configure", "--root", str(root), "--drop-in", "--containerd-version", "1.7"]


def _unconfigure(root: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "gpuready", *_configure(root)[:3]],
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return ["unconfigure", "--root", str(root)]


def _migrate(root: Path) -> list[str]:
    _configure(root)
    return ["migrate", "--to", "3", "--root", str(root), "--containerd-version", "2.1"]


def _lint_fix(root: Path) -> list[str]:
    _configure(root)
    config = root / CONFIG
    config.write_text(config.read_text().replace("SystemdCgroup = true",
                                                 'SystemdCgroup = "true"'))
    return ["lint", "--fix", "--root", str(root), "--containerd-version", "1.7"]


def _cdi_refresh(root: Path) -> list[str]:
    (root / "etc").mkdir(parents=True)
    return ["cdi", "refresh", "--root", str(root), "--gpus", "8", "--no-hooks"]


def _docker(root: Path) -> list[str]:
    (root / "etc" / "docker").mkdir(parents=True)
    (root / "etc" / "docker" / "daemon.json").write_text('{"log-level": "info"}\n')
    return ["configure", "--engine", "docker", "--root", str(root)]


def _crio(root: Path) -> list[str]:
    (root / "etc" / "crio").mkdir(parents=True)
    (root / "etc" / "crio" / "crio.conf").write_text("[crio.runtime]\n")
    return ["configure", "--engine", "crio", "--root", str(root)]


# each writing command, and the folders of its node a link is swapped in for
WRITERS: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    "configure": (_configure, ("etc/containerd", "etc")),
    "configure-drop-in": (_drop_in, ("etc/containerd",)),
    "unconfigure": (_unconfigure, ("etc/containerd",)),
    "migrate": (_migrate, ("etc/containerd",)),
    "lint-fix": (_lint_fix, ("etc/containerd",)),
    "cdi-generate": (_cdi_generate, ("etc",)),
    "cdi-refresh": (_cdi_refresh, ("etc",)),
    "setup": (_setup, ("etc", "etc/containerd")),
    "docker": (_docker, ("etc/docker",)),
    "crio": (_crio, ("etc/crio",)),
}


class Node:
    """A fresh node for one run, and a folder outside its root that must stay as it is."""

    def __init__(self, base: Path, name: str, folder: str) -> None:
        if base.exists():
            shutil.rmtree(base)
        self.root = base / "root"
        self.argv = WRITERS[name][0](self.root)
        self.folder = self.root / folder
        self.outside = base / "outside" / self.folder.name
        if self.folder.is_dir():
            shutil.copytree(self.folder, self.outside, symlinks=True)
        else:
            self.outside.mkdir(parents=True)
        self.before = tree_snapshot(base / "outside")

    def flip(self) -> None:
        """Swap the folder for a link to the copy outside (the folder itself moves aside)."""
        if os.path.lexists(self.folder):
            os.rename(self.folder, f"{self.folder}.moved")
        os.symlink(self.outside, self.folder)

    def unflip(self) -> None:
        """The folder back in its place, the link gone."""
        if os.path.islink(self.folder):
            os.unlink(self.folder)
        if os.path.isdir(f"{self.folder}.moved") and not os.path.lexists(self.folder):
            os.rename(f"{self.folder}.moved", self.folder)

    def outside_changed(self) -> bool:
        """True when anything was written, created or removed outside the root."""
        return tree_snapshot(self.outside.parent) != self.before


def _run_flipped(node: Node, at: int, runner: Path, count_file: Path) -> tuple[int, str]:
    done = run_flipped(node.argv, runner=runner, root=node.root, folder=node.folder,
                       target=node.outside, at=at, count_file=count_file)
    return done.returncode, done.stderr


def _assert_clear(code: int, err: str, node: Node, what: str) -> None:
    assert "Traceback" not in err and "internal error" not in err, f"{what}: {err}"
    assert code in (0, 1, 2), f"{what}: exit {code}: {err}"
    if code == 1 and node.argv[0] == "lint" and "gpuready: error: " not in err:
        return  # lint's findings (what --fix leaves) on standard output, not an error
    if code:  # one error line (beside the notes a run prints anyway), naming the path
        errors = [line for line in err.splitlines() if line.startswith("gpuready: error: ")]
        assert len(errors) == 1, f"{what}: {err}"
        assert str(node.root) in errors[0], f"{what}: the error names no path: {err}"


# the writers whose sweep runs in CI; the others (the same writer, other commands) with --slow
IN_CI = ("configure", "cdi-generate", "setup")


@pytest.mark.parametrize("name,folder", [
    pytest.param(name, folder, marks=() if name in IN_CI else pytest.mark.slow)
    for name, (_, folders) in WRITERS.items() for folder in folders])
def test_a_link_swapped_in_before_any_path_operation_moves_nothing_out(
        tmp_path: Path, name: str, folder: str) -> None:
    """Before each path operation of the command in turn, ``folder`` becomes a link to a copy
    outside the root: nothing outside changes, and a run that fails says why in one line."""
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    count_file = tmp_path / "count"
    node = Node(tmp_path / "node", name, folder)
    code, err = _run_flipped(node, 0, runner, count_file)
    assert code in ((0, 1) if name == "lint-fix" else (0,)), err  # lint: findings left: 1
    operations = int(count_file.read_text())
    assert operations >= 4, "the hook saw no writes"
    refused = []
    for at in range(1, operations + 1):
        node = Node(tmp_path / "node", name, folder)
        code, err = _run_flipped(node, at, runner, count_file)
        what = f"{name}, {folder} swapped before operation {at} of {operations}"
        assert not node.outside_changed(), f"{what}: wrote outside the root ({err.strip()})"
        _assert_clear(code, err, node, what)
        if "is a symbolic link now" in err:
            refused.append(at)
    assert refused, f"{name}: no run met the link it was given"


GPUREADY_TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


def _writing(folder: Path) -> bool:
    """True when a temporary file or folder of gpuready's is in ``folder`` or one below it."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for entry in entries:
        if GPUREADY_TEMPORARY.fullmatch(entry.name):
            return True
        if entry.is_dir(follow_symlinks=False):
            with contextlib.suppress(OSError):
                if any(GPUREADY_TEMPORARY.fullmatch(name) for name in os.listdir(entry.path)):
                    return True
    return False


def _flip_when_writing(node: Node, pause: float, stop: threading.Event) -> None:
    """Swap the folder for a link ``pause`` seconds after gpuready starts writing in it."""
    while not stop.is_set() and not _writing(node.folder):
        pass
    if not stop.is_set():
        time.sleep(pause)
        node.flip()


def _keep_flipping(node: Node, chance: random.Random, stop: threading.Event) -> None:
    """Swap the folder for the link and back, again and again, at random moments."""
    pauses = [chance.uniform(0, 0.004) for _ in range(64)]
    turn = 0
    while not stop.is_set():
        with contextlib.suppress(OSError):  # gpuready made the folder meanwhile: next turn
            node.flip()
        time.sleep(pauses[turn % 64])
        with contextlib.suppress(OSError):
            node.unflip()
        time.sleep(pauses[(turn + 7) % 64])
        turn += 1


def _free_races(tmp_path: Path, name: str, runs: int) -> list[str]:
    """``runs`` runs, each with a thread that swaps a folder for a link once while the command
    runs: in every other run the folder becomes a link and a folder again, over and over, at
    random moments; in the others it becomes a link once, a random pause after the first
    temporary file appears (when the writing starts). Returns the runs that wrote outside the
    root."""
    chance = random.Random(f"{name}-{runs}")
    folders = WRITERS[name][1]
    escaped = []
    for run in range(runs):
        node = Node(tmp_path / "race", name, folders[run % len(folders)])
        child = subprocess.Popen(
            [sys.executable, "-m", "gpuready", *node.argv], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO / "src"), GPUREADY_LOCK_WAIT="5"))
        stop = threading.Event()
        if run % 2:
            when = "and back again and again"
            flipper = threading.Thread(target=_keep_flipping, args=(node, chance, stop))
        else:
            pause = chance.choice((0, 0.0005, 0.001, 0.002, 0.005))
            when = f"{pause * 1000:g} ms after the writing started"
            flipper = threading.Thread(target=_flip_when_writing, args=(node, pause, stop))
        flipper.start()
        err = child.communicate(timeout=120)[1]
        stop.set()
        flipper.join()
        what = f"{name}, run {run}, {node.folder.name} swapped {when}"
        if node.outside_changed():
            escaped.append(f"{what}: exit {child.returncode} {err.strip()}")
        _assert_clear(child.returncode, err, node, what)
    return escaped


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name in IN_CI else
                                                pytest.mark.slow) for name in WRITERS])
def test_a_link_raced_in_moves_nothing_out(tmp_path: Path, name: str) -> None:
    """A few free races per command; ``--slow`` runs 200."""
    assert _free_races(tmp_path, name, 6) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", list(WRITERS))
def test_two_hundred_links_raced_in_move_nothing_out(tmp_path: Path, name: str) -> None:
    """200 free races per command: 0 files outside the root."""
    assert _free_races(tmp_path, name, 200) == []


# -- no lost edit -------------------------------------------------------------------------------

# gpuready's temporary files beside the config: its backup's, then its own (the first appears
# after gpuready checked the file one last time by reading it)
TEMPORARY = re.compile(r"\.config\.toml\.(gpuready\.bak\.)?[a-z0-9_]{8}\.tmp")


def _edit_by_rename(config: Path, marker: bytes) -> None:
    """An editor that writes its copy beside the file and renames it over (vim, sed -i)."""
    text = config.read_bytes()
    copy = config.with_name(".editor-copy")
    copy.write_bytes(text + marker)
    os.rename(copy, config)


def _edit_in_place(config: Path, marker: bytes) -> None:
    """An editor that rewrites the file through its own descriptor (nano, echo >)."""
    text = config.read_bytes()
    fd = os.open(config, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text + marker)
    finally:
        os.close(fd)


EDITORS = {"rename": _edit_by_rename, "in-place": _edit_in_place}


def _edit_when_written(config: Path, edit: Callable[[Path, bytes], None], marker: bytes,
                       pause: float, stop: threading.Event) -> None:
    """Edit the config once, ``pause`` seconds after one of gpuready's temporary files appears
    beside it (gpuready has read the file and is about to swap its own in), or when stopped."""
    while not stop.is_set():
        if any(TEMPORARY.fullmatch(name) for name in os.listdir(config.parent)):
            break
    time.sleep(pause)
    edit(config, marker)


def _lost_edits(tmp_path: Path, editor: str, runs: int) -> list[str]:
    lost = []
    chance = random.Random(f"{editor}-{runs}")
    for run in range(runs):
        base = tmp_path / "edit"
        if base.exists():
            shutil.rmtree(base)
        argv = _configure(base)
        config = base / CONFIG
        marker = f"# operator's edit {run}\n".encode()
        stop = threading.Event()
        thread = threading.Thread(target=_edit_when_written, args=(
            config, EDITORS[editor], marker, chance.choice((0, 0, 0.0002, 0.001, 0.003)), stop))
        thread.start()
        done = subprocess.run([sys.executable, "-m", "gpuready", *argv], capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                              timeout=120)
        stop.set()
        thread.join()
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        if done.returncode == 1:
            assert "changed on disk while gpuready wrote it" in done.stderr or (
                "held open for writing" in done.stderr), done.stderr
        if marker not in config.read_bytes():
            lost.append(f"run {run}: exit {done.returncode} {done.stderr.strip()}")
        assert not any(TEMPORARY.fullmatch(name) for name in os.listdir(config.parent))
    return lost


@pytest.mark.parametrize("editor", list(EDITORS))
def test_an_edit_made_while_gpuready_writes_is_kept(tmp_path: Path, editor: str) -> None:
    """The editor edits just as gpuready is about to swap its file in; the edit survives."""
    assert _lost_edits(tmp_path, editor, 8) == []


@pytest.mark.slow
@pytest.mark.parametrize("editor", list(EDITORS))
def test_no_edit_lost_in_two_hundred_races(tmp_path: Path, editor: str) -> None:
    """200 runs per editor: 0 lost edits."""
    assert _lost_edits(tmp_path, editor, 200) == []


def test_a_file_held_open_for_writing_is_swapped_back_and_kept(tmp_path: Path) -> None:
    """An editor that opened the config before gpuready swapped its file in, and writes after:
    gpuready waits for it, puts the file back in place and refuses (exit 1); what the editor
    then writes lands in the config."""
    argv = _configure(tmp_path)
    config = tmp_path / CONFIG
    before = config.read_bytes()
    fd = os.open(config, os.O_WRONLY | os.O_APPEND)
    try:
        done = subprocess.run([sys.executable, "-m", "gpuready", *argv], capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                              timeout=120)
        os.write(fd, b"# written through the descriptor held open\n")
    finally:
        os.close(fd)
    assert done.returncode == 1, done.stderr
    assert "held open for writing by another process" in done.stderr
    assert config.read_bytes() == before + b"# written through the descriptor held open\n"
    assert not (tmp_path / f"{CONFIG}.gpuready.bak").exists()  # no backup of a change not made
    assert not any(GPUREADY_TEMPORARY.fullmatch(name) for name in os.listdir(config.parent))


def test_without_renameat2_a_write_checks_then_renames(tmp_path: Path, monkeypatch) -> None:
    """Where the C library has no ``renameat2`` (or the file system no exchange), gpuready still
    writes, backs up and records as before: it checks the file, then renames over it."""
    from gpuready import atfile
    from gpuready.cli import main

    monkeypatch.setattr(atfile, "_FUNCTION", [None])
    argv = _configure(tmp_path)
    before = (tmp_path / CONFIG).read_bytes()
    assert main.run(argv) == 0
    assert b"runtimes.nvidia" in (tmp_path / CONFIG).read_bytes()
    assert (tmp_path / f"{CONFIG}.gpuready.bak").read_bytes() == before
    assert main.run(argv) == 0  # nothing to do the second time
