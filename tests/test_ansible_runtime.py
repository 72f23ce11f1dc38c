"""``gpuready.node.containerd_runtime`` with the real ``ansible-playbook``, eight hosts, forks > 1.

The hosts' modules run with a Python 3.9 that has neither gpuready nor tomlkit nor PyYAML, so
every edit must be planned on the controller and written with Ansible's own transfer. The tests
share one fleet and run in order: check mode, the first run, the second run.
"""

from __future__ import annotations

import shutil
import tomllib

import pytest

from tests.ansible_support import fleet
from tests.helpers import LAB_BASE

HOSTS = [f"gpu{index:02d}" for index in range(1, 9)]
BROKEN = "gpu05"
BROKEN_TEXT = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n'
TASK = "Register the NVIDIA runtime"
PLAYBOOK = f"""\
- hosts: nodes
  gather_facts: false
  tasks:
    - name: {TASK}
      gpuready.node.containerd_runtime:
        root: "{{{{ gpuready_root }}}}"
"""


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Eight hosts with the lab's base config, one of them with a config that is not TOML."""
    found = fleet(tmp_path_factory.mktemp("fleet"), HOSTS)
    for host in HOSTS:
        found.config(host).parent.mkdir(parents=True)
        shutil.copyfile(LAB_BASE, found.config(host))
    found.config(BROKEN).write_text(BROKEN_TEXT)
    return found


def snapshot(nodes) -> dict[str, tuple[bytes, int]]:
    """Every host's config bytes and mtime, and whether a backup exists."""
    return {
        host: (nodes.config(host).read_bytes(), nodes.config(host).stat().st_mtime_ns,
               nodes.config(host).with_name("config.toml.gpuready.bak").exists())
        for host in HOSTS
    }


def test_check_mode_reports_changes_and_writes_nothing(nodes):
    before = snapshot(nodes)
    run = nodes.run(nodes.playbook("check.yml", PLAYBOOK), "--check", "--diff")
    results = run.results(TASK)
    assert snapshot(nodes) == before
    for host in HOSTS:
        if host == BROKEN:
            continue
        assert results[host]["changed"] is True, results[host]
        assert results[host]["written"] is False
        diff = results[host]["diff"]
        assert "containerd.runtimes.nvidia]" not in diff["before"]
        assert "containerd.runtimes.nvidia]" in diff["after"]
    assert run.stats[BROKEN]["failures"] == 1


def test_first_run_changes_every_host_and_a_broken_one_fails_alone(nodes):
    originals = {host: nodes.config(host).read_bytes() for host in HOSTS}
    run = nodes.run(nodes.playbook("apply.yml", PLAYBOOK), forks=4)
    assert run.code != 0  # one host failed
    for host in HOSTS:
        stats = run.stats[host]
        if host == BROKEN:
            assert stats["failures"] == 1 and stats["changed"] == 0
            continue
        assert stats == {**stats, "failures": 0, "changed": 1}, (host, stats)
        data = tomllib.loads(nodes.config(host).read_text())
        runtimes = data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
        assert runtimes["nvidia"]["options"] == {
            "BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
        # Only lines were added: every original line is still there, comments included.
        assert set(originals[host].decode().splitlines()) <= set(
            nodes.config(host).read_text().splitlines())
        backup = nodes.config(host).with_name("config.toml.gpuready.bak")
        assert backup.read_bytes() == originals[host]
    broken = run.results(TASK)[BROKEN]
    assert broken["msg"] == (
        f"{nodes.config(BROKEN)}:2:37: invalid TOML: Expected ']' at the end of a table "
        "declaration"
    ), broken
    assert nodes.config(BROKEN).read_text() == BROKEN_TEXT


def test_second_run_changes_nothing(nodes):
    before = snapshot(nodes)
    run = nodes.run(nodes.playbook("again.yml", PLAYBOOK), forks=4)
    for host in HOSTS:
        if host != BROKEN:
            assert run.stats[host]["changed"] == 0, (host, run.stats[host])
            assert "already registered" in run.results(TASK)[host]["summary"]
    assert snapshot(nodes) == before
