"""Stopping what a test harness started, by process id, and removing its folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path


def terminate(process: subprocess.Popen | None, *, timeout: float,
              leftovers: Iterable[int] = ()) -> None:
    """SIGTERM ``process`` (SIGKILL after ``timeout``), then SIGKILL each pid in ``leftovers``
    (the children a stopped daemon left behind)."""
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def remove_folder(folder: Path) -> None:
    """Unmount what a daemon left mounted under ``folder`` (deepest first), then delete it."""
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(str(folder) + "/")
    ]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)
