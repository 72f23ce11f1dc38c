"""A running ``gpuready agent`` seen as the DaemonSet's kubelet sees it: its output line by line,
its ``/healthz``, ``/readyz`` and ``/metrics``, and NFD's feature file on the node.

Whatever starts the agent: tests/test_image.py starts it in its image under ``ctr run``, whose
output is the agent's and whose SIGTERM goes through ``ctr task kill``.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

FEATURES = "etc/kubernetes/node-feature-discovery/features.d/gpuready"


def feature_labels(root: Path) -> dict[str, str]:
    """The labels in NFD's feature file of the node tree ``root``."""
    path = root / FEATURES
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


class AgentProcess:
    """The process ``argv`` starts (the agent, or ``ctr run`` of its image), its output read
    line by line; its first line names the URL the agent serves. ``stop`` sends the agent its
    SIGTERM (the process's own by default)."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None,
                 stop: Callable[[], object] | None = None) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=env)
        self.stop = stop or (lambda: self.process.send_signal(signal.SIGTERM))
        self.lines: list[str] = []
        first = self.next_line()
        self.url = first.split("serving ", 1)[1].split(" ", 1)[0]

    def next_line(self, timeout: float = 90.0) -> str:
        """The next line of output (fails when none comes in ``timeout`` seconds)."""
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError("the agent said nothing:\n" + "\n".join(self.lines))
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError("the agent ended:\n" + "\n".join(self.lines))
        self.lines.append(line.rstrip("\n"))
        return self.lines[-1]

    def wait_for(self, start: str, timeout: float = 90.0) -> str:
        """The next line starting with ``start``."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(max(deadline - time.monotonic(), 0.1))
            if line.startswith(start):
                return line

    def get(self, path: str) -> tuple[int, str]:
        """The status and body of ``GET path`` on the agent's listener."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def restarts_metric(self) -> float:
        """``gpuready_restarts_total`` from /metrics."""
        code, text = self.get("/metrics")
        assert code == 200
        return next(float(line.split()[-1]) for line in text.splitlines()
                    if line.startswith("gpuready_restarts_total "))

    def terminate(self) -> tuple[int, str]:
        """SIGTERM (through ``stop``), then the exit status and everything it said."""
        self.stop()
        rest, _ = self.process.communicate(timeout=60)
        self.lines += rest.splitlines()
        return self.process.returncode, "\n".join(self.lines)
