"""The default runtime is never changed without --confirm-every-pod-uses-it.

Registering under the default runtime's own name (``--runtime-name runc``) used to write the
NVIDIA binary and the systemd cgroup driver into runc's table with exit 0, putting every pod on
the node through the NVIDIA runtime. These tests run the real command line on config files of
every version (1 to 4, containerd's own defaults where there is one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from tests.helpers import CONTAINERD_DATA, DATA, into_root, run_cli

CONFIGS = {
    "v1": DATA / "register/v1-no-version/input.toml",
    "v2": CONTAINERD_DATA / "containerd-1.6.20-default.toml",
    "v3": CONTAINERD_DATA / "containerd-2.1.9-default.toml",
    "v4": CONTAINERD_DATA / "containerd-2.3.4-default.toml",
}
REFUSAL = "refusing to change how the default runtime 'runc' runs"


def copy_of(tmp_path: Path, version: str) -> Path:
    target = tmp_path / "config.toml"
    shutil.copyfile(CONFIGS[version], target)
    return target


def runc_options(path: Path, version: str) -> dict:
    data = tomllib.loads(path.read_text())
    plugin = {"v1": "cri", "v2": "io.containerd.grpc.v1.cri"}.get(
        version, "io.containerd.cri.v1.runtime")
    return data["plugins"][plugin]["containerd"]["runtimes"]["runc"].get("options", {})


@pytest.mark.parametrize("version", sorted(CONFIGS))
def test_configure_refuses_to_turn_runc_into_the_nvidia_runtime(tmp_path, version):
    config = copy_of(tmp_path, version)
    before = config.read_bytes()
    result = run_cli("configure", "--config", str(config), "--runtime-name", "runc")
    assert result.code == 2, result.out
    assert REFUSAL in result.err
    assert "-> '/usr/bin/nvidia-container-runtime'" in result.err.split("BinaryName: ")[1]
    assert "--confirm-every-pod-uses-it" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert config.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]  # no backup either


@pytest.mark.parametrize("version", sorted(CONFIGS))
def test_setup_refuses_it_too_and_creates_nothing(tmp_path, version):
    root = tmp_path / "node"
    base = into_root(root, CONFIGS[version])  # the node holds its base and nothing else
    result = run_cli("setup", "--root", str(root), "--base", str(base), "--runtime-name", "runc")
    assert result.code == 2, result.out
    assert REFUSAL in result.err
    assert [p for p in root.rglob("*") if p.is_file()] == [base]


@pytest.mark.parametrize("version", sorted(CONFIGS))
def test_the_confirmation_allows_it(tmp_path, version):
    config = copy_of(tmp_path, version)
    line = {"v3": "2.1", "v4": "2.3"}.get(version, "1.7")  # a containerd that reads the file
    result = run_cli("configure", "--config", str(config), "--runtime-name", "runc",
                     "--confirm-every-pod-uses-it", "--containerd-version", line)
    assert result.code == 0, result.err
    assert runc_options(config, version)["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_whatever_runtime_is_the_default_is_guarded(tmp_path):
    config = tmp_path / "config.toml"
    shutil.copyfile(DATA / "register/v2-crun-default/input.toml", config)
    before = config.read_bytes()
    result = run_cli("configure", "--config", str(config), "--runtime-name", "crun")
    assert result.code == 2
    assert "refusing to change how the default runtime 'crun' runs" in result.err
    assert config.read_bytes() == before


def test_registering_beside_the_default_is_not_refused(tmp_path):
    config = copy_of(tmp_path, "v2")
    runc_before = runc_options(config, "v2")
    result = run_cli("configure", "--config", str(config))
    assert result.code == 0, result.err
    assert runc_options(config, "v2") == runc_before


def test_lint_fix_does_not_change_how_the_default_runtime_runs(tmp_path):
    """Moving runc's misplaced SystemdCgroup into its options switches every pod's cgroup
    driver: refused without the confirmation, done with it."""
    config = tmp_path / "config.toml"
    config.write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n  SystemdCgroup = true\n')
    before = config.read_bytes()
    result = run_cli("lint", "--fix", str(config))
    assert result.code == 2
    assert "SystemdCgroup: unset -> true" in result.err and REFUSAL in result.err
    assert config.read_bytes() == before
    confirmed = run_cli("lint", "--fix", "--confirm-every-pod-uses-it", str(config))
    assert confirmed.code in (0, 1), confirmed.err
    assert runc_options(config, "v2")["SystemdCgroup"] is True


def test_a_spelling_fix_of_the_default_runtime_is_not_a_change(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        '  SystemdCgroup = "true"\n')
    result = run_cli("lint", "--fix", str(config))
    assert result.code in (0, 1), result.err
    assert runc_options(config, "v2")["SystemdCgroup"] is True


CORPUS = DATA / "corpus-real"
AKS_GPU = CORPUS / "aks-agentbaker-gpu-v2.toml"  # AKS's default runtime: nvidia-container-runtime
BOTTLEROCKET_NVIDIA = CORPUS / "bottlerocket-k8s-nvidia.toml"  # its default: nvidia (nvidia-oci)
OPERATOR_BINARY = "/usr/local/nvidia/toolkit/nvidia-container-runtime"  # the GPU Operator's


def _refused(config: Path, *args: str) -> str:
    """The one-line refusal of ``configure`` on ``config``; nothing written."""
    before = config.read_bytes()
    result = run_cli("configure", "--config", str(config), "--containerd-version", "1.7", *args)
    assert result.code == 2, result.out + result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
    assert config.read_bytes() == before
    return result.err


def test_aks_gpu_node_is_told_its_default_already_runs_the_nvidia_runtime(tmp_path):
    """AKS (AgentBaker) makes the NVIDIA runtime the default itself: registering that runtime
    with other settings is refused, and the advice is not to register it under the name it
    already has."""
    config = tmp_path / "config.toml"
    shutil.copyfile(AKS_GPU, config)
    err = _refused(config, "--runtime-name", "nvidia-container-runtime",
                   "--binary", OPERATOR_BINARY)
    assert "refusing to change how the default runtime 'nvidia-container-runtime' runs" in err
    assert ("default runtime 'nvidia-container-runtime' already runs the NVIDIA runtime "
            "(BinaryName '/usr/bin/nvidia-container-runtime')") in err
    assert "nothing to register" in err
    assert "--runtime-name nvidia," in err  # another name, beside it
    assert "under its own name" not in err and "--runtime-name nvidia-container-runtime" not in err


def test_a_default_runtime_already_named_nvidia_is_not_told_to_use_that_name(tmp_path):
    """AKS's GPU config with its runtime named ``nvidia`` (the default is then ``nvidia``), and
    Bottlerocket's NVIDIA variant (default ``nvidia``, through ``nvidia-oci``): the plain
    ``configure`` (``--runtime-name nvidia``) may not change it, and the refusal must not say
    "register it under its own name (--runtime-name nvidia)", the name it already has."""
    aks = tmp_path / "aks.toml"
    aks.write_text(AKS_GPU.read_text().replace('"nvidia-container-runtime"', '"nvidia"')
                   .replace("runtimes.nvidia-container-runtime", "runtimes.nvidia"))
    assert tomllib.loads(aks.read_text())["plugins"]["io.containerd.grpc.v1.cri"]["containerd"][
        "default_runtime_name"] == "nvidia"
    bottlerocket = tmp_path / "bottlerocket.toml"
    shutil.copyfile(BOTTLEROCKET_NVIDIA, bottlerocket)
    for config, args, binary in ((aks, ("--binary", OPERATOR_BINARY),
                                  "/usr/bin/nvidia-container-runtime"),
                                 (bottlerocket, (), "nvidia-oci")):
        err = _refused(config, *args)
        assert "refusing to change how the default runtime 'nvidia' runs" in err
        assert (f"This node's default runtime 'nvidia' already runs the NVIDIA runtime "
                f"(BinaryName '{binary}')") in err
        assert "nothing to register" in err and "--runtime-name nvidia-gpu" in err
        assert "(--runtime-name nvidia)" not in err and "under its own name" not in err


def test_registering_over_runc_still_names_the_nvidia_runtime_name(tmp_path):
    config = copy_of(tmp_path, "v2")
    err = _refused(config, "--runtime-name", "runc")
    assert "Register the NVIDIA runtime under its own name (--runtime-name nvidia)" in err
