"""setup, check, lint and doctor give one cgroup-driver verdict, with one piece of advice.

Bases: Debian's `containerd config default` (runc on cgroupfs) and the lab base (runc on
systemd); kubelet: no config, cgroupDriver systemd, cgroupDriver cgroupfs. The GPU runtime gets
the contract's SystemdCgroup = true in every case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import CONTAINERD_DATA, LAB_BASE, into_root, run_cli

BASES = {"debian-default": CONTAINERD_DATA / "containerd-1.6.20-default.toml", "lab": LAB_BASE}
KUBELET = {"none": None, "systemd": "systemd", "cgroupfs": "cgroupfs"}
# (base, kubelet) -> the verdict: ok, warning (setup exits 0), error (setup exits 1)
EXPECTED = {
    ("debian-default", "none"): "warning",
    ("debian-default", "systemd"): "error",  # runc differs from the kubelet
    ("debian-default", "cgroupfs"): "error",  # the GPU runtime differs from the kubelet
    ("lab", "none"): "ok",
    ("lab", "systemd"): "ok",
    ("lab", "cgroupfs"): "error",
}


def node(tmp_path: Path, kubelet: str | None) -> Path:
    root = tmp_path / "node"
    root.mkdir()
    if kubelet:
        config = root / "var/lib/kubelet/config.yaml"
        config.parent.mkdir(parents=True)
        config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                          f"cgroupDriver: {kubelet}\n")
    return root


@pytest.mark.parametrize(("base", "kubelet"), sorted(EXPECTED))
def test_setup_check_and_doctor_agree(tmp_path, base, kubelet):
    root = node(tmp_path, KUBELET[kubelet])
    setup = run_cli("setup", "--root", str(root), "--base", str(into_root(root, BASES[base])),
                    "--format", "json")
    expected = EXPECTED[(base, kubelet)]
    assert setup.code == (1 if expected == "error" else 0), setup.out + setup.err
    check = next(c for c in json.loads(setup.out)["checks"] if c["name"] == "cgroup drivers agree")
    doctor = run_cli("doctor", "--root", str(root), "--format", "json",
                     "--containerd-version", "1.6.20")
    problems = [p for p in json.loads(doctor.out)["problems"]
                if p["rule"] == "cgroup-driver-mismatch"]
    again = run_cli("check", "--root", str(root), "--format", "json")
    checked = next(c for c in json.loads(again.out)["checks"]
                   if c["name"] == "cgroup drivers agree")
    assert checked == check
    if expected == "ok":
        assert check["ok"] and not check["warning"] and problems == []
        return
    assert len(problems) == 1 and problems[0]["severity"] == expected
    assert check["ok"] == (expected == "warning") and check["warning"] == (expected == "warning")
    assert check["fix"] == problems[0]["fix"]
    assert problems[0]["message"] in check["detail"]
    # never the opposite of the contract: the GPU runtime keeps SystemdCgroup = true
    assert "SystemdCgroup = false" not in check["fix"]


def test_setup_text_shows_the_warning_and_passes(tmp_path):
    root = node(tmp_path, None)
    setup = run_cli("setup", "--root", str(root), "--base",
                    str(into_root(root, BASES["debian-default"])))
    assert setup.code == 0
    assert "warning: cgroup-driver-mismatch: runtime 'nvidia' uses systemd" in setup.out
    assert "--systemd-cgroup=inherit" in setup.out
    assert setup.out.rstrip().endswith("checks passed, 1 with a warning")
    assert "note: " not in setup.out  # one verdict, not a note besides it


def test_dry_run_steps_say_what_would_happen(tmp_path):
    root = node(tmp_path, None)
    setup = run_cli("setup", "--root", str(root), "--base", str(into_root(root, BASES["lab"])),
                    "--dry-run")
    steps = [line for line in setup.out.splitlines() if line.startswith("[")]
    assert len(steps) == 8
    assert not any("(created)" in line or line.endswith(": created") for line in steps), steps
    assert "(would be created)" in steps[3] and steps[7].endswith(": would be created")
    assert not (root / "root").exists()


def test_doctor_reads_a_camel_case_systemd_cgroup_as_containerd_does(tmp_path):
    """systemdCgroup = true reaches the shim on every containerd line (see test_option_decoding):
    no cgroup mismatch against a systemd kubelet, only the spelling warning."""
    root = node(tmp_path, "systemd")
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(LAB_BASE.read_text() + (
        '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '  binaryName = "/usr/bin/nvidia-container-runtime"\n'
        "  systemdCgroup = true\n"))
    doctor = run_cli("doctor", "--root", str(root), "--format", "json",
                     "--containerd-version", "1.6.20")
    rules = {p["rule"]: p["severity"] for p in json.loads(doctor.out)["problems"]}
    assert "cgroup-driver-mismatch" not in rules
    assert rules["option-spelling"] == "warning"
    assert "binary-missing" in rules  # the camelCase BinaryName is the one checked
