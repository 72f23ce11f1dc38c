"""``gpuready verify --live`` against a real containerd started by the test harness.

The NVIDIA runtime itself cannot run without a GPU: its BinaryName is a stand-in script that
records how containerd's shim called it and hands over to runc (see harness/standin.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpuready.cri.client import CriClient
from gpuready.cri.probe import MANAGED_BY_LABEL, SYSTEMD_CGROUP_PARENT
from tests.cli_runner import run_cli
from tests.harness.standin import recorded_calls, subcommand
from tests.helpers import nvidia_runtime

DATA = Path(__file__).parent / "data"


def verify(capsys, monkeypatch, daemon, *extra: str):
    """``gpuready verify --live`` against ``daemon`` and its own config file."""
    return run_cli(
        capsys,
        monkeypatch,
        "verify",
        "--live",
        "--address",
        daemon.address,
        "--config",
        str(daemon.config_path),
        *extra,
    )


def probe_sandboxes_left(daemon) -> list[str]:
    """gpuready's sandboxes that the daemon still knows."""
    with CriClient(daemon.address) as client:
        return client.list_pod_sandboxes(labels={MANAGED_BY_LABEL: "gpuready"})


def containers_left(daemon) -> list[str]:
    """Containers in the CRI namespace, as ctr lists them."""
    result = subprocess.run(
        ["ctr", "-a", str(daemon.socket), "-n", "k8s.io", "containers", "ls", "-q"],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()


def test_live_table_shows_nvidia_as_containerd_loaded_it(capsys, monkeypatch, lab_containerd):
    result = verify(capsys, monkeypatch, lab_containerd)
    assert result.code == 0, result.out + result.err
    row = next(line for line in result.out.splitlines() if line.strip().startswith("nvidia"))
    assert str(lab_containerd.folder / "standin") in row
    assert "io.containerd.runc.v2" in row and row.rstrip().endswith("true")
    assert f"pid {lab_containerd.pid}" in result.out


def test_json_report_has_status_and_live_options(capsys, monkeypatch, lab_containerd):
    result = verify(capsys, monkeypatch, lab_containerd, "--format", "json")
    report = json.loads(result.out)
    assert report["status"] == "ok"
    options = report["runtimes"]["nvidia"]["options"]
    assert options == {"BinaryName": str(lab_containerd.folder / "standin"), "SystemdCgroup": True}
    assert report["runtime"]["config"] == str(lab_containerd.config_path)


def test_probe_reaches_binary_with_systemd_cgroup_and_cleans_up(
    capsys, monkeypatch, lab_containerd
):
    result = verify(capsys, monkeypatch, lab_containerd, "--probe")
    assert result.code == 0, result.out + result.err
    assert "ready through handler nvidia" in result.out
    calls = recorded_calls(lab_containerd.folder / "standin.log")
    create = next(call for call in calls if subcommand(call) == "create")
    assert "--systemd-cgroup" in create["argv"]
    # containerd built the systemd form because SystemdCgroup = true and the parent is a slice.
    assert create["cgroupsPath"].startswith(f"{SYSTEMD_CGROUP_PARENT}:cri-containerd:")
    assert any(subcommand(call) == "delete" for call in calls)
    assert probe_sandboxes_left(lab_containerd) == []
    assert containers_left(lab_containerd) == []


def test_probe_without_systemd_cgroup_passes_no_systemd_flag(
    capsys, monkeypatch, start_containerd, probe_archive
):
    daemon = start_containerd(runtimes=nvidia_runtime(systemd_cgroup=False), image=probe_archive)
    result = verify(capsys, monkeypatch, daemon, "--probe")
    assert result.code == 0, result.out + result.err
    create = next(
        c for c in recorded_calls(daemon.folder / "standin.log") if subcommand(c) == "create"
    )
    assert "--systemd-cgroup" not in create["argv"]


def test_probe_with_unregistered_handler_surfaces_containerd_message(
    capsys, monkeypatch, lab_containerd
):
    result = verify(capsys, monkeypatch, lab_containerd, "--probe", "--handler", "nvidia-missing")
    assert result.code == 1
    assert 'no runtime for "nvidia-missing" is configured' in result.out
    assert "Traceback" not in result.out + result.err
    assert probe_sandboxes_left(lab_containerd) == []


def test_edit_without_restart_is_on_disk_not_live(
    capsys, monkeypatch, start_containerd, probe_archive
):
    daemon = start_containerd(runtimes={}, image=probe_archive)
    from tests.harness.containerd import lab_config

    standin = str(daemon.folder / "standin")
    runtimes = {"nvidia": {"options": {"BinaryName": standin, "SystemdCgroup": True}}}
    daemon.config_path.write_text(lab_config(daemon.folder, runtimes=runtimes))

    result = verify(capsys, monkeypatch, daemon)
    assert result.code == 1
    assert "on disk, not live" in result.out
    assert f"changed after containerd (pid {daemon.pid}) started" in result.out

    daemon.restart()
    assert verify(capsys, monkeypatch, daemon).code == 0


def test_another_file_is_named(capsys, monkeypatch, start_containerd, tmp_path):
    daemon = start_containerd(runtimes={})
    other = tmp_path / "config.toml"
    from tests.harness.containerd import lab_config

    other.write_text(lab_config(daemon.folder, runtimes=nvidia_runtime()))
    result = run_cli(
        capsys,
        monkeypatch,
        "verify",
        "--live",
        "--address",
        daemon.address,
        "--config",
        str(other),
    )
    assert result.code == 1
    assert f"reads {daemon.config_path}, not {other}" in result.out


def test_value_that_differs_live_is_reported(capsys, monkeypatch, lab_containerd):
    text = lab_containerd.config_path.read_text().replace(
        "SystemdCgroup = true", "SystemdCgroup = false"
    )
    lab_containerd.config_path.write_text(text)
    result = verify(capsys, monkeypatch, lab_containerd)
    assert result.code == 1
    assert "nvidia SystemdCgroup: on disk false, live true" in result.out


def test_runtimeclass_handlers_checked_against_live(capsys, monkeypatch, lab_containerd):
    good = verify(
        capsys,
        monkeypatch,
        lab_containerd,
        "--runtimeclass",
        str(DATA / "runtimeclass/nvidia.yaml"),
    )
    assert good.code == 0, good.out
    assert "handler nvidia is loaded" in good.out
    mixed = verify(
        capsys,
        monkeypatch,
        lab_containerd,
        "--runtimeclass",
        str(DATA / "runtimeclass/two-classes.yaml"),
    )
    assert mixed.code == 1
    assert "RuntimeClass nvidia-cdi: handler nvidia-cdi is not a loaded runtime" in mixed.out


def test_broken_runtimeclass_is_bad_input_with_position(capsys, monkeypatch, lab_containerd):
    path = DATA / "runtimeclass/broken.yaml"
    result = verify(capsys, monkeypatch, lab_containerd, "--runtimeclass", str(path))
    assert result.code == 2
    assert f"{path}:5:" in result.err


def test_air_gapped_pause_image_hint_then_built_image(capsys, monkeypatch, start_containerd):
    # Nothing answers on localhost:1, so the pull fails at once, as on an air-gapped node.
    image = "localhost:1/gpuready/pause:1"
    daemon = start_containerd(runtimes=nvidia_runtime(), sandbox_image=image)
    missing = verify(capsys, monkeypatch, daemon, "--probe", "--probe-timeout", "30")
    assert missing.code == 1
    assert f"the pause image {image} is not on the node" in missing.out
    # the command to paste names this containerd's socket (ctr asks the default one otherwise)
    assert f"ctr --address {daemon.socket} -n k8s.io images import pause.tar" in missing.out

    built = verify(capsys, monkeypatch, daemon, "--probe", "--probe-image", "build")
    assert built.code == 0, built.out + built.err
    assert f"pause image {image}" in built.out
    assert f"ctr --address {daemon.socket} -n k8s.io images rm {image} removes it" in built.out
    assert probe_sandboxes_left(daemon) == []


def test_disabled_cri_plugin_is_a_failed_check_naming_the_cause(capsys, monkeypatch,
                                                                 start_containerd):
    """containerd answers, without CRI: exit 1 (3 is for nothing answering), with the cause the
    model finds in the files it runs on, in the file that holds it."""
    daemon = start_containerd(disabled_plugins=["io.containerd.grpc.v1.cri"])
    result = verify(capsys, monkeypatch, daemon)
    assert result.code == 1
    assert "its CRI plugin did not load" in result.err
    assert f"{daemon.config_path}: the CRI plugin is off here: disabled_plugins" in result.err
    assert "--enable-cri" in result.err
    assert "Traceback" not in result.err


def test_handler_defaults_to_runtime_name(capsys, monkeypatch, lab_containerd):
    result = verify(capsys, monkeypatch, lab_containerd, "--format", "json", "--probe")
    assert json.loads(result.out)["probe"]["handler"] == "nvidia"


CLI = (
    "import sys; from gpuready.cli import main\n"
    "sys.exit(main.run(sys.argv[1:]))\n"
)


def slow_runtime_daemon(start_containerd, probe_archive):
    """A daemon whose nvidia runtime takes 5 s to create a container."""
    from tests.harness.standin import write_standin

    daemon = start_containerd(runtimes=nvidia_runtime(), image=probe_archive)
    write_standin(daemon.folder / "standin", log=daemon.folder / "standin.log", create_delay=5.0)
    return daemon


def wait_for_create(daemon, process) -> None:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        calls = recorded_calls(daemon.folder / "standin.log")
        if any(subcommand(call) == "create" for call in calls):
            return
        time.sleep(0.1)
    raise AssertionError("the runtime was never asked to create the sandbox")


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_interrupted_probe_removes_its_sandbox(start_containerd, probe_archive, signal_name):
    import os
    import signal
    import sys

    daemon = slow_runtime_daemon(start_containerd, probe_archive)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CLI,
            "verify",
            "--live",
            "--address",
            daemon.address,
            "--config",
            str(daemon.config_path),
            "--probe",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # A shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT
        # ignored: give the child the default disposition, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    wait_for_create(daemon, process)
    process.send_signal(getattr(signal, signal_name))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    assert probe_sandboxes_left(daemon) == []
    assert containers_left(daemon) == []


def test_probe_timeout_fails_and_removes_sandbox(
    capsys, monkeypatch, start_containerd, probe_archive
):
    daemon = slow_runtime_daemon(start_containerd, probe_archive)
    result = verify(capsys, monkeypatch, daemon, "--probe", "--probe-timeout", "2")
    assert result.code == 1
    assert "within 2s" in result.out
    assert probe_sandboxes_left(daemon) == []
    assert containers_left(daemon) == []


def test_runtimeclass_handler_added_without_restart_says_so(
    capsys, monkeypatch, lab_containerd, tmp_path
):
    from tests.harness.containerd import lab_config

    runtimes = nvidia_runtime()
    runtimes["nvidia"]["options"]["BinaryName"] = str(lab_containerd.folder / "standin")
    runtimes["nvidia-cdi"] = {"runtime_type": "io.containerd.runc.v2", "options": {}}
    lab_containerd.config_path.write_text(lab_config(lab_containerd.folder, runtimes=runtimes))
    manifest = tmp_path / "rc.yaml"
    manifest.write_text(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia-cdi\n"
        "handler: nvidia-cdi\n"
    )
    result = verify(capsys, monkeypatch, lab_containerd, "--runtimeclass", str(manifest))
    assert result.code == 1
    assert "handler nvidia-cdi is not a loaded runtime" in result.out
    assert f"on disk, not live: {lab_containerd.config_path} registers it" in result.out
    assert "restart containerd" in result.out


def test_containerd_address_is_read_as_ctr_reads_it(capsys, monkeypatch, lab_containerd):
    """``CONTAINERD_ADDRESS`` (a socket path, as ``ctr`` takes it) names containerd when no
    ``--address`` is given; an explicit ``--address`` wins over it."""
    monkeypatch.setenv("CONTAINERD_ADDRESS", lab_containerd.address.removeprefix("unix://"))
    argv = ("verify", "--live", "--config", str(lab_containerd.config_path))
    result = run_cli(capsys, monkeypatch, *argv)
    assert result.code == 0, result.out + result.err
    assert f"pid {lab_containerd.pid}" in result.out
    wrong = f"unix://{lab_containerd.folder}/no-such.sock"
    assert run_cli(capsys, monkeypatch, *argv, "--address", wrong, "--timeout", "1").code == 3
    monkeypatch.setenv("CONTAINERD_ADDRESS", "tcp://127.0.0.1:1")
    result = run_cli(capsys, monkeypatch, *argv)
    assert result.code == 2 and "CONTAINERD_ADDRESS=tcp://127.0.0.1:1" in result.err
