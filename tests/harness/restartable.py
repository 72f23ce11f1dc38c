"""A real containerd that another process can restart, as systemd would on a node.

The daemon's pid lives in ``folder/pid``; :attr:`RestartableContainerd.restart_command` is a shell
command (for gpuready's ``--restart-command``) that stops that daemon, waits until it is gone and
starts a new one on the same folder and config file, detached. These test machines do not run
systemd as PID 1, so this is how a test restarts containerd through gpuready. A subclass may
run the script through a prefix (``nsenter`` into a mount namespace) and name the config as the
daemon sees it there (tests/harness/namespaced.py).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.harness.containerd import START_TIMEOUT, STOP_TIMEOUT, Containerd

BOOTED = "containerd successfully booted"

RESTART_SCRIPT = """\
import os, signal, subprocess, sys, time

folder, config, binary = sys.argv[1], sys.argv[2], sys.argv[3]
pidfile = os.path.join(folder, "pid")


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # a zombie no one reaps is gone too


if os.path.exists(pidfile):
    pid = int(open(pidfile).read())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + %(stop)s
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not gone(pid):
        os.kill(pid, signal.SIGKILL)
log = open(os.path.join(folder, "containerd.log"), "ab")
process = subprocess.Popen(
    [binary, "--config", config],
    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
)
with open(pidfile, "w") as handle:
    handle.write(str(process.pid))
"""


class RestartableContainerd(Containerd):
    """A :class:`Containerd` started and restarted by a script, its pid kept in a file.

    ``enter``: the argv the script runs under (``nsenter ... --``: the daemon starts in that
    namespace); ``config_argument``: the config's path as the daemon is given it there."""

    def __init__(self, config_text: str, folder: Path, *, binary: str = "containerd",
                 config_path: Path | None = None, socket: Path | None = None,
                 enter: tuple[str, ...] = (), config_argument: str | None = None) -> None:
        super().__init__(config_text, folder, binary=binary, config_path=config_path,
                         socket=socket)
        self.script = folder / "restart.py"
        self.script.write_text(RESTART_SCRIPT % {"stop": STOP_TIMEOUT})
        self.pid_file = folder / "pid"
        self.enter = enter
        self.config_argument = config_argument or str(self.config_path)

    @property
    def restart_command(self) -> str:
        """The shell command that restarts this daemon (what systemctl would do on a node)."""
        return " ".join(shlex.quote(part) for part in (
            *self.enter, sys.executable, str(self.script), str(self.folder),
            self.config_argument, self.binary))

    @property
    def pid(self) -> int | None:
        """The running daemon's process id, from the pid file."""
        if not self.pid_file.exists():
            return None
        pid = int(self.pid_file.read_text())
        return None if _gone(pid) else pid

    def boots(self) -> int:
        """How many times a daemon on this folder has finished starting."""
        return self.log_text().count(BOOTED)

    def start(self) -> RestartableContainerd:
        """Start (or restart) through the script and wait until the new daemon has booted."""
        booted = self.boots()
        subprocess.run(shlex.split(self.restart_command), check=True, timeout=STOP_TIMEOUT + 10)
        self.wait_for_boot(booted)
        return self

    def wait_for_boot(self, booted_before: int) -> None:
        """Wait until the log shows one more boot than ``booted_before`` (or fail with it)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.boots() > booted_before and self.socket.exists():
                return
            if self.pid is None:
                raise RuntimeError(f"containerd exited:\n{self.log_text()}")
            time.sleep(0.1)
        raise RuntimeError(f"containerd did not come up in {START_TIMEOUT:g}s:\n{self.log_text()}")

    def stop(self) -> None:
        """SIGTERM the daemon (SIGKILL after a while), then any of its shims left behind."""
        pid = self.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while not _gone(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not _gone(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for shim in self.shim_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(shim, signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")
