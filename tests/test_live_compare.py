"""Comparing a config on disk with the CRI config a real containerd 1.6.20 reported.

tests/data/cri/containerd-1.6.20-status-config.json is ``Status(verbose).info["config"]`` as
the real daemon returned it (its temporary paths replaced by the usual ones).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.containerd.document import load_config_text
from gpuready.cri.live import Comparison, Outcome, compare, parse_live_config

DATA = Path(__file__).parent / "data"
LIVE = json.loads((DATA / "cri/containerd-1.6.20-status-config.json").read_text())
BASE = (DATA / "containerd/lab-base.toml").read_text()
NVIDIA = """
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "{binary}"
    SystemdCgroup = {systemd}
"""


def outcomes(disk_text: str) -> dict[str, tuple[Outcome, str]]:
    disk = load_config_text(disk_text, "/etc/containerd/config.toml")
    results = compare(disk, parse_live_config(LIVE), Comparison("nvidia", "nvidia"))
    return {r.check: (r.outcome, r.message) for r in results}


def test_live_keys_of_containerd_1_6():
    live = parse_live_config(LIVE)
    assert sorted(live.runtimes) == ["nvidia", "runc"]
    assert live.runtimes["nvidia"].runtime_type == "io.containerd.runc.v2"
    assert live.runtimes["nvidia"].options["SystemdCgroup"] is True
    assert live.default_runtime_name == "runc"
    assert live.enable_cdi is None  # 1.6 has no CDI
    assert live.sandbox_image == "registry.k8s.io/pause:3.9"


@pytest.mark.parametrize(
    ("binary", "systemd", "check", "expected"),
    [
        ("/usr/bin/nvidia-container-runtime", "true", "binary-name", Outcome.OK),
        ("/usr/local/bin/nvidia-container-runtime", "true", "binary-name", Outcome.FAILED),
        ("/usr/bin/nvidia-container-runtime", "false", "systemd-cgroup", Outcome.FAILED),
        ("/usr/bin/nvidia-container-runtime", "true", "default-runtime", Outcome.OK),
    ],
)
def test_each_key_compared(binary, systemd, check, expected):
    result = outcomes(BASE + NVIDIA.format(binary=binary, systemd=systemd))
    assert result[check][0] is expected, result[check][1]


def test_missing_on_disk_and_live_without_imports_fails():
    assert outcomes(BASE)["runtime-loaded"][0] is Outcome.FAILED


def test_missing_on_disk_with_drop_ins_is_a_warning():
    text = 'imports = ["/etc/containerd/conf.d/*.toml"]\n' + BASE
    outcome, message = outcomes(text)["runtime-loaded"]
    assert outcome is Outcome.WARNING and "conf.d" in message


def test_enable_cdi_on_1_6_is_a_warning():
    text = BASE.replace(
        '[plugins."io.containerd.grpc.v1.cri"]\n',
        '[plugins."io.containerd.grpc.v1.cri"]\n    enable_cdi = true\n',
    ) + NVIDIA.format(binary="/usr/bin/nvidia-container-runtime", systemd="true")
    outcome, message = outcomes(text)["enable-cdi"]
    assert outcome is Outcome.WARNING and "1.7" in message


def test_disabled_cri_on_disk_fails():
    text = 'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n' + BASE
    assert outcomes(text)["cri-enabled"][0] is Outcome.FAILED


def test_unset_enable_cdi_in_a_version_3_file_counts_as_on() -> None:
    """containerd 2.x turns CDI on when enable_cdi is not set: no false mismatch."""
    from gpuready.containerd.document import load_config_text
    from gpuready.cri.live import Comparison, compare, parse_live_config

    disk = load_config_text(
        "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n"
        "runtime_type = 'io.containerd.runc.v2'\n", "config.toml"
    )
    live = parse_live_config({
        "enableCDI": True,
        "containerd": {"defaultRuntimeName": "runc", "runtimes": {
            "nvidia": {"runtimeType": "io.containerd.runc.v2", "options": {}}}},
    })
    results = {r.check: r for r in compare(disk, live, Comparison("nvidia", "nvidia"))}
    assert results["enable-cdi"].outcome.value == "ok", results["enable-cdi"].message
