"""SIGKILL at any moment and many writers at once: every file old or new, never a mix.

Each writing command first runs to the end on a copy of its node (the reference). Then, on a
fresh copy each time, it is killed with SIGKILL after a delay spread over its running time:
every file must hold its old bytes, or none, or the reference's new bytes; a temporary file may
be left. Run again, the command completes, no temporary file is left, and the node is byte for
byte the reference. The short version (a few kills per command) runs in CI; the long one is
marked slow (``pytest --slow``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from tests.helpers import LAB_BASE, REPO, run_cli, stage_fixture
from tests.measure import tree_snapshot

TEMPORARY = re.compile(r"\.[^/]+\.[a-z0-9_]{8}\.tmp")
CONFIG = "etc/containerd/config.toml"
FIXABLE = (
    'version = 2\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
    '  SystemdCgroup = true\n'
    '[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia]  # unquoted: lost\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
    '[plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia.options]\n'
    '  BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    '  SystemdCgroup = "true"\n'
)


def _configure(root: Path) -> list[str]:
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    return ["configure", "--root", str(root), "--enable-cdi"]


def _setup(root: Path) -> list[str]:
    stage_fixture(root)
    return ["setup", "--root", str(root), "--gpus", "8"]


def _lint_fix(root: Path) -> list[str]:
    (root / CONFIG).parent.mkdir(parents=True)
    (root / CONFIG).write_text(FIXABLE)
    return ["lint", "--fix", "--root", str(root)]


def _cdi_generate(root: Path) -> list[str]:
    (root / "etc").mkdir(parents=True)
    return ["cdi", "generate", "--root", str(root), "--gpus", "8", "--no-hooks"]


def _configure_drop_in(root: Path) -> list[str]:
    """Two files and a record: the drop-in, the main file's imports entry."""
    _configure(root)
    return ["configure", "--root", str(root), "--drop-in", "--containerd-version", "2.1"]


def _unconfigure(root: Path) -> list[str]:
    """Removing a drop-in and restoring the main file byte for byte."""
    done = run_cli(*_configure_drop_in(root))
    assert done.code == 0, done.err
    return ["unconfigure", "--root", str(root), "--containerd-version", "2.1"]


def _migrate(root: Path) -> list[str]:
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    return ["migrate", "--to", "3", "--root", str(root)]


WRITERS: dict[str, Callable[[Path], list[str]]] = {
    "configure": _configure,
    "configure-drop-in": _configure_drop_in,
    "unconfigure": _unconfigure,
    "migrate": _migrate,
    "setup": _setup,
    "lint-fix": _lint_fix,
    "cdi-generate": _cdi_generate,
}


def _snapshot(root: Path) -> dict:
    """The node's files, with the root's own path written as <root> (a record names its file)."""
    marker = str(root).encode()
    return {path: content.replace(marker, b"<root>") if isinstance(content, bytes) else content
            for path, content in tree_snapshot(root).items()}


def _spawn(argv: list[str], stderr: int = subprocess.DEVNULL) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.Popen([sys.executable, "-m", "gpuready", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr)


def _reference(tmp_path: Path, name: str) -> tuple[dict, dict, float, int]:
    """The node before, the node after a complete run, the run's duration, its exit code."""
    root = tmp_path / "reference"
    argv = WRITERS[name](root)
    before = _snapshot(root)
    start = time.monotonic()
    code = _spawn(argv).wait(timeout=120)
    return before, _snapshot(root), time.monotonic() - start, code


def _check_old_or_new(now: dict, before: dict, after: dict) -> None:
    for path, content in now.items():
        if any(TEMPORARY.fullmatch(part) for part in Path(path).parts):
            continue  # a killed writer's temporary file or folder: removed by the next run
        assert path in after or path in before, f"{path}: made by no run"
        # a file a complete run removes (unconfigure's drop-in) may still hold its old bytes
        assert content in (before.get(path), after.get(path)), f"{path}: neither old nor new"


def kill_points(duration: float, count: int) -> list[float]:
    """Delays spread over the run, denser where the writing happens (its second half)."""
    return [duration * (0.2 + 1.0 * i / count) for i in range(count)]


def _kill_and_recover(tmp_path: Path, name: str, kills: int) -> None:
    before, after, duration, code = _reference(tmp_path, name)
    assert code in (0, 1), f"{name}: the reference run failed"
    for number, delay in enumerate(kill_points(duration, kills)):
        root = tmp_path / f"killed-{number}"
        argv = WRITERS[name](root)
        child = _spawn(argv)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        _check_old_or_new(_snapshot(root), before, after)
        recovery = _spawn(argv, stderr=subprocess.PIPE)
        _, err = recovery.communicate(timeout=120)
        assert recovery.returncode == code, (
            f"{name}: the run after a kill at {delay:.2f} s failed: {err.decode(errors='replace')}")
        assert _snapshot(root) == after, f"{name}: not the reference after recovery"
        shutil.rmtree(root)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_sigkill_leaves_old_or_new_bytes_and_the_next_run_completes(tmp_path, name):
    _kill_and_recover(tmp_path, name, kills=4)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRITERS))
