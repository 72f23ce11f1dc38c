"""A restart of the node's containerd asked for from inside the agent's container and done by
the test, through a folder the test mounts into the container."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from tests.harness.containerd import START_TIMEOUT, STOP_TIMEOUT
from tests.harness.restartable import RestartableContainerd


class RestartChannel:
    """A restart asked for from inside a container and done by the test, through a folder the
    test mounts into it: the stand-in, in a test, for what a node's agent pod does with
    ``nsenter -t 1 -m -- systemctl restart containerd`` (or systemd's bus).

    :attr:`COMMAND` (the settings' ``restart.command``, run by ``/bin/sh`` in the container)
    leaves ``NAME.request`` in the folder, mounted at :attr:`MOUNTED_AT`, and waits for
    ``NAME.done``, whose text is its exit status. A thread here answers each request: it restarts
    ``daemon`` (stop, start, wait for the boot), records its pid before and after, and writes
    ``NAME.done``. The command returns only after the new daemon has booted, as ``systemctl
    restart`` returns after the unit has started.
    """

    MOUNTED_AT = "/run/gpuready-test-restart"
    SCRIPT = (
        "name=$(cat /proc/sys/kernel/random/uuid); "
        f': > "{MOUNTED_AT}/$name.request"; '
        f'while [ ! -e "{MOUNTED_AT}/$name.done" ]; do sleep 0.05; done; '
        f'exit "$(cat "{MOUNTED_AT}/$name.done")"'
    )
    COMMAND = ("/bin/sh", "-c", SCRIPT)

    def __init__(self, folder: Path, daemon: RestartableContainerd) -> None:
        self.folder, self.daemon = folder, daemon
        self.pids: list[tuple[int | None, int | None]] = []  # (before, after) per restart
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RestartChannel:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        self._thread.join(timeout=START_TIMEOUT + STOP_TIMEOUT)

    @property
    def restarts(self) -> int:
        """How many restarts the container asked for (each one done)."""
        return len(self.pids)

    def _serve(self) -> None:
        while not self._stopping.wait(0.05):
            for request in sorted(self.folder.glob("*.request")):
                done = request.with_suffix(".done")
                if not done.exists():
                    self._answer(done)

    def _answer(self, done: Path) -> None:
        before, status = self.daemon.pid, "0"
        try:
            self.daemon.start()
        except (RuntimeError, subprocess.SubprocessError):
            status = "1"
        self.pids.append((before, self.daemon.pid))
        partial = done.with_suffix(".partial")
        partial.write_text(status)
        partial.rename(done)  # whole or not at all: the container's shell reads it at once
