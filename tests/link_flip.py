"""A folder swapped for a symbolic link before one path operation of a child process.

:data:`RUNNER` is the child's program: it counts the path operations the writer makes inside the
root and, before the ``at``-th, swaps a folder for a link to a folder outside the root. Used by
``tests/test_link_swap.py`` (gpuready's commands) and ``tests/test_ansible_node_file.py`` (the
Ansible collection's writer on the node).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

# Runs gpuready (or the script FLIP_SCRIPT names) with an audit hook that counts the path
# operations the writer makes (opens for writing or of folders, any open by a name relative to a
# folder descriptor, renames, new folders, removals, mode and owner changes) on paths inside the
# root, and at the FLIP_AT-th swaps FLIP_FOLDER for a link to FLIP_TARGET, before the operation
# itself runs.
RUNNER = r'''
import atexit, os, runpy, sys

ROOT = os.environ["FLIP_ROOT"].rstrip("/") + "/"
FOLDER, TARGET = os.environ["FLIP_FOLDER"], os.environ["FLIP_TARGET"]
AT = int(os.environ["FLIP_AT"])
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_DIRECTORY
EVENTS = {"os.rename", "gpuready.renameat2", "os.mkdir", "os.remove", "os.rmdir", "os.chmod",
          "os.chown", "os.symlink", "os.truncate", "os.utime"}
state = {"count": 0, "busy": False}


def counted(event, args):
    if event == "open":
        path, _, flags = args
        if not isinstance(path, (str, bytes)):
            return False
        path = os.fsdecode(path)
        if path.startswith("/"):
            return path.startswith(ROOT) and bool(flags & WRITING)
        return True  # a name in a folder opened before
    if event in EVENTS:
        path = args[0]
        path = os.fsdecode(path) if isinstance(path, (str, bytes)) else ""
        return not path.startswith("/") or path.startswith(ROOT)
    return False


def flip():
    if os.path.lexists(FOLDER):
        os.rename(FOLDER, FOLDER + ".moved")
    os.symlink(TARGET, FOLDER)


def hook(event, args):
    if state["busy"] or not counted(event, args):
        return
    state["count"] += 1
    if state["count"] == AT:
        state["busy"] = True
        try:
            flip()
        finally:
            state["busy"] = False


def report():
    with open(os.environ["FLIP_COUNT_FILE"], "w") as handle:
        handle.write(str(state["count"]))


sys.addaudithook(hook)
atexit.register(report)
SCRIPT = os.environ.get("FLIP_SCRIPT")
if SCRIPT:  # a script of its own (a module of the Ansible collection), else gpuready itself
    sys.argv = [SCRIPT, *sys.argv[1:]]
    runpy.run_path(SCRIPT, run_name="__main__")
else:
    sys.argv = ["gpuready", *sys.argv[1:]]
    runpy.run_module("gpuready", run_name="__main__", alter_sys=True)
'''


def run_flipped(argv: list[str], *, runner: Path, root: Path, folder: Path, target: Path,
                at: int, count_file: Path, script: Path | None = None,
                ) -> subprocess.CompletedProcess:
    """Run :data:`RUNNER` (written at ``runner``) with ``argv``: gpuready, or ``script``; before
    its ``at``-th path operation inside ``root``, ``folder`` becomes a link to ``target`` (0:
    never). The number of operations it saw is written to ``count_file``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(REPO / "src"), str(REPO))),
               FLIP_ROOT=str(root), FLIP_FOLDER=str(folder), FLIP_TARGET=str(target),
               FLIP_AT=str(at), FLIP_COUNT_FILE=str(count_file), GPUREADY_LOCK_WAIT="5")
    if script is not None:
        env["FLIP_SCRIPT"] = str(script)
    if not runner.exists():
        runner.write_text(RUNNER)
    return subprocess.run([sys.executable, str(runner), *argv], env=env, capture_output=True,
                          text=True, timeout=120)