def test_sigkill_at_many_points(tmp_path, name):
    _kill_and_recover(tmp_path, name, kills=40)


def _runtimes(path: Path) -> dict:
    data = tomllib.loads(path.read_text())
    return data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]


def test_twenty_concurrent_writers_keep_every_name(tmp_path):
    config = tmp_path / "config.toml"
    shutil.copyfile(LAB_BASE, config)
    writers = [_spawn(["configure", "--config", str(config), "--runtime-name", f"gpu-{i}"])
               for i in range(20)]
    codes = [writer.wait(timeout=300) for writer in writers]
    assert codes == [0] * 20
    assert {f"gpu-{i}" for i in range(20)} <= set(_runtimes(config))
    assert not [p for p in tmp_path.iterdir() if TEMPORARY.fullmatch(p.name)]
    assert (tmp_path / "config.toml.gpuready.bak").read_bytes() == LAB_BASE.read_bytes()


def test_a_killed_writer_never_blocks_the_next(tmp_path):
    """A writer killed while it holds the folder's lock: the kernel drops the lock with it."""
    config = tmp_path / "config.toml"
    shutil.copyfile(LAB_BASE, config)
    for delay in (0.2, 0.4, 0.6):
        child = _spawn(["configure", "--config", str(config), "--runtime-name", "first"])
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    start = time.monotonic()
    assert run_cli("configure", "--config", str(config), "--runtime-name", "next").code == 0
    assert time.monotonic() - start < 60
    assert "next" in _runtimes(config)


def _setup_killed_at_first_flush(root: Path) -> None:
    """``setup`` on ``root``, killed when it first flushes a file's bytes to disk: the first
    file written is the record, in ``/etc/containerd``, and the run creates ``/etc`` too."""
    code = ("import os, signal, sys\n"
            "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
            "sys.argv = ['gpuready', *sys.argv[1:]]\n"
            "from gpuready.cli.main import entrypoint\n"
            "entrypoint()\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    killed = subprocess.run([sys.executable, "-c", code, *_setup(root)], env=env,
                            capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode(errors="replace")


def test_a_run_killed_while_it_creates_a_folder_leaves_no_folder_the_record_misses(tmp_path):
    """A folder gpuready creates appears together with its first file. Killed before that, the
    run leaves a temporary folder and not the empty folder: the next run then sees the same
    folders missing, and its record names them all for ``unconfigure`` to remove."""
    reference = tmp_path / "reference"
    assert run_cli(*_setup(reference)).code == 0
    root = tmp_path / "killed"
    _setup_killed_at_first_flush(root)
    assert not (root / "etc").exists(), "the folder appeared before its file"
    assert [p.name for p in root.iterdir() if TEMPORARY.fullmatch(p.name)]
    assert run_cli(*_setup(root)).code == 0
    assert _snapshot(root) == _snapshot(reference)
    assert run_cli("unconfigure", "--root", str(root)).code == 0
    assert not (root / "etc/containerd").exists() and not (root / "etc/cdi").exists()
