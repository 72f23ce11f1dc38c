"""Facts said once and right (issue 27, 6): what gpuready says about a node is the fact it
decided, wherever it says it.

- the line named by ``--containerd-version`` governs every note (not the host's containerd);
- ``doctor --config X`` names X as the file it read;
- a node without systemd: ``SystemdCgroup = true`` is a finding wherever it would fail the first
  sandbox (``configure``, ``verify --live``), with the fix;
- a CDI spec written without GPU evidence is called a placeholder, with how to make the real
  one, and its intent record holds only what was given.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import driver_trees as trees
from tests.helpers import LAB_BASE, run_cli, socket_in_root

RULE = "systemd-cgroup-without-systemd"
RUNC_SAYS = "systemd not running on this host, cannot use systemd cgroups manager"


def _node(tmp_path: Path, *, pid1: str | None = None) -> Path:
    """A node root with the lab's containerd config; PID 1 named ``pid1`` when given."""
    root = tmp_path / "node"
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, config)
    if pid1 is not None:
        (root / "proc/1").mkdir(parents=True)
        (root / "proc/1/comm").write_text(f"{pid1}\n")
    return root


# -- the line named by --containerd-version governs every note ------------------------------


@pytest.mark.parametrize("line, says", [
    ("1.7", "containerd 1.7 (--containerd-version) reads enable_cdi"),
    ("2.1", "containerd 2.1 (--containerd-version) reads enable_cdi"),
    ("1.6", "containerd 1.6 (--containerd-version): it ignores enable_cdi"),
])
def test_the_named_line_governs_the_enable_cdi_note(tmp_path, line, says):
    root = _node(tmp_path)
    result = run_cli("configure", "--root", str(root), "--containerd-version", line,
                     "--enable-cdi", "--dry-run")
    assert result.code == 0, result.out + result.err
    notes = [row for row in result.out.splitlines()
             if row.startswith("note:") and "enable_cdi" in row]
    assert notes == [f"note: {says}" + (" (CDI needs containerd 1.7 or later)"
                                         if line == "1.6" else "")]
    assert "installed containerd" not in result.out  # the host's binary says nothing here


def test_a_root_without_a_release_is_not_judged_by_the_host_containerd(tmp_path):
    root = _node(tmp_path)
    result = run_cli("configure", "--root", str(root), "--enable-cdi", "--dry-run",
                     "--format", "json")
    assert result.code == 0, result.out + result.err
    notes = json.loads(result.out)["notes"]
    assert "enable_cdi needs containerd 1.7 or later; earlier releases ignore it " \
           "(--containerd-version names the node's release)" in notes
    assert not any("installed" in note for note in notes)


# -- doctor --config names the file it read ---------------------------------------------------


def test_doctor_config_heads_its_report_with_the_file_it_read(tmp_path):
    root = _node(tmp_path)
    other = root / "srv" / "other.toml"  # under --root, a file of the node
    other.parent.mkdir()
    shutil.copyfile(LAB_BASE, other)
    result = run_cli("doctor", "--root", str(root), "--config", str(other))
    header = result.out.splitlines()[:3]
    assert f"  config checked: {other} (--config; without it: /etc/containerd/config.toml, " \
           "the owner's)" in header, result.out
    assert not any(line.startswith("  containerd reads:") for line in header)
    document = json.loads(run_cli("doctor", "--root", str(root), "--config", str(other),
                                  "--format", "json").out)
    assert document["config"] == str(other)
    assert document["files"][0] == str(other)
    # without --config the owner's file is the one read, and said so
    plain = run_cli("doctor", "--root", str(root))
    assert "  containerd reads: /etc/containerd/config.toml" in plain.out.splitlines()[:3]


# -- no systemd: SystemdCgroup = true is a finding, with the fix --------------------------------


def test_configure_without_systemd_reports_the_finding_and_its_fix(tmp_path):
    root = _node(tmp_path, pid1="tini")
    result = run_cli("configure", "--root", str(root), "--containerd-version", "1.7")
    assert result.code == 1, result.out + result.err  # a finding (errors.EXIT_CODES)
    config = root / "etc/containerd/config.toml"
    assert f"{config}:" in result.out and f"error {RULE}: runtimes 'nvidia' and 'runc' have " \
        "SystemdCgroup = true but systemd does not run on this node (PID 1 is 'tini'" in result.out
    assert RUNC_SAYS in result.out
    assert "  fix: set SystemdCgroup = false (the cgroupfs driver) in the options of runtimes " \
           "'nvidia' and 'runc' ('gpuready configure --systemd-cgroup false' does it for " \
           "'nvidia'), or run the node with systemd" in result.out
    assert "cgroup-driver-mismatch" not in result.out  # one verdict, said once
    assert "SystemdCgroup = true" in config.read_text()  # written as asked, and said

    document = json.loads(run_cli("configure", "--root", str(root), "--containerd-version",
                                  "1.7", "--systemd-cgroup", "false", "--format", "json").out)
    assert document["status"] == "failed"
    assert [(f["rule"], f["key_path"].split(".")[-3]) for f in document["findings"]] == [
        (RULE, "runc")]  # the operator's runc is what is left

    config.write_text(config.read_text().replace("SystemdCgroup = true", "SystemdCgroup = false"))
    again = run_cli("configure", "--root", str(root), "--containerd-version", "1.7",
                    "--systemd-cgroup", "false")
    assert again.code == 0 and RULE not in again.out, again.out + again.err


