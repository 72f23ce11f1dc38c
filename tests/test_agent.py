"""``gpuready agent`` as the DaemonSet runs it: a subprocess on a node tree (``--root``) whose
containerd is a real one (Debian's 1.6) reading the tree's files at their node paths: it runs in
a private mount namespace where the tree's folders are bound over ``/etc/containerd``,
``/run/containerd`` and ``/var/lib/containerd`` (tests/harness/namespaced.py), and serves the
socket the agent finds at the tree's ``run/containerd/containerd.sock``.

The settings' restart is ``method: command``: the test's restart, which restarts the daemon in
that namespace (tests/harness/agent.py). What the tests count is the daemon's pid changes,
sampled from /proc, whoever restarted it.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.harness.agent import JOURNAL, AgentProcess, Node, live_node, write_settings
from tests.harness.namespaced import NODE_FOLDERS, host_mounts
from tests.helpers import REPO, require, run_cli

pytestmark = pytest.mark.containerd


@pytest.fixture
def node(tmp_path) -> Node:
    """A tree whose containerd (1.6, the package database says) runs on the tree's folders."""
    with live_node(tmp_path) as made:
        yield made


def test_the_daemon_reads_the_trees_folders_at_node_paths_and_the_host_sees_no_mount(node):
    """The daemon's namespace has the tree's folders at the node paths; the host has none of
    these mounts, and the daemon was started on the node path of the config."""
    mounts = node.daemon.namespace.mounts()
    for folder in NODE_FOLDERS:
        assert f"[{node.root}{folder}]" in mounts[folder], mounts
    assert not any(str(node.root) in line for line in host_mounts(NODE_FOLDERS))
    (pid,) = node.daemon.namespace.processes("containerd")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert argv[1:3] == [b"--config", b"/etc/containerd/config.toml"]
    assert (node.root / "run/containerd/containerd.sock").is_socket()


def test_restarts_only_when_what_containerd_runs_changes(node):
    """The daemon's pid changes once on a configuring start, not on SIGTERM, not on an
    unchanged start, and once per owner rewrite; /metrics counts the same restarts; /readyz
    says 503 while containerd does not serve the runtime, 200 after the repair; the feature
    file's labels follow."""
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
    node.config.write_bytes(node.original)  # an owner rewrites the config: the runtime is gone
    node.daemon.start()  # ... and restarts containerd on it: the live config lacks it too
    assert node.restarts == 2
    deadline = time.monotonic() + 30
    while again.get("/readyz")[0] != 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert again.get("/readyz")[0] == 503
    assert node.features()["gpuready.io/runtime.nvidia"] == "not-ready"
    assert again.get("/healthz")[0] == 200
    node.hold.unlink()
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert again.get("/readyz")[0] == 200
    assert node.restarts == 3 and again.restarts_metric() == 1.0  # the owner's, and one repair
    assert node.features()["gpuready.io/runtime.nvidia"] == "ready"
    # the repair's own writes are seen too: that pass finds nothing to change
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert node.restarts == 3

    node.config.write_bytes(node.original)  # a rewrite alone, containerd not restarted
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert node.restarts == 4 and again.restarts_metric() == 2.0
    code, said = again.terminate()
    assert code == 0, said
    assert node.restarts == 4 and node.restart_calls == 3


def test_a_sigterm_during_a_transaction_leaves_its_journal_and_the_next_start_finishes_it(
        node):
    """Stopped while containerd is being restarted: the journal stays; the next start restarts
    with its settings' command, verifies, and takes the journal away."""
    node.hold.write_text("")
    agent = AgentProcess(node)
    deadline = time.monotonic() + 60
    while node.restart_calls == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    code, said = agent.terminate()
    assert code == 0 and "during a transaction: its journal stays" in said, said
    assert (node.root / JOURNAL).exists()
    node.hold.unlink()
    again = AgentProcess(node)
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert any("pending transaction finished" in line for line in again.lines), again.lines
    assert not (node.root / JOURNAL).exists()
    assert node.restarts == 1  # the stopped agent's restart never ran; the finishing one did
    again.terminate()


def test_the_undo_jobs_command_gives_back_the_original_config(node):
    """After the agent configured the node and was stopped (the DaemonSet deleted), the undo
    Job's command, read from deploy/kubernetes/undo-job.yaml with the tree as its ``/host``,
    gives back the config's original bytes and takes gpuready's own files away."""
    before = sorted(path.name for path in node.config.parent.iterdir())
    agent = AgentProcess(node)
    assert agent.wait_for("pass:").startswith("pass: ready"), "\n".join(agent.lines)
    assert agent.terminate()[0] == 0
    assert node.config.read_bytes() != node.original
    job = yaml.safe_load((REPO / "deploy/kubernetes/undo-job.yaml").read_text())
    (container,) = job["spec"]["template"]["spec"]["containers"]
    argv = [str(node.root) if arg == "/host" else arg
            for arg in (*container["command"], *container["args"])]
    assert argv[:2] == ["gpuready", "unconfigure"], argv
    undone = run_cli(*argv[1:])
    assert undone.code == 0, undone.out + undone.err
    assert node.config.read_bytes() == node.original
    assert sorted(path.name for path in node.config.parent.iterdir()) == before


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
        sys.executable, "-c", f"open({str(made.calls_file)!r}, 'a').write('x')"]})
    agent = AgentProcess(made)
    line = agent.wait_for("pass:")
    assert line.startswith("pass: reported") and "not edited" in line, line
    assert config.read_text() == text and made.restart_calls == 0
    assert made.features()["gpuready.io/runtime.nvidia"] == "reported"
    assert made.features()["gpuready.io/owner"] == owner
    assert agent.get("/readyz")[0] == 503
    agent.terminate()
