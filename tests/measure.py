"""Running the command line as a child and measuring what it cost: wall time and peak RSS.

Peak RSS is the child's own ``ru_maxrss`` from ``os.wait4`` (kilobytes on Linux), not a guess
from outside. A memory limit (``RLIMIT_AS``) can be set in the child before it starts, so a
hostile input that makes the work grow ends the child instead of the machine.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import REPO

MAX_SECONDS = 5.0
MAX_RSS_MB = 256
HOSTILE_MEMORY_LIMIT_MB = 1024


@dataclass
class Measured:
    """What one run returned and cost."""

    code: int
    out: str
    err: str
    seconds: float
    peak_rss_mb: float
    cpu_seconds: float


def run_measured(*args: str, memory_limit_mb: int | None = HOSTILE_MEMORY_LIMIT_MB,
                 timeout: float = 60, cwd: Path | None = None) -> Measured:
    """Run ``python -m gpuready ARGS`` and measure it; a run past ``timeout`` is killed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUREADY_DEBUG", None)

    def limit() -> None:
        if memory_limit_mb is not None:
            size = memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        child = subprocess.Popen([sys.executable, "-m", "gpuready", *args], stdout=out,
                                 stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                 preexec_fn=limit)
        status, usage = _wait(child, start + timeout)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Measured(os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"),
                        err.read().decode(errors="replace"), seconds, usage.ru_maxrss / 1024,
                        usage.ru_utime + usage.ru_stime)


def _wait(child: subprocess.Popen, deadline: float):
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            return status, usage
        if time.monotonic() > deadline:
            os.kill(child.pid, signal.SIGKILL)
        time.sleep(0.005)


def tree_snapshot(root: Path) -> dict[str, object]:
    """Every path below ``root`` with its bytes (files), link target (links) or None (folders)."""
    found: dict[str, object] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if path.is_symlink():
            found[relative] = ("link", os.readlink(path))
        elif path.is_file():
            found[relative] = path.read_bytes()
        elif path.is_dir():
            found[relative] = None
        else:
            found[relative] = ("special", path.lstat().st_mode)
    return found
