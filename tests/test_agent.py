"""``gpuready agent`` as the DaemonSet runs it: a subprocess on a node tree (``--root``) whose
containerd is a real one (Debian's 1.6, tests/harness/restartable.py) reading the tree's own
``/etc/containerd/config.toml``, its socket at the tree's ``/run/containerd/containerd.sock``.

The settings' restart is ``method: command``: a script that counts its calls, waits while a
``hold`` file exists (so a test can look at the reports mid-repair), then restarts the daemon.
The count is the number of restarts the agent made.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.harness.containerd import lab_config, short_tempdir
from tests.harness.restartable import RestartableContainerd
from tests.helpers import REPO, require, run_cli, socket_in_root

pytestmark = pytest.mark.containerd

DPKG = "Package: containerd\nStatus: install ok installed\nVersion: 1.6.20~ds1-1+deb12u3\n"
FEATURES = "etc/kubernetes/node-feature-discovery/features.d/gpuready"
JOURNAL = "etc/containerd/config.toml.gpuready.txn.json"
COUNTER = """\
import os, subprocess, sys, time
count, hold, restart = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(count, "a") as handle:
    handle.write("x")
while os.path.exists(hold):
    time.sleep(0.05)
sys.exit(subprocess.run(restart).returncode)
"""


class Node:
    """A node tree with a real containerd on its config, and the agent's settings."""

    def __init__(self, root: Path, work: Path, daemon: RestartableContainerd) -> None:
        self.root, self.work, self.daemon = root, work, daemon
        self.config = root / "etc/containerd/config.toml"
        self.count_file, self.hold = work / "count", work / "hold"
        self.settings = work / "settings.yaml"
        self.original = self.config.read_text()

    @property
    def restarts(self) -> int:
        """How many restarts the agent's command was asked for."""
        return len(self.count_file.read_text()) if self.count_file.exists() else 0

    def features(self) -> dict[str, str]:
        """The labels in NFD's feature file."""
        path = self.root / FEATURES
        if not path.exists():
            return {}
        return dict(line.split("=", 1) for line in path.read_text().splitlines())


@pytest.fixture
def node(tmp_path) -> Node:
    """A tree whose containerd (1.6, the package database says) runs on the tree's config."""
    require(binaries=("containerd", "runc"))
    root = short_tempdir()
    folder = root / "d"  # the daemon's own state: beside the tree's files, short for the socket
    folder.mkdir()
    daemon = RestartableContainerd(lab_config(folder), folder)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(daemon.config_path.read_text())
    daemon.config_path.unlink()
    daemon.config_path.symlink_to(config)  # the daemon reads the tree's file, as on the node
    dpkg = root / "var/lib/dpkg/status"
    dpkg.parent.mkdir(parents=True)
    dpkg.write_text(DPKG)
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    socket_in_root(root, daemon.address)
    daemon.start()
    made = Node(root, tmp_path, daemon)
    (tmp_path / "counter.py").write_text(COUNTER)
    write_settings(made, restart={"method": "command", "command": [
        sys.executable, str(tmp_path / "counter.py"), str(made.count_file), str(made.hold),
        *shlex.split(daemon.restart_command)]})
    try:
        yield made
    finally:
        daemon.remove()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def write_settings(node: Node, **changes) -> None:
    settings = {"runtime_name": "nvidia", "drop_in": False, "enable_cdi": False,
                "systemd_cgroup": "false", "interval_seconds": 30, "force": False,
                "restart": {"method": "command", "command": ["/bin/false"]}}
    settings.update(changes)
    node.settings.write_text(yaml.safe_dump(settings))


