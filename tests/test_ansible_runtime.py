"""``gpuready.node.containerd_runtime`` with the real ``ansible-playbook``, eight hosts, forks > 1.

The hosts' modules run with a Python 3.9 that has neither gpuready nor tomlkit nor PyYAML, so
every edit must be planned on the controller and written with Ansible's own transfer. Some hosts
register in place, some in a drop-in (one whose config already imports ``conf.d/*.toml``), one
has a config that is not TOML. Every node must end up exactly as ``gpuready configure`` and
``gpuready unconfigure`` leave a copy of it. The tests share one fleet and run in order: check
mode, the first run, the second run, then ``state: absent`` in check mode, twice for real.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from tests.ansible_support import fleet
from tests.helpers import LAB_BASE, run_cli

HOSTS = [f"gpu{index:02d}" for index in range(1, 9)]
BROKEN = "gpu05"
BROKEN_TEXT = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n'
CDI = "gpu04"
DROP_IN = {"gpu06": "true", "gpu07": "true", "gpu08": "/etc/containerd/nvidia.toml"}
GLOBBED = "gpu07"  # its config already imports conf.d/*.toml: no imports entry is added
GLOB_IMPORT = 'imports = ["/etc/containerd/conf.d/*.toml"]\n'
DEFAULT_DROP_IN = "etc/containerd/conf.d/99-nvidia.toml"
TASK = "Register the NVIDIA runtime"
PLAYBOOK = f"""\
- hosts: nodes
  gather_facts: false
  tasks:
    - name: {TASK}
      gpuready.node.containerd_runtime:
        root: "{{{{ gpuready_root }}}}"
        state: "{{{{ wanted | default('present') }}}}"
        drop_in: "{{{{ drop_in | default(omit) }}}}"
        enable_cdi: "{{{{ enable_cdi | default(false) }}}}"
"""


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Eight hosts with the lab's base config: in place, with CDI, in drop-ins, and broken."""
    host_vars = {host: {"drop_in": path} for host, path in DROP_IN.items()}
    host_vars[CDI] = {"enable_cdi": "true"}
    found = fleet(tmp_path_factory.mktemp("fleet"), HOSTS, host_vars)
    for host in HOSTS:
        found.config(host).parent.mkdir(parents=True)
        shutil.copyfile(LAB_BASE, found.config(host))
    found.config(GLOBBED).write_text(GLOB_IMPORT + LAB_BASE.read_text())
    found.config(BROKEN).write_text(BROKEN_TEXT)
    found.originals = {host: tree(found.root(host)) for host in HOSTS}
    return found


@pytest.fixture(scope="module")
def expected(nodes, tmp_path_factory):
    """Each host's files as ``gpuready configure`` leaves them, found by running it on the
    host's root itself (its record names that root) and putting the root back afterwards."""
    aside = tmp_path_factory.mktemp("aside")
    found = {}
    for host in HOSTS:
        if host == BROKEN:
            continue
        root = nodes.root(host)
        shutil.move(root, aside / host)
        shutil.copytree(aside / host, root)
        flags = ["--drop-in"] if DROP_IN.get(host) == "true" else (
            ["--drop-in", DROP_IN[host]] if host in DROP_IN else [])
        flags += ["--enable-cdi"] if host == CDI else []
        result = run_cli("configure", "--root", str(root), "--config",
                         str(nodes.config(host)), *flags)
        assert result.code == 0, result.err
        found[host] = tree(root)
        shutil.rmtree(root)
        shutil.move(aside / host, root)
    return found


def tree(root: Path) -> dict[str, str]:
    """Every file below ``root`` by its relative path, with its text."""
    return {str(path.relative_to(root)): path.read_text()
            for path in sorted(root.rglob("*")) if path.is_file()}


def snapshot(nodes) -> dict[str, dict]:
    """Every host's files with their texts and modification times."""
    return {host: {str(p): (p.read_bytes(), p.stat().st_mtime_ns)
                   for p in sorted(nodes.root(host).rglob("*")) if p.is_file()}
            for host in HOSTS}


def run(nodes, name: str, *args: str, state: str = "present"):
    return nodes.run(nodes.playbook(name, PLAYBOOK), "-e", f"wanted={state}", *args, forks=4)


def test_check_mode_reports_changes_and_writes_nothing(nodes):
    before = snapshot(nodes)
    result = run(nodes, "check.yml", "--check", "--diff")
    results = result.results(TASK)
    assert snapshot(nodes) == before
    for host in HOSTS:
        if host == BROKEN:
            continue
        assert results[host]["changed"] is True, results[host]
        assert results[host]["written"] is False
        diffs = {d["after_header"]: d for d in results[host]["diff"]}
        runtime_file = str(nodes.root(host) / DEFAULT_DROP_IN) if DROP_IN.get(host) == "true" \
            else str(nodes.root(host) / DROP_IN.get(host, "/etc/containerd/config.toml")[1:])
        assert "containerd.runtimes.nvidia]" in diffs[runtime_file]["after"]
        assert "containerd.runtimes.nvidia]" not in diffs[runtime_file]["before"]
    assert result.stats[BROKEN]["failures"] == 1


