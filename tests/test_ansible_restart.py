"""``containerd_runtime`` with ``restart: true``: gpuready's restart transaction driven from the
controller by the real ``ansible-playbook``, against real containerds the test starts.

Each of two hosts has its own containerd (restarted through ``restart_command``: these machines do
not run systemd as PID 1) and runs its modules with a bare Python 3.9. The controller stages the
pre-flight files on the node for the node's own ``containerd config dump``, writes through
Ansible's copy, restarts, and asks the CRI through ``gpuready.node.cri_call`` on the node. The
runtime's binary is the stand-in that records its calls and hands over to runc.
"""

from __future__ import annotations

import pytest

from gpuready.compat import tomllib
from gpuready.cri import probe_image
from gpuready.cri.client import CriClient
from gpuready.cri.live import parse_live_config
from tests.ansible_support import fleet
from tests.harness.containerd import lab_config, short_tempdir
from tests.harness.restartable import RestartableContainerd
from tests.harness.standin import write_standin
from tests.helpers import require

pytestmark = pytest.mark.containerd

HOSTS = ["ctr1", "ctr2"]
PROBED = "ctr1"
TASK = "Register the runtime and restart containerd"
PLAYBOOK = f"""\
- hosts: nodes
  gather_facts: false
  tasks:
    - name: {TASK}
      gpuready.node.containerd_runtime:
        state: "{{{{ wanted | default('present') }}}}"
        config: "{{{{ config }}}}"
        binary: "{{{{ wanted_binary | default(binary) }}}}"
        address: "{{{{ address }}}}"
        restart: true
        restart_command: "{{{{ restart_command }}}}"
        restart_timeout: 30
        probe: "{{{{ probe | default(false) }}}}"
"""


@pytest.fixture(scope="module")
def daemons(probe_archive, tmp_path_factory):
    """A restartable containerd per host on the lab config (runc only), the probe image in."""
    require(binaries=("containerd", "runc", "ctr"))
    started = {}
    try:
        for host in HOSTS:
            folder = short_tempdir()
            write_standin(folder / "standin", log=folder / "standin.log")
            started[host] = RestartableContainerd(lab_config(folder), folder).start()
            probe_image.import_archive(probe_archive, socket=started[host].socket)
        yield started
    finally:
        for daemon in started.values():
            daemon.remove()


@pytest.fixture(scope="module")
def nodes(daemons, tmp_path_factory):
    """The two hosts, each pointed at its own containerd."""
    host_vars = {
        host: {"config": str(d.config_path), "address": d.address,
               "binary": str(d.folder / "standin"),
               "restart_command": f'"{d.restart_command}"',
               **({"probe": "true"} if host == PROBED else {})}
        for host, d in daemons.items()
    }
    found = fleet(tmp_path_factory.mktemp("restart"), HOSTS, host_vars)
    found.originals = {host: files(d) for host, d in daemons.items()}
    return found


def files(daemon: RestartableContainerd) -> dict[str, bytes]:
    """The config's folder: the config, gpuready's record and backup, drop-ins."""
    return {str(p.relative_to(daemon.folder)): p.read_bytes()
            for p in sorted(daemon.folder.rglob("*"))
            if p.is_file() and p.suffix in (".toml", ".json", ".bak")}


def live_runtimes(daemon: RestartableContainerd) -> set[str]:
    with CriClient(daemon.address, timeout=10) as client:
        return set(parse_live_config(client.status(verbose=True).config()).runtimes)


def run(nodes, name: str, *args: str):
    return nodes.run(nodes.playbook(name, PLAYBOOK), *args, forks=2)


def steps(result: dict) -> dict[str, bool]:
    return {step["name"]: step["ok"] for step in result["restart"]["steps"]}