class AgentProcess:
    """``gpuready agent`` started as the DaemonSet starts it, its output read line by line."""

    def __init__(self, node: Node) -> None:
        environment = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gpuready", "agent", "--root", str(node.root),
             "--settings", str(node.settings), "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
        self.lines: list[str] = []
        first = self.next_line()
        self.url = first.split("serving ", 1)[1].split(" ", 1)[0]

    def next_line(self, timeout: float = 90.0) -> str:
        import selectors

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
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def restarts_metric(self) -> float:
        code, text = self.get("/metrics")
        assert code == 200
        return next(float(line.split()[-1]) for line in text.splitlines()
                    if line.startswith("gpuready_restarts_total "))

    def terminate(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        rest, _ = self.process.communicate(timeout=60)
        self.lines += rest.splitlines()
        return self.process.returncode, "\n".join(self.lines)


def test_restarts_only_when_what_containerd_runs_changes(node):
    """A configuring start restarts once and is ready over the CRI; SIGTERM restarts nothing;
    an unchanged start restarts nothing; an owner's rewrite is put back with one restart, and
    /readyz says 503 while containerd does not serve the files, 200 after the repair."""
    agent = AgentProcess(node)
    assert agent.wait_for("pass:").startswith("pass: ready"), "\n".join(agent.lines)
    assert node.restarts == 1
    assert "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]" in \
        node.config.read_text()
    assert agent.get("/healthz")[0] == 200
    assert agent.get("/readyz")[0] == 200
    assert agent.restarts_metric() == 1.0
    labels = node.features()
    assert labels["gpuready.io/runtime.nvidia"] == "ready"
    assert labels["gpuready.io/containerd"] == "1.6"
    assert labels["gpuready.io/owner"] == "containerd"
    code, said = agent.terminate()
    assert code == 0 and "stopped (SIGTERM): nothing changed" in said, said
    assert node.restarts == 1

    again = AgentProcess(node)  # unchanged: nothing to write, nothing to restart
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert node.restarts == 1 and again.restarts_metric() == 0.0
    assert again.get("/readyz")[0] == 200

    node.hold.write_text("")  # the agent's restart waits until the test has looked
    node.config.write_text(node.original)  # an owner rewrites the config: the runtime is gone
    node.daemon.start()  # ... and restarts containerd on it: the live config lacks it too
    deadline = time.monotonic() + 30
    while again.get("/readyz")[0] != 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert again.get("/readyz")[0] == 503
    assert node.features()["gpuready.io/runtime.nvidia"] == "not-ready"
    node.hold.unlink()
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert again.get("/readyz")[0] == 200
    assert node.restarts == 2 and again.restarts_metric() == 1.0
    assert node.features()["gpuready.io/runtime.nvidia"] == "ready"
    code, said = again.terminate()
    assert code == 0, said
    assert node.restarts == 2


def test_a_sigterm_during_a_transaction_leaves_its_journal_and_the_next_start_finishes_it(
        node):
    """Stopped while containerd is being restarted: the journal stays; the next start restarts
    with its settings' command, verifies, and takes the journal away."""
    node.hold.write_text("")
    agent = AgentProcess(node)
    deadline = time.monotonic() + 60
    while node.restarts == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.restarts == 1
    code, said = agent.terminate()
    assert code == 0 and "during a transaction: its journal stays" in said, said
    assert (node.root / JOURNAL).exists()
    node.hold.unlink()
    again = AgentProcess(node)
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert any("pending transaction finished" in line for line in again.lines), again.lines
    assert not (node.root / JOURNAL).exists()
    assert node.restarts == 2
    again.terminate()


@pytest.mark.parametrize(("settings", "said"), [
    ({"runtime_name": "nvidia"}, "missing key 'drop_in'"),
    ({"interval_seconds": "often"}, "interval_seconds: seconds between resyncs"),
    ({"restart": {"method": "command", "command": "systemctl restart containerd"}},
     "restart.command: a non-empty list of strings"),
    ({"restart": {"method": "ssh"}}, "restart: {method: systemd}"),
    ({"systemd_cgroup": "maybe"}, "systemd_cgroup: true, false or inherit"),
    ({"colour": "green"}, "unknown key 'colour'"),
])
def test_a_missing_or_bad_setting_is_one_line_at_start(tmp_path, settings, said):
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    full = {"runtime_name": "nvidia", "drop_in": False, "enable_cdi": False,
            "systemd_cgroup": "false", "interval_seconds": 30, "force": False,
            "restart": {"method": "systemd"}}
    full.update(settings)
    if settings == {"runtime_name": "nvidia"}:
        full = settings
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(full))
    result = run_cli("agent", "--root", str(root), "--settings", str(path))
    assert result.code == 2, result.out + result.err
    assert said in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_settings_inside_the_root_are_refused(tmp_path):
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    (root / "etc/settings.yaml").write_text("runtime_name: nvidia\n")
    result = run_cli("agent", "--root", str(root), "--settings", str(root / "etc/settings.yaml"))
    assert result.code == 2 and "lies inside --root" in result.err, result.err


# -- restart: {method: systemd} -----------------------------------------------------------------