def test_first_run_changes_every_host_as_the_command_line_does(nodes, expected):
    result = run(nodes, "apply.yml")
    assert result.code != 0  # one host failed
    for host in HOSTS:
        stats = result.stats[host]
        if host == BROKEN:
            assert stats["failures"] == 1 and stats["changed"] == 0
            continue
        assert stats == {**stats, "failures": 0, "changed": 1}, (host, stats)
        assert tree(nodes.root(host)) == expected[host], host
    config = tomllib.loads(nodes.config("gpu01").read_text())
    runtimes = config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"] == {
        "BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    assert tomllib.loads(nodes.config("gpu06").read_text())["imports"] == [
        "/" + DEFAULT_DROP_IN]  # the node's path, not the root's
    original = nodes.originals[GLOBBED]["etc/containerd/config.toml"]
    assert nodes.config(GLOBBED).read_text() == original
    broken = result.results(TASK)[BROKEN]
    assert broken["msg"] == (
        f"{nodes.config(BROKEN)}:2:37: invalid TOML: Expected ']' at the end of a table "
        "declaration"
    ), broken
    assert nodes.config(BROKEN).read_text() == BROKEN_TEXT


def test_second_run_changes_nothing(nodes):
    before = snapshot(nodes)
    result = run(nodes, "again.yml")
    for host in HOSTS:
        if host != BROKEN:
            assert result.stats[host]["changed"] == 0, (host, result.stats[host])
            assert "already" in result.results(TASK)[host]["summary"], result.results(TASK)[host]
    assert snapshot(nodes) == before


def test_absent_in_check_mode_shows_the_removal_and_writes_nothing(nodes):
    before = snapshot(nodes)
    result = run(nodes, "absent-check.yml", "--check", "--diff", state="absent")
    assert snapshot(nodes) == before
    results = result.results(TASK)
    for host in HOSTS:
        if host == BROKEN:
            assert results[host]["changed"] is False  # nothing was ever recorded there
            assert "nothing to remove" in results[host]["summary"]
            continue
        assert results[host]["changed"] is True, results[host]
        after = "".join(d["after"] for d in results[host]["diff"])
        assert "runtimes.nvidia]" not in after


def test_absent_takes_back_exactly_what_was_added_and_twice_changes_nothing(nodes):
    record = nodes.config(BROKEN).with_name("config.toml.gpuready.json")
    record.write_text("{not json\n")  # a record gpuready cannot read fails its host alone
    result = run(nodes, "absent.yml", state="absent")
    assert list(result.failures()) == [f"{TASK}: {BROKEN}"], result.failures()
    assert result.results(TASK)[BROKEN]["msg"].startswith(
        f"{record}: unreadable gpuready record: "), result.results(TASK)[BROKEN]["msg"]
    assert record.read_text() == "{not json\n"
    record.unlink()
    for host in HOSTS:
        assert result.stats[host]["changed"] == (0 if host == BROKEN else 1), host
        assert tree(nodes.root(host)) == nodes.originals[host], host
        # the conf.d gpuready created for the default drop-in goes with it, as on the CLI
        assert not (nodes.root(host) / DEFAULT_DROP_IN).parent.exists(), host
    again = run(nodes, "absent-again.yml", state="absent")
    assert not again.failures(), again.failures()
    for host in HOSTS:
        assert again.stats[host]["changed"] == 0, host
        assert "nothing to remove" in again.results(TASK)[host]["summary"]
    assert all(tree(nodes.root(host)) == nodes.originals[host] for host in HOSTS)


def test_a_drop_in_path_holding_the_operators_file_fails_that_host_alone(nodes):
    ours, theirs = "gpu01", "gpu02"
    operators = nodes.root(ours) / DEFAULT_DROP_IN
    operators.parent.mkdir(parents=True, exist_ok=True)
    operators.write_text("# the operator's own drop-in\nversion = 2\n")
    before = tree(nodes.root(ours))
    result = run(nodes, "drop-in.yml", "-e", "drop_in=true", "--limit", f"{ours},{theirs}")
    assert list(result.failures()) == [f"{TASK}: {ours}"], result.failures()
    assert result.results(TASK)[ours]["msg"].startswith(
        f"{operators}: exists and was not written by gpuready; nothing written"), result.results(
        TASK)[ours]["msg"]
    assert tree(nodes.root(ours)) == before
    assert result.stats[theirs]["changed"] == 1
    assert (nodes.root(theirs) / DEFAULT_DROP_IN).read_text().startswith("# Written by gpuready")


def test_a_conf_d_the_operator_made_stays_and_one_gpuready_made_goes(tmp_path):
    """Two hosts register in the default drop-in and take it back: the one without conf.d gets
    it, recorded as gpuready's, and loses it again; the operator's empty conf.d stays."""
    theirs, ours = "made-by-operator", "made-by-gpuready"
    found = fleet(tmp_path, [theirs, ours], {host: {"drop_in": "true"} for host in (theirs, ours)})
    for host in (theirs, ours):
        found.config(host).parent.mkdir(parents=True)
        shutil.copyfile(LAB_BASE, found.config(host))
    (found.root(theirs) / DEFAULT_DROP_IN).parent.mkdir()
    present = found.run(found.playbook("present.yml", PLAYBOOK))
    assert not present.failures(), present.failures()
    records = {host: json.loads(found.config(host).with_name("config.toml.gpuready.json")
                                .read_text())["files"] for host in (theirs, ours)}
    drop_in = "/" + DEFAULT_DROP_IN
    assert "folders" not in records[theirs][drop_in]
    assert records[ours][drop_in]["folders"] == ["/etc/containerd/conf.d"]
    absent = found.run(found.playbook("absent.yml", PLAYBOOK), "-e", "wanted=absent")
    assert not absent.failures(), absent.failures()
    assert (found.root(theirs) / DEFAULT_DROP_IN).parent.is_dir()
    assert not (found.root(ours) / DEFAULT_DROP_IN).parent.exists()
    for host in (theirs, ours):
        assert found.config(host).read_bytes() == LAB_BASE.read_bytes()
