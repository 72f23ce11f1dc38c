"""``gpuready audit``: doctor over many fetched nodes, with a summary, in parallel processes."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, REPO, run_cli

CONFIG = Path("etc/containerd/config.toml")
REGISTERED = REPO / "tests" / "data" / "lab-base-registered.toml"


def node(fleet: Path, host: str, text: str | None = None, *, source: Path = REGISTERED) -> Path:
    """A node folder as Ansible's fetch lays it out: ``fleet/HOST/etc/containerd/config.toml``."""
    config = fleet / host / CONFIG
    config.parent.mkdir(parents=True)
    if text is None:
        shutil.copyfile(source, config)
    else:
        config.write_text(text)
    return config


@pytest.fixture
def fleet(tmp_path) -> Path:
    """Four nodes: one clean but for warnings, one unregistered, one not TOML, one unreadable."""
    folder = tmp_path / "fleet"
    node(folder, "gpu-ok")
    node(folder, "gpu-unregistered", source=LAB_BASE)
    node(folder, "gpu-broken", 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n')
    binary = node(folder, "gpu-binary", "")
    binary.write_bytes(b"version = 2\n\x00\x01")
    return folder


def test_summary_counts_nodes_rules_and_puts_the_worst_first(fleet):
    result = run_cli("audit", str(fleet))
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert lines[0] == "4 nodes: 0 clean, 1 with warnings, 2 with errors, 1 unreadable"
    rules = dict(line.split()[::2] for line in lines[lines.index("rules (nodes affected):") + 1:]
                 if line.startswith("  ") and not line.startswith(f"  {fleet}"))
    assert rules["runtime-not-registered"] == "1"
    assert rules["toml-syntax"] == "1"
    assert rules["cdi-spec-missing"] == "3"
    worst = [line.split(":")[0].strip() for line in lines if line.startswith(f"  {fleet}")]
    assert worst[0] == str(fleet / "gpu-binary")  # unreadable is the worst
    assert worst[-1] == str(fleet / "gpu-ok")  # warnings only: the least bad
    assert f"{fleet / 'gpu-binary' / CONFIG}:2: binary file" in result.out
    assert result.err == ""  # not a terminal: no progress bar


def test_json_document_for_dashboards(fleet):
    result = run_cli("audit", str(fleet), "--format", "json")
    document = json.loads(result.out)
    assert document["status"] == "failed"
    assert document["summary"] == {"nodes": 4, "clean": 0, "warnings": 1, "errors": 2,
                                   "unreadable": 1}
    nodes = {entry["node"]: entry for entry in document["nodes"]}
    unregistered = nodes[str(fleet / "gpu-unregistered")]
    assert unregistered["verdict"] == "errors"
    assert "runtime-not-registered" in {p["rule"] for p in unregistered["problems"]}
    assert nodes[str(fleet / "gpu-binary")]["error"].startswith(str(fleet / "gpu-binary"))
    severities = [entry["severity"] for entry in document["rules"]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)


def test_plain_config_files_and_a_clean_fleet(tmp_path):
    clean = tmp_path / "clean.toml"
    shutil.copyfile(REGISTERED, clean)
    result = run_cli("audit", str(clean), "--ignore", "binary-missing")
    assert result.code == 0, result.out + result.err
    assert result.out.startswith("1 nodes: 1 clean, 0 with warnings, 0 with errors")


def test_many_nodes_run_in_worker_processes_and_every_fault_is_found(tmp_path):
    """Enough nodes to use the process pool; each injected fault is reported on its node."""
    folder = tmp_path / "fleet"
    faulty = {f"n{index:03d}" for index in range(0, 120, 7)}
    for index in range(120):
        host = f"n{index:03d}"
        node(folder, host, source=LAB_BASE if host in faulty else REGISTERED)
    result = run_cli("audit", str(folder), "--format", "json", "--jobs", "2")
    document = json.loads(result.out)
    flagged = {Path(entry["node"]).name for entry in document["nodes"]
               if "runtime-not-registered" in {p["rule"] for p in entry["problems"]}}
    assert flagged == faulty
    assert document["summary"]["nodes"] == 120


def test_progress_bar_only_on_a_terminal(fleet):
    """stderr a pseudo-terminal: the bar is drawn there, and stdout keeps only the summary."""
    main, secondary = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    process = subprocess.run(
        [sys.executable, "-m", "gpuready", "audit", str(fleet)],
        stdout=subprocess.PIPE, stderr=secondary, env=env, timeout=60,
    )
    os.close(secondary)
    drawn = os.read(main, 4096).decode()
    os.close(main)
    assert "4/4 nodes" in drawn and "[" in drawn
    assert process.stdout.decode().startswith("4 nodes:")


def test_no_node_found_is_a_usage_error(tmp_path):
    result = run_cli("audit", str(tmp_path))
    assert result.code == 2
    assert "no node found" in result.err


def test_a_rule_that_is_an_error_on_some_nodes_is_listed_as_an_error_with_the_split(tmp_path):
    """cdi-spec-missing is an error where the config enables CDI (2.x), a warning elsewhere: the
    summary must not show the severity of whichever node came first."""
    folder = tmp_path / "fleet"
    node(folder, "a-cdi-off")  # version 2 with CDI off: a missing spec is a warning
    node(folder, "b-cdi-on", source=REPO / "tests/data/containerd/containerd-2.1.9-default.toml")
    node(folder, "c-cdi-on", source=REPO / "tests/data/containerd/containerd-2.3.4-default.toml")
    result = run_cli("audit", str(folder))
    row = "  cdi-spec-missing        error    3 (error on 2, warning on 1)"
    assert row in result.out.splitlines()
    document = json.loads(run_cli("audit", str(folder), "--format", "json").out)
    row = next(entry for entry in document["rules"] if entry["rule"] == "cdi-spec-missing")
    assert row == {"rule": "cdi-spec-missing", "severity": "error", "nodes": 3,
                   "nodes_by_severity": {"error": 2, "warning": 1}}


def test_nodes_with_the_same_texts_are_each_judged_on_their_own_files(tmp_path):
    """audit parses a text shared by many nodes once; what depends on the node must not be
    shared: a syntax error names each node's own file, a binary is looked for on each node, and
    the same spec text is read as YAML or JSON by its file name. Each node's problems are those
    doctor finds on that node alone."""
    folder = tmp_path / "fleet"
    broken = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n'
    for host in ("a-broken", "b-broken"):
        node(folder, host, broken)
    spec = ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n"
            "  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n")
    for host, binary, spec_name in (("c-installed", True, "nvidia.yaml"),
                                    ("d-missing", False, "nvidia.json")):
        node(folder, host)
        if binary:
            installed = folder / host / "usr/bin/nvidia-container-runtime"
            installed.parent.mkdir(parents=True)
            installed.write_bytes(b"")
            installed.chmod(0o755)
        (folder / host / "etc/cdi").mkdir(parents=True)
        (folder / host / "etc/cdi" / spec_name).write_text(spec)
    result = run_cli("audit", str(folder), "--format", "json", "--jobs", "1")
    nodes = {Path(entry["node"]).name: entry for entry in json.loads(result.out)["nodes"]}
    for host in ("a-broken", "b-broken"):
        (syntax,) = [p for p in nodes[host]["problems"] if p["rule"] == "toml-syntax"]
        assert syntax["file"] == str(folder / host / CONFIG)
    rules = {host: {p["rule"] for p in entry["problems"]} for host, entry in nodes.items()}
    assert "binary-missing" not in rules["c-installed"]
    assert "binary-missing" in rules["d-missing"]
    for host in nodes:
        alone = run_cli("doctor", "--root", str(folder / host), "--format", "json")
        assert json.loads(alone.out)["problems"] == nodes[host]["problems"]