def test_configure_where_systemd_runs_or_nothing_tells_is_quiet(tmp_path):
    root = _node(tmp_path)  # a bare sandbox: unknown, never a reason to fault the config
    result = run_cli("configure", "--root", str(root), "--containerd-version", "1.7")
    assert result.code == 0 and RULE not in result.out, result.out + result.err
    (tmp_path / "node/proc/1").mkdir(parents=True)
    (tmp_path / "node/proc/1/comm").write_text("systemd\n")
    result = run_cli("configure", "--root", str(root), "--containerd-version", "1.7",
                     "--runtime-name", "nvidia-2")
    assert result.code == 0 and RULE not in result.out, result.out + result.err


@pytest.mark.containerd
def test_verify_live_without_systemd_reports_the_finding_not_ok(tmp_path, start_containerd):
    """The real containerd 1.6 loads nvidia and runc with SystemdCgroup = true; the node (a root
    whose PID 1 is tini, holding the config that daemon reads) shows no systemd."""
    daemon = start_containerd(runtimes={"nvidia": {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "STANDIN", "SystemdCgroup": True}}})
    root = _node(tmp_path, pid1="tini")
    shutil.copyfile(daemon.config_path, root / "etc/containerd/config.toml")
    argv = ("verify", "--live", "--address", socket_in_root(root, daemon.address), "--root",
            str(root))
    result = run_cli(*argv)
    assert result.code == 1, result.out + result.err
    line = next(row for row in result.out.splitlines() if RULE in row)
    assert line.startswith("failed  ") and RUNC_SAYS in line
    assert "fix: set SystemdCgroup = false (the cgroupfs driver) in the options of runtime" in line
    assert result.out.rstrip().endswith("status: failed")
    # where systemd runs the same daemon and file are fine
    (root / "proc/1/comm").write_text("systemd\n")
    fine = run_cli(*argv)
    assert RULE not in fine.out and fine.out.rstrip().endswith("status: ok"), fine.out + fine.err


# -- a spec written without GPU evidence is a placeholder -----------------------------------


def test_setup_without_a_gpu_says_placeholder_and_records_only_what_was_given(tmp_path):
    root = tmp_path / "node"
    result = run_cli("setup", "--root", str(root), "--containerd-version", "1.7")
    assert result.code == 0, result.out + result.err
    spec = root / "etc/cdi/nvidia.yaml"
    step = next(line for line in result.out.splitlines() if line.startswith("[6/8]"))
    assert step.startswith(f"[6/8] CDI spec: {spec}: generated as a placeholder, kind "
                           "nvidia.com/gpu: no GPU detected and no --gpus given, so it names one "
                           "planned GPU (/dev/nvidia0); the real spec: 'gpuready cdi refresh' "
                           "once the driver is loaded"), step
    assert "'gpuready cdi refresh --gpus N' (or --inventory FILE) now" in step
    assert "note:" not in result.out  # said once, in its step
    again = run_cli("setup", "--root", str(root), "--containerd-version", "1.7")
    assert f"[6/8] CDI spec: {spec}: kept existing spec (a placeholder), kind nvidia.com/gpu: " \
           "no GPU detected" in again.out
    record = json.loads((root / "etc/cdi/nvidia.yaml.gpuready.intent").read_text())
    assert record["intent"]["gpus"] is None and record["intent"]["inventory"] is None
    assert record["detected"]["source"] == "placeholder: no GPU detected"
    assert "--gpus" not in json.dumps(record)

    # the real spec, once the driver is there: refresh regenerates from the node's GPUs
    trees.install_driver(root, trees.VERSION_A)
    refreshed = run_cli("cdi", "refresh", "--root", str(root), "--format", "json")
    assert refreshed.code == 0, refreshed.out + refreshed.err
    assert json.loads(refreshed.out)["action"] == "rewritten"
    record = json.loads((root / "etc/cdi/nvidia.yaml.gpuready.intent").read_text())
    assert record["detected"]["source"] == "device nodes" and record["detected"]["gpus"] == 2


def test_setup_with_gpus_is_no_placeholder(tmp_path):
    root = tmp_path / "node"
    result = run_cli("setup", "--root", str(root), "--containerd-version", "1.7", "--gpus", "2")
    assert result.code == 0, result.out + result.err
    assert "placeholder" not in result.out
    record = json.loads((root / "etc/cdi/nvidia.yaml.gpuready.intent").read_text())
    assert (record["intent"]["gpus"], record["detected"]["source"]) == (2, "--gpus")
