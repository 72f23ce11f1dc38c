"""``gpuready agent`` killed (SIGKILL) at each phase of its restart transaction, on a real
containerd 1.6 reading the node tree's files at their node paths (tests/harness/namespaced.py):
the next start finishes the transaction, is ready over the CRI, leaves no journal and the config
as configured (the bytes ``gpuready configure`` writes).

The kill comes from the test's side: an audit hook in the agent's process (:data:`RUNNER`) for the
points inside it (the journal's and the config's renames, the journal's removal, the verification
after the restart), or the settings' restart command (tests/harness/agent.py's ``RESTARTER``)
for the points around the restart. Each point is checked to have been reached: the journal's
phase, the config's bytes and the daemon's pid changes at the kill are the ones that point
leaves. gpuready itself holds no test hook.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.harness.agent import JOURNAL, AgentProcess, Node, live_node, node_tree
from tests.harness.containerd import short_tempdir
from tests.harness.namespaced import NODE_CONFIG, node_config
from tests.helpers import run_cli

pytestmark = pytest.mark.containerd

JOURNAL_NAME = os.path.basename(JOURNAL)

# Runs gpuready with an audit hook that SIGKILLs the process when it reaches AGENT_KILL_AT, before
# the operation that raised the event runs:
# - journal-written: the journal is in place; the config is about to be swapped in.
# - config-swapped: the new config is swapped in; the old one, under a temporary name, is about
#   to be removed.
# - config-written: the config is written; the journal is about to move on to "restart".
# - verifying: the restart command ran; the agent starts verifying over the CRI.
# - verified: verified; the journal is about to be removed.
RUNNER = r'''
import os, runpy, signal, sys

POINT = os.environ["AGENT_KILL_AT"]
JOURNAL = "config.toml.gpuready.txn.json"
RENAMES = ("os.rename", "gpuready.renameat2")
seen = {"journal": 0, "restart": False}


def name(value):
    return os.path.basename(os.fsdecode(value)) if isinstance(value, (str, bytes)) else ""


def reached(event, args):
    if event in RENAMES and name(args[1]) == JOURNAL:
        seen["journal"] += 1
        return POINT == "config-written" and seen["journal"] == 2
    if event in RENAMES and name(args[1]) == "config.toml":
        return POINT == "journal-written"
    if event == "subprocess.Popen" and any("restarter" in str(arg) for arg in args[1]):
        seen["restart"] = True
    if event == "os.mkdir" and seen["restart"]:
        return POINT == "verifying" and name(args[0]).startswith("gpuready-verify-")
    if event == "os.remove" and name(args[0]) == JOURNAL:
        return POINT == "verified"
    if event == "os.remove" and name(args[0]).startswith(".config.toml."):
        return POINT == "config-swapped"
    return False


def hook(event, args):
    if reached(event, args):
        os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(hook)
sys.argv = ["gpuready", *sys.argv[1:]]
runpy.run_module("gpuready", run_name="__main__")
'''

ORIGINAL, CONFIGURED = "original", "configured"

# point, how it is killed (the hook, or the restart command's actions per call), the journal's
# phase it leaves, the config it leaves, the daemon's pid changes by the killed run, and by
# the next start (finishing, then configuring where the finish rolled back)
KILLS = [
    ("journal-written", "hook", "write", ORIGINAL, 0, 1),
    ("config-swapped", "hook", "write", CONFIGURED, 0, 1),
    ("config-written", "hook", "write", CONFIGURED, 0, 1),
    ("restart-asked", "kill-before", "restart", CONFIGURED, 0, 1),
    ("restarted", "kill-after", "restart", CONFIGURED, 1, 1),
    ("verifying", "hook", "restart", CONFIGURED, 1, 1),
    ("verified", "hook", "restart", CONFIGURED, 1, 1),
    ("rolling-back", "fail kill-before", "roll back", ORIGINAL, 0, 2),
]


@pytest.fixture(scope="module")
def configured() -> bytes:
    """The config ``gpuready configure`` writes from the node's (the settings' options)."""
    root = short_tempdir()
    try:
        node_tree(root)
        config = root / NODE_CONFIG.lstrip("/")
        config.parent.mkdir(parents=True)
        config.write_text(node_config())
        done = run_cli("configure", "--root", str(root), "--systemd-cgroup", "false")
        assert done.code == 0, done.out + done.err
        return config.read_bytes()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def node(tmp_path) -> Node:
    """A tree whose containerd (1.6) runs on the tree's folders at their node paths."""
    with live_node(tmp_path) as made:
        yield made


