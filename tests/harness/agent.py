"""``gpuready agent`` as the DaemonSet runs it, on a node tree whose containerd is a real one
reading the tree's files at their node paths (tests/harness/namespaced.py).

The settings' restart is ``method: command``: :data:`RESTARTER`, which counts its calls, waits
while a ``hold`` file exists (so a test can look at the reports mid-repair), carries out the
call's action from a ``plan`` file (a test's failure or kill of the agent), then restarts the
daemon in its namespace. What a test counts is the daemon's pid changes (:class:`PidLog`),
not these calls.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.harness.containerd import short_tempdir
from tests.harness.namespaced import NamespacedContainerd
from tests.helpers import REPO, require

DPKG = "Package: containerd\nStatus: install ok installed\nVersion: 1.6.20~ds1-1+deb12u3\n"
MACHINE_ID = "0123456789abcdef0123456789abcdef\n"
FEATURES = "etc/kubernetes/node-feature-discovery/features.d/gpuready"
JOURNAL = "etc/containerd/config.toml.gpuready.txn.json"
PASS_TIMEOUT = 90.0

# The settings' restart command. Each call's action is the call's line of ``plan`` (``restart``
# when it has none): ``fail`` exits 1 without restarting; ``kill-before`` SIGKILLs the agent (its
# parent: the agent runs the argv itself) and restarts nothing; ``kill-after`` restarts, then
# SIGKILLs the agent.
RESTARTER = """\
import os, signal, subprocess, sys, time
work, restart = sys.argv[1], sys.argv[2:]
with open(os.path.join(work, "calls"), "a") as handle:
    handle.write("x")
with open(os.path.join(work, "calls")) as handle:
    call = len(handle.read())
plan = os.path.join(work, "plan")
actions = open(plan).read().split() if os.path.exists(plan) else []
action = actions[call - 1] if call <= len(actions) else "restart"
while os.path.exists(os.path.join(work, "hold")):
    time.sleep(0.05)
if action == "fail":
    sys.exit("the test's restart fails, as planned")
if action == "kill-before":
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(0)
code = subprocess.run(restart).returncode
if action == "kill-after":
    os.kill(os.getppid(), signal.SIGKILL)
sys.exit(code)
"""


class Node:
    """A node tree, its containerd (None: none runs) and the agent's settings."""

    def __init__(self, root: Path, work: Path, daemon: NamespacedContainerd | None) -> None:
        self.root, self.work, self.daemon = root, work, daemon
        self.config = root / "etc/containerd/config.toml"
        self.calls_file, self.hold, self.plan = work / "calls", work / "hold", work / "plan"
        self.settings = work / "settings.yaml"
        self.original = self.config.read_bytes() if self.config.exists() else None
        self.agents: list[subprocess.Popen] = []  # killed at the end, whatever a test left

    @property
    def restarts(self) -> int:
        """How many times the daemon's pid changed since it first started."""
        return self.daemon.pids.changes()

    @property
    def restart_calls(self) -> int:
        """How many times the agent ran its restart command."""
        return len(self.calls_file.read_text()) if self.calls_file.exists() else 0

    def features(self) -> dict[str, str]:
        """The labels in NFD's feature file."""
        return feature_labels(self.root)

    def restarter(self) -> dict:
        """The settings' ``restart``: :data:`RESTARTER` around the daemon's restart."""
        script = self.work / "restarter.py"
        script.write_text(RESTARTER)
        return {"method": "command", "command": [
            sys.executable, str(script), str(self.work),
            *shlex.split(self.daemon.restart_command)]}


def write_settings(node: Node, **changes) -> None:
    """The agent's settings file: configure ``nvidia`` in the main config, and ``changes``."""
    settings = {"runtime_name": "nvidia", "drop_in": False, "enable_cdi": False,
                "systemd_cgroup": "false", "interval_seconds": 30, "force": False,
                "restart": {"method": "command", "command": ["/bin/false"]}}
    settings.update(changes)
    node.settings.write_text(yaml.safe_dump(settings))


def node_tree(root: Path) -> None:
    """What gpuready reads of a Debian node besides containerd's folders: the package database
    (containerd 1.6) and the machine id (the journal's)."""
    dpkg = root / "var/lib/dpkg/status"
    dpkg.parent.mkdir(parents=True, exist_ok=True)
    dpkg.write_text(DPKG)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/machine-id").write_text(MACHINE_ID)


