"""What ``gpuready setup`` writes, loaded by a real containerd started on it.

The config is the one setup produced, with only containerd's own paths (root, state, socket)
moved into a temporary folder; the daemon's CRI API is then asked which runtime handlers it
loaded, which is what the kubelet will see.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.cri.client import CriClient
from tests.harness.containerd import Containerd, sandboxed, short_tempdir
from tests.helpers import require, run_cli, stage_fixture

pytestmark = pytest.mark.containerd


@pytest.fixture
def node_daemon(tmp_path: Path):
    require(binaries=("containerd", "runc"))
    root = tmp_path / "node"
    stage_fixture(root)
    assert run_cli("setup", "--root", str(root)).code == 0
    written = (root / "etc/containerd/config.toml").read_text()
    folder = short_tempdir()
    daemon = Containerd(sandboxed(written, folder), folder)
    daemon.start()
    yield daemon
    daemon.remove()


def test_started_containerd_loads_the_nvidia_runtime_setup_wrote(node_daemon) -> None:
    with CriClient(f"unix://{node_daemon.socket}", timeout=10) as client:
        config = client.status(verbose=True).config()
    runtimes = config["containerd"]["runtimes"]
    assert set(runtimes) == {"runc", "nvidia"}
    nvidia = runtimes["nvidia"]
    assert nvidia["runtimeType"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["options"]["SystemdCgroup"] is True
    assert config["containerd"]["defaultRuntimeName"] == "runc"


def test_verify_live_agrees_with_the_file_setup_wrote(node_daemon) -> None:
    result = run_cli("verify", "--live", "--address", f"unix://{node_daemon.socket}",
                     "--config", str(node_daemon.config_path), "--format", "json")
    assert result.code == 0, result.out + result.err
    assert json.loads(result.out)["status"] == "ok"