def killed_agent(node: Node, tmp_path, point: str, how: str) -> str:
    """Start the agent and let it be killed at ``point``: what it said."""
    if how == "hook":
        runner = tmp_path / "kill_runner.py"
        runner.write_text(RUNNER)
        return AgentProcess(node, runner=runner, env={"AGENT_KILL_AT": point}).killed()
    node.plan.write_text("\n".join(how.split()) + "\n")
    return AgentProcess(node).killed()


@pytest.mark.parametrize(("point", "how", "phase", "left", "at_kill", "at_next"), KILLS,
                         ids=[kill[0] for kill in KILLS])
def test_a_kill_at_each_phase_is_finished_by_the_next_start(
        node, tmp_path, configured, point, how, phase, left, at_kill, at_next):
    said = killed_agent(node, tmp_path, point, how)
    if point == "config-swapped":  # the old config, under the temporary name
        assert [path.read_bytes() for path in node.config.parent.glob(".config.toml.*.tmp")
                ] == [node.original]
    journal = json.loads((node.root / JOURNAL).read_text())
    assert journal["phase"] == phase, said
    assert node.config.read_bytes() == (configured if left == CONFIGURED else node.original)
    assert node.restarts == at_kill, said

    node.plan.unlink(missing_ok=True)  # the next start's restart restarts
    again = AgentProcess(node)
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert any(line.startswith("pending transaction ") for line in again.lines), again.lines
    assert not (node.root / JOURNAL).exists()
    assert node.config.read_bytes() == configured
    assert node.restarts == at_kill + at_next
    assert again.restarts_metric() == at_next
    assert again.get("/readyz")[0] == 200
    assert node.features()["gpuready.io/runtime.nvidia"] == "ready"
    leftovers = sorted(path.name for path in node.config.parent.iterdir()
                       if path.name.startswith("."))
    assert leftovers == [], leftovers  # no temporary file of the killed run stays
    code, _ = again.terminate()
    assert code == 0


# Runs gpuready with an audit hook that SIGKILLs the process before its AGENT_KILL_AT-th path
# operation inside the tree (an open for writing, a rename, a removal, a new folder, a mode or
# owner change; a name relative to an open folder counts) or start of a subprocess (the restart).
EVERY_STEP_RUNNER = r'''
import os, runpy, signal, sys

ROOT = os.environ["AGENT_ROOT"].rstrip("/") + "/"
AT = int(os.environ["AGENT_KILL_AT"])
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT
EVENTS = {"os.rename", "gpuready.renameat2", "os.mkdir", "os.remove", "os.rmdir", "os.chmod",
          "os.chown", "os.symlink", "os.truncate"}
count = [0]


def inside(path):
    if not isinstance(path, (str, bytes)):
        return False
    path = os.fsdecode(path)
    return not path.startswith("/") or path.startswith(ROOT)


def counted(event, args):
    if event == "open":
        return inside(args[0]) and bool(args[2] & WRITING)
    if event in EVENTS:
        return inside(args[0])
    return event == "subprocess.Popen"


def hook(event, args):
    if counted(event, args):
        count[0] += 1
        if count[0] == AT:
            os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(hook)
sys.argv = ["gpuready", *sys.argv[1:]]
runpy.run_module("gpuready", run_name="__main__")
'''


@pytest.mark.slow
def test_a_kill_at_every_step_of_a_configuring_pass_is_finished_by_the_next_start(
        node, tmp_path, configured):
    """The agent killed before each path operation of its first pass in turn (and before its
    restart command): each time the next start is ready, with no journal and the config as
    configured. The owner then puts the original config back and restarts containerd."""
    runner = tmp_path / "every_step_runner.py"
    runner.write_text(EVERY_STEP_RUNNER)
    for step in range(1, 200):
        agent = AgentProcess(node, runner=runner, env={
            "AGENT_KILL_AT": str(step), "AGENT_ROOT": str(node.root)})
        try:
            agent.wait_for("pass:")
        except AssertionError:
            said = agent.killed()
        else:  # a whole pass ran: every step has been a kill point
            agent.process.kill()
            agent.process.wait()
            assert step > 10, agent.lines
            return
        pending = (node.root / JOURNAL).exists()
        again = AgentProcess(node)
        assert again.wait_for("pass:").startswith("pass: ready"), (step, said, again.lines)
        assert pending == any(line.startswith("pending transaction ") for line in again.lines)
        assert not (node.root / JOURNAL).exists(), step
        assert node.config.read_bytes() == configured, step
        assert not [path for path in node.config.parent.iterdir()
                    if path.name.startswith(".")], step
        assert again.terminate()[0] == 0
        node.config.write_bytes(node.original)  # the owner's file, and its restart
        node.daemon.start()
    raise AssertionError("the agent never finished a pass")
