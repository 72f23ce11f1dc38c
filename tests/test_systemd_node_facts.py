"""Whether systemd runs on a node: the live machine as sd_booted() decides, a root only by what
it holds (run/systemd/system, proc/1/comm, its init), and a sandbox with none of it unknown."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuready.init_system import systemd_fact
from gpuready.node import Node
from tests.helpers import REPO


def _comm(root: Path, name: str) -> Path:
    (root / "proc/1").mkdir(parents=True, exist_ok=True)
    (root / "proc/1/comm").write_text(f"{name}\n")
    return root


def test_an_empty_sandbox_is_unknown(tmp_path):
    fact = systemd_fact(Node(tmp_path))
    assert fact.running is None and not fact.absent


def test_run_systemd_system_in_the_root_means_systemd(tmp_path):
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    fact = systemd_fact(Node(tmp_path))
    assert fact.running is True
    assert str(tmp_path / "run/systemd/system") in fact.evidence


def test_a_file_at_run_systemd_system_is_not_the_folder(tmp_path):
    (tmp_path / "run/systemd").mkdir(parents=True)
    (tmp_path / "run/systemd/system").write_text("")
    assert systemd_fact(Node(tmp_path)).running is None


@pytest.mark.parametrize("pid1", ["init", "tini", "openrc-init", "runit", "busybox"])
def test_pid1_other_than_systemd_means_no_systemd(tmp_path, pid1):
    fact = systemd_fact(Node(_comm(tmp_path, pid1)))
    assert fact.running is False and fact.absent
    assert f"PID 1 is {pid1!r}" in fact.evidence
    assert str(tmp_path / "proc/1/comm") in fact.evidence


def test_pid1_systemd_means_systemd(tmp_path):
    assert systemd_fact(Node(_comm(tmp_path, "systemd"))).running is True


def test_run_systemd_system_wins_over_pid1(tmp_path):
    _comm(tmp_path, "tini")
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    assert systemd_fact(Node(tmp_path)).running is True


@pytest.mark.parametrize("comm", ["", "\n", "x" * 100, "bad\x01name"])
def test_an_unreadable_comm_says_nothing(tmp_path, comm):
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/comm").write_text(comm)
    assert systemd_fact(Node(tmp_path)).running is None


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_init_linking_to_systemd_means_systemd(tmp_path):
    _executable(tmp_path / "lib/systemd/systemd")
    (tmp_path / "sbin").mkdir()
    (tmp_path / "sbin/init").symlink_to("../lib/systemd/systemd")
    fact = systemd_fact(Node(tmp_path))
    assert fact.running is True
    assert "/lib/systemd/systemd" in fact.evidence


def test_init_through_merged_usr_and_an_absolute_link_stays_in_the_root(tmp_path):
    # /sbin -> usr/sbin, /usr/sbin/init -> /usr/lib/systemd/systemd (absolute: from the root)
    _executable(tmp_path / "usr/lib/systemd/systemd")
    (tmp_path / "usr/sbin").mkdir(parents=True)
    (tmp_path / "sbin").symlink_to("usr/sbin")
    (tmp_path / "usr/sbin/init").symlink_to("/usr/lib/systemd/systemd")
    assert systemd_fact(Node(tmp_path)).running is True


@pytest.mark.parametrize("target", ["/bin/busybox", "/sbin/openrc-init", "/usr/bin/runit-init"])
def test_init_linking_elsewhere_means_no_systemd(tmp_path, target):
    _executable(tmp_path / target.lstrip("/"))
    (tmp_path / "sbin").mkdir(exist_ok=True)
    (tmp_path / "sbin/init").symlink_to(target)
    fact = systemd_fact(Node(tmp_path))
    assert fact.running is False
    assert target in fact.evidence


def test_a_dangling_init_link_or_a_plain_init_file_is_unknown(tmp_path):
    (tmp_path / "sbin").mkdir()
    (tmp_path / "sbin/init").symlink_to("/lib/systemd/systemd")  # not in the root
    assert systemd_fact(Node(tmp_path)).running is None
    (tmp_path / "sbin/init").unlink()
    _executable(tmp_path / "sbin/init")  # sysvinit's own binary: nothing to read without running
    assert systemd_fact(Node(tmp_path)).running is None


def test_a_link_out_of_the_root_is_not_followed(tmp_path):
    """A folder outside the root says nothing about it: an absolute link starts at the root."""
    outside = tmp_path / "outside"
    (outside / "systemd/system").mkdir(parents=True)
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(str(outside), root / "run")  # inside the root it names <root>/<outside>
    assert os.path.isdir(root / "run/systemd/system")  # what a lookup on the host would see
    assert systemd_fact(Node(root)).running is None


def test_the_live_node_is_judged_as_sd_booted_decides():
    fact = systemd_fact(Node("/"))
    if os.path.isdir("/run/systemd/system") and not os.path.islink("/run/systemd/system"):
        assert fact.running is True
        return
    comm = Path("/proc/1/comm").read_text().strip() if os.access("/proc/1/comm", os.R_OK) else ""
    if comm == "systemd":  # PID 1's /run is another than ours: nothing to say
        assert fact.running is None
        return
    assert fact.running is False
    assert "/run/systemd/system does not exist" in fact.evidence
    if comm:
        assert f"PID 1 is {comm!r} (/proc/1/comm)" in fact.evidence


LIVE_CONFIG = textwrap.dedent("""\
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
        SystemdCgroup = true
    """)
# Runs gpuready in-process with an audit hook: every file it opens is recorded (real opens).
AUDITED = textwrap.dedent("""\
    import sys
    opened = []
    def hook(event, args):
        if event == "open" and isinstance(args[0], str):
            opened.append(args[0])
    sys.addaudithook(hook)
    from gpuready.cli import main
    code = main.run(sys.argv[1:])
    print("OPENED", sorted({path for path in opened if path.startswith("/proc/")}))
    sys.exit(code)
    """)


def _audited(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AUDITED, *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=60)


def test_lint_of_a_file_does_not_judge_the_node_and_opens_nothing_under_proc(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(LIVE_CONFIG)
    result = _audited("lint", "--select", "systemd-cgroup-without-systemd,bool-as-string",
                      str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OPENED []" in result.stdout
    assert "systemd-cgroup-without-systemd" not in result.stdout


def _pid1() -> str:
    try:
        return Path("/proc/1/comm").read_text().strip()
    except OSError:
        return ""


@pytest.mark.skipif(os.path.isdir("/run/systemd/system") or _pid1() == "systemd",
                    reason="systemd runs on this machine")
def test_doctor_of_the_live_node_without_systemd_reads_pid1_and_finds_the_error(tmp_path):
    """The live node is judged (doctor, no --root): on this machine without systemd,
    SystemdCgroup = true is the error, and PID 1's name is read to say why."""
    config = tmp_path / "config.toml"
    config.write_text(LIVE_CONFIG)
    result = _audited("doctor", "--config", str(config), "--containerd-version", "1.7",
                      "--select", "systemd-cgroup-without-systemd,cgroup-driver-mismatch")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error systemd-cgroup-without-systemd: runtimes 'nvidia' and 'runc' have " \
           "SystemdCgroup = true but systemd does not run on this node (/run/systemd/system " \
           "does not exist" in result.stdout
    assert "fix: set SystemdCgroup = false (the cgroupfs driver)" in result.stdout
    if os.access("/proc/1/comm", os.R_OK):
        assert "/proc/1/comm" in result.stdout.split("OPENED", 1)[1]