@contextmanager
def live_node(work: Path) -> Iterator[Node]:
    """A node tree whose containerd (1.6, the package database says) runs on the tree's
    folders at their node paths, its restart :meth:`Node.restarter`; all removed afterwards."""
    require(binaries=("containerd", "runc", "unshare", "nsenter", "findmnt"))
    root = short_tempdir()
    daemon = made = None
    try:
        node_tree(root)
        daemon = NamespacedContainerd(root, work / "daemon")
        daemon.start()
        made = Node(root, work, daemon)
        write_settings(made, restart=made.restarter())
        yield made
    finally:
        for agent in made.agents if made else ():
            if agent.poll() is None:
                agent.kill()
                agent.wait(timeout=30)
        if daemon is not None:
            daemon.remove()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def feature_labels(root: Path) -> dict[str, str]:
    """The labels in NFD's feature file of the node tree ``root``."""
    path = root / FEATURES
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


class RunningAgent:
    """The process ``argv`` starts (the agent, or ``ctr run`` of its image), its output read
    line by line; its first line names the URL the agent serves. ``stop`` sends the agent its
    SIGTERM (the process's own by default); ``started`` is told of the process before anything
    is read from it (so a fixture can kill what a failed test left)."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None,
                 stop: Callable[[], object] | None = None,
                 started: Callable[[subprocess.Popen], object] | None = None) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=env)
        if started is not None:
            started(self.process)
        self.stop = stop or (lambda: self.process.send_signal(signal.SIGTERM))
        # read by a thread: a select() on the pipe misses the lines its reader has buffered
        self._said: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.lines: list[str] = []
        first = self.next_line()
        self.url = first.split("serving ", 1)[1].split(" ", 1)[0]

    def _read(self) -> None:
        for line in self.process.stdout:
            self._said.put(line.rstrip("\n"))
        self._said.put(None)

    def next_line(self, timeout: float = PASS_TIMEOUT) -> str:
        """The agent's next line of output (fail when it says nothing in ``timeout``)."""
        try:
            line = self._said.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the agent said nothing:\n" + "\n".join(self.lines)) from None
        if line is None:
            self._said.put(None)
            raise AssertionError("the agent ended:\n" + "\n".join(self.lines))
        self.lines.append(line)
        return line

    def _rest(self) -> str:
        """Everything the agent said, once it ended."""
        self._reader.join(timeout=30)
        while not self._said.empty():
            line = self._said.get_nowait()
            if line is not None:
                self.lines.append(line)
        return "\n".join(self.lines)

    def wait_for(self, start: str, timeout: float = PASS_TIMEOUT) -> str:
        """The next line starting with ``start``."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(max(deadline - time.monotonic(), 0.1))
            if line.startswith(start):
                return line

    def get(self, path: str) -> tuple[int, str]:
        """The status and body of ``GET path`` on the agent's reports."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def restarts_metric(self) -> float:
        """``gpuready_restarts_total`` from ``/metrics``."""
        code, text = self.get("/metrics")
        assert code == 200
        return next(float(line.split()[-1]) for line in text.splitlines()
                    if line.startswith("gpuready_restarts_total "))

    def terminate(self) -> tuple[int, str]:
        """SIGTERM (through ``stop``), as the kubelet stops the pod: the exit status and
        everything it said."""
        self.stop()
        self.process.wait(timeout=60)
        return self.process.returncode, self._rest()

    def killed(self, timeout: float = PASS_TIMEOUT) -> str:
        """Wait for the agent to die of SIGKILL (fail otherwise): everything it said."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the agent was not killed:\n" + self._rest()) from None
        said = self._rest()
        assert self.process.returncode == -signal.SIGKILL, said
        return said


class AgentProcess(RunningAgent):
    """``gpuready agent`` started as the DaemonSet starts it, on ``node``.

    ``runner``: a Python file that runs gpuready (``runpy``) after setting something up in the
    child, such as an audit hook; ``env``: more environment for it."""

    def __init__(self, node: Node, *, runner: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        environment = dict(os.environ, PYTHONPATH=str(REPO / "src"), **(env or {}))
        start = [str(runner)] if runner else ["-m", "gpuready"]
        super().__init__([sys.executable, *start, "agent", "--root", str(node.root),
                          "--settings", str(node.settings), "--listen", "127.0.0.1:0"],
                         env=environment, started=node.agents.append)
