"""The ``gpuready.node.contract`` role and ``gpuready_facts`` with the real ``ansible-playbook``.

Two local hosts whose modules run with a bare Python 3.9: one starts from the contract's air-gap
base, the other from Debian containerd 1.6.20's own default config, whose runc uses cgroupfs.
Both get the contract's files, each parsed from that node's own config; the role's verification
then fails the Debian node alone, whose NVIDIA runtime (systemd) and runc (cgroupfs) disagree.
"""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.ansible_support import fleet
from tests.helpers import CONTAINERD_DATA, FIXTURE_BASE_NODE_PATH, LAB_BASE

AIRGAP, DEBIAN = "airgap", "debian"
VERIFY_FAILS = "gpuready.node.contract : Fail a node whose doctor result has an error"
CONTRACT_REPORT = ("CONFIG_VERSION=2\nRUNTIME=nvidia\nRUNTIME_TYPE=io.containerd.runc.v2\n"
                   "SYSTEMD_CGROUP=true\nHANDLER=nvidia\n")
ROLE_PLAYBOOK = """\
- hosts: nodes
  gather_facts: false
  roles:
    - role: gpuready.node.contract
      gpuready_runtimeclass_manifest: "{{ manifest }}"
"""


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """An air-gapped node with the contract's base, and a node with Debian's default config."""
    found = fleet(tmp_path_factory.mktemp("role"), [AIRGAP, DEBIAN])
    fixture = found.root(AIRGAP) / FIXTURE_BASE_NODE_PATH
    fixture.parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, fixture)
    found.config(DEBIAN).parent.mkdir(parents=True)
    shutil.copyfile(CONTAINERD_DATA / "containerd-1.6.20-default.toml", found.config(DEBIAN))
    return found


def role_playbook(nodes) -> str:
    manifest = nodes.folder / "cluster" / "runtimeclass.yaml"
    manifest.parent.mkdir(exist_ok=True)
    return ROLE_PLAYBOOK.replace('"{{ manifest }}"', str(manifest))


def test_role_runs_the_contract_on_each_node_and_the_manifest_once(nodes):
    run = nodes.run(nodes.playbook("role.yml", role_playbook(nodes)))
    assert list(run.failures()) == [f"{VERIFY_FAILS}: {DEBIAN}"], run.failures()
    assert "cgroup driver" in run.failures()[f"{VERIFY_FAILS}: {DEBIAN}"]
    toolkit = {host: nodes.root(host) / "root" / "toolkit" for host in (AIRGAP, DEBIAN)}
    assert (toolkit[AIRGAP] / "report.txt").read_text() == CONTRACT_REPORT
    assert (toolkit[DEBIAN] / "report.txt").read_text() == CONTRACT_REPORT
    for host in (AIRGAP, DEBIAN):
        assert (toolkit[host] / "default.txt").read_text() == "DEFAULT=runc\nWHY=runtimeclass\n"
        spec = yaml.safe_load((nodes.root(host) / "etc" / "cdi" / "nvidia.yaml").read_text())
        assert spec["kind"] == "nvidia.com/gpu"
    facts = run.results("Verify the node with gpuready doctor")
    verdicts = {host: facts[host]["ansible_facts"]["gpuready"] for host in (AIRGAP, DEBIAN)}
    assert verdicts[AIRGAP]["verdict"] in ("clean", "warnings"), verdicts[AIRGAP]
    assert verdicts[DEBIAN]["verdict"] == "errors"
    assert [p["rule"] for p in verdicts[DEBIAN]["problems"] if p["severity"] == "error"] == [
        "cgroup-driver-mismatch"]
    for host in (AIRGAP, DEBIAN):
        assert verdicts[host]["files"][0] == str(nodes.config(host))
    manifest = run.results("Write the cluster's RuntimeClass manifest once, on the controller")
    assert len([h for h, r in manifest.items() if not r.get("skipped")]) == 1
    written = yaml.safe_load((nodes.folder / "cluster" / "runtimeclass.yaml").read_text())
    assert written == {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                       "metadata": {"name": "nvidia"}, "handler": "nvidia"}


def test_role_second_run_changes_nothing(nodes):
    run = nodes.run(nodes.playbook("role.yml", role_playbook(nodes)))
    assert list(run.failures()) == [f"{VERIFY_FAILS}: {DEBIAN}"], run.failures()
    assert {host: stats["changed"] for host, stats in run.stats.items()} == {AIRGAP: 0, DEBIAN: 0}


FACTS_PLAYBOOK = """\
- hosts: nodes
  gather_facts: false
  tasks:
    - name: Read the doctor result
      gpuready.node.gpuready_facts:
        root: "{{ gpuready_root }}"
"""


def test_facts_name_the_node_files_and_follow_imports(tmp_path):
    """A node whose import breaks the CRI table under containerd 1.x: the fact names the
    imported file where it is on the node."""
    nodes = fleet(tmp_path, ["imports"])
    config = nodes.config("imports")
    config.parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, config)
    config.write_text('imports = ["conf.d/*.toml"]\n' + config.read_text())
    dropin = config.parent / "conf.d" / "99-nvidia.toml"
    dropin.parent.mkdir()
    dropin.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes'
                      '.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n')
    run = nodes.run(nodes.playbook("facts.yml", FACTS_PLAYBOOK))
    gathered = run.results("Read the doctor result")["imports"]["ansible_facts"]["gpuready"]
    assert gathered["files"][:2] == [str(config), str(dropin)]
    overrides = [p for p in gathered["problems"] if p["rule"] == "import-overrides-cri"]
    assert [p["file"] for p in overrides] == [str(dropin)], gathered
    assert gathered["verdict"] == "errors"