def test_check_mode_runs_the_pre_flight_only(nodes, daemons):
    boots = {host: d.boots() for host, d in daemons.items()}
    result = run(nodes, "check.yml", "--check", "--diff")
    assert not result.failures(), result.failures()
    for host, daemon in daemons.items():
        outcome = result.results(TASK)[host]
        assert outcome["changed"] is True and outcome["written"] is False, outcome
        assert steps(outcome) == {"pre-flight": True}, outcome["restart"]
        assert "runtimes.nvidia]" in outcome["diff"][0]["after"]
        assert files(daemon) == nodes.originals[host]
        assert daemon.boots() == boots[host]


def test_restart_registers_restarts_each_host_once_and_verifies(nodes, daemons):
    boots = {host: d.boots() for host, d in daemons.items()}
    result = run(nodes, "apply.yml")
    assert not result.failures(), result.failures()
    for host, daemon in daemons.items():
        outcome = result.results(TASK)[host]
        assert outcome["changed"] is True
        expected = ["pre-flight", "write", "restart", "cri", "verify --live"] + (
            ["probe"] if host == PROBED else [])
        assert [s["name"] for s in outcome["restart"]["steps"]] == expected, outcome["restart"]
        assert all(steps(outcome).values()), outcome["restart"]
        assert daemon.boots() == boots[host] + 1, "restarted once"
        assert live_runtimes(daemon) == {"runc", "nvidia"}
        registered = tomllib.loads(daemon.config_path.read_text())
        runtime = registered["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
        assert runtime["nvidia"]["options"]["BinaryName"] == str(daemon.folder / "standin")
        assert (daemon.folder / "config.toml.gpuready.json").exists()
    assert "create" in (daemons[PROBED].folder / "standin.log").read_text()  # the probe ran


def test_second_run_neither_writes_nor_restarts(nodes, daemons):
    before = {host: (files(d), d.boots()) for host, d in daemons.items()}
    result = run(nodes, "again.yml")
    assert not result.failures(), result.failures()
    for host, daemon in daemons.items():
        outcome = result.results(TASK)[host]
        assert outcome["changed"] is False
        assert outcome["restart"]["steps"] == [{
            "name": "change", "ok": True,
            "detail": "nothing to change; containerd not restarted"}]
        assert (files(daemon), daemon.boots()) == before[host]


def test_absent_restarts_and_the_runtime_is_gone_live(nodes, daemons):
    boots = {host: d.boots() for host, d in daemons.items()}
    result = run(nodes, "absent.yml", "-e", "wanted=absent")
    assert not result.failures(), result.failures()
    for host, daemon in daemons.items():
        outcome = result.results(TASK)[host]
        assert outcome["changed"] is True and all(steps(outcome).values()), outcome["restart"]
        assert live_runtimes(daemon) == {"runc"}
        assert files(daemon) == nodes.originals[host]
        assert daemon.boots() == boots[host] + 1
    again = run(nodes, "absent-again.yml", "-e", "wanted=absent")
    assert not again.failures(), again.failures()
    assert all(again.stats[host]["changed"] == 0 for host in HOSTS)


def test_a_failing_probe_rolls_its_host_back_alone(nodes, daemons):
    boots = {host: d.boots() for host, d in daemons.items()}
    result = run(nodes, "broken.yml", "-e", "wanted_binary=/nonexistent/nvidia-container-runtime")
    assert list(result.failures()) == [f"{TASK}: {PROBED}"], result.failures()
    failed = result.results(TASK)[PROBED]
    assert failed["restart"]["rolled_back"] is True and failed["written"] is False
    assert failed["msg"].startswith("probe: "), failed["msg"]
    assert failed["msg"].endswith("every file was put back and containerd restarted on them")
    assert files(daemons[PROBED]) == nodes.originals[PROBED]  # no record, no backup
    assert daemons[PROBED].boots() == boots[PROBED] + 2, "restarted on the change, then back"
    assert live_runtimes(daemons[PROBED]) == {"runc"}
    other = "ctr2"
    assert result.stats[other]["changed"] == 1 and live_runtimes(daemons[other]) == {
        "runc", "nvidia"}