STANDIN_SYSTEMD = """\
# A stand-in for systemd's manager on a test bus (no systemd runs as PID 1 here): it owns
# org.freedesktop.systemd1, records each RestartUnit call, restarts the test's containerd as
# systemd would restart the unit, and answers with a job path; any other call (the agent's
# poll of the job) is answered UnknownObject, as systemd answers for a finished job.
import json, subprocess, sys
from jeepney import HeaderFields, MessageType, new_error, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

address, record, restart = sys.argv[1], sys.argv[2], sys.argv[3:]
with open_dbus_connection(bus=address) as connection:
    connection.send_and_get_reply(message_bus.RequestName("org.freedesktop.systemd1"))
    print("ready", flush=True)
    while True:
        message = connection.receive()
        if message.header.message_type != MessageType.method_call:
            continue
        fields = message.header.fields
        if fields.get(HeaderFields.member) == "RestartUnit" and fields.get(
                HeaderFields.interface) == "org.freedesktop.systemd1.Manager":
            with open(record, "a") as handle:
                handle.write(json.dumps(list(message.body)) + "\\n")
            subprocess.run(restart, check=True)
            connection.send(new_method_return(message, "o", ("/org/freedesktop/systemd1/job/7",)))
        else:
            connection.send(new_error(message, "org.freedesktop.DBus.Error.UnknownObject"))
"""


def test_method_systemd_calls_restartunit_on_the_nodes_bus(node, tmp_path):
    """``restart: {method: systemd}``: RestartUnit("containerd.service", "replace") on the bus
    at the tree's /run/dbus/system_bus_socket. The bus is Debian's dbus-daemon and the manager a
    stand-in service that records the call and restarts the test's containerd (no systemd runs
    here): the call it records is the agent's only restart."""
    require(binaries=("dbus-daemon",))
    bus = node.root / "run/dbus/system_bus_socket"
    bus.parent.mkdir(parents=True)
    daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address",
                               f"--address=unix:path={bus}"],
                              stdout=subprocess.PIPE, text=True)
    standin = None
    try:
        daemon.stdout.readline()  # the address: the bus listens
        record = tmp_path / "restartunit.jsonl"
        script = tmp_path / "systemd_standin.py"
        script.write_text(STANDIN_SYSTEMD)
        standin = subprocess.Popen([sys.executable, str(script), f"unix:path={bus}",
                                    str(record), *shlex.split(node.daemon.restart_command)],
                                   stdout=subprocess.PIPE, text=True)
        assert standin.stdout.readline().strip() == "ready"
        write_settings(node, restart={"method": "systemd"})
        agent = AgentProcess(node)
        assert agent.wait_for("pass:").startswith("pass: ready"), "\n".join(agent.lines)
        calls = [yaml.safe_load(line) for line in record.read_text().splitlines()]
        assert calls == [["containerd.service", "replace"]]
        assert agent.restarts_metric() == 1.0
        assert agent.get("/readyz")[0] == 200
        agent.terminate()
    finally:
        for process in (standin, daemon):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)


@pytest.mark.parametrize(("marker", "force", "owner"), [
    ("usr/local/nvidia/toolkit/nvidia-container-runtime", True, "gpu-operator"),
    ("etc/containerd/cri-base.json", False, "kubespray"),
])
def test_an_owner_not_to_fight_is_reported_not_edited(tmp_path, marker, force, owner):
    """The GPU Operator's toolkit on the node (even with force: true) and kubespray without
    force: the pass reports, writes no config and restarts nothing; the labels say so."""
    root = tmp_path / "node"
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    text = (REPO / "tests/data/containerd/lab-base.toml").read_text()
    config.write_text(text)
    (root / marker).parent.mkdir(parents=True, exist_ok=True)
    (root / marker).write_text("")
    work = tmp_path / "work"
    work.mkdir()
    made = Node(root, work, daemon=None)
    write_settings(made, force=force, restart={"method": "command", "command": [
        sys.executable, "-c", f"open({str(made.count_file)!r}, 'a').write('x')"]})
    agent = AgentProcess(made)
    line = agent.wait_for("pass:")
    assert line.startswith("pass: reported") and "not edited" in line, line
    assert config.read_text() == text and made.restarts == 0
    assert made.features()["gpuready.io/runtime.nvidia"] == "reported"
    assert made.features()["gpuready.io/owner"] == owner
    assert agent.get("/readyz")[0] == 503
    agent.terminate()
