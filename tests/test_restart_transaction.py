"""``--restart``: the whole change as one transaction with a real containerd the test started.

containerd is restarted through ``--restart-command`` (these machines do not run systemd as PID
1); the runtime's binary is the stand-in that records its calls and hands over to runc.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.cri.client import CriClient
from gpuready.cri.live import parse_live_config
from tests.harness.containerd import lab_config, short_tempdir
from tests.harness.restartable import RestartableContainerd
from tests.harness.standin import write_standin
from tests.helpers import BUSYBOX, require_binary, run_cli

pytestmark = pytest.mark.containerd

CRI = "io.containerd.grpc.v1.cri"


def live_runtimes(daemon: RestartableContainerd) -> set[str]:
    with CriClient(daemon.address, timeout=10) as client:
        return set(parse_live_config(client.status(verbose=True).config()).runtimes)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix in (".toml", ".json", ".bak")}


def transaction(daemon: RestartableContainerd, command: str, *extra: str):
    return run_cli(command, "--config", str(daemon.config_path), "--restart",
                   "--restart-command", daemon.restart_command, "--address", daemon.address,
                   "--restart-timeout", "30", *extra)


def test_configure_restarts_verifies_and_probes(daemon: RestartableContainerd) -> None:
    first = daemon.pid
    result = transaction(daemon, "configure", "--binary", str(daemon.folder / "standin"),
                         "--probe")
    assert result.code == 0, result.out + result.err
    assert daemon.pid != first, "containerd was not restarted"
    assert live_runtimes(daemon) == {"runc", "nvidia"}
    for step in ("[ok] pre-flight", "[ok] write", "[ok] restart", "[ok] cri",
                 "[ok] verify --live", "[ok] probe"):
        assert step in result.out, result.out
    assert "create" in (daemon.folder / "standin.log").read_text()  # the probe ran through it

    again = transaction(daemon, "configure", "--binary", str(daemon.folder / "standin"))
    assert again.code == 0, again.out + again.err
    assert "nothing to change; containerd not restarted" in again.out
    second = daemon.pid
    assert second != first and daemon.pid == second


def test_probe_image_build_lets_the_probe_run_on_a_node_without_the_pause_image(
    probe_archive: Path,
) -> None:
    """On a node that cannot pull its pause image (air-gapped), ``--probe`` alone fails and
    rolls the good change back; ``--probe-image build`` imports a stand-in, as ``verify`` does."""
    require_binary("containerd")
    folder = short_tempdir()
    write_standin(folder / "standin", log=folder / "standin.log")
    started = RestartableContainerd(lab_config(folder), folder)
    try:
        started.start()
        result = transaction(started, "configure", "--binary", str(folder / "standin"), "--probe",
                             "--probe-image", "build", "--probe-binary", str(BUSYBOX))
        assert result.code == 0, result.out + result.err
        assert "[ok] probe" in result.out, result.out
        assert live_runtimes(started) == {"runc", "nvidia"}
        assert "create" in (folder / "standin.log").read_text()  # the probe ran through it
    finally:
        started.remove()


def test_a_failing_restart_is_rolled_back_by_itself(daemon: RestartableContainerd) -> None:
    before = files(daemon.folder)
    first = daemon.pid
    boots = daemon.boots()
    result = transaction(daemon, "configure", "--binary", "/nonexistent/nvidia-container-runtime",
                         "--probe")
    assert result.code == 1, result.out + result.err
    assert "[FAILED] probe" in result.out
    assert "[ok] roll back" in result.out
    assert "the node is back where it was" in result.out
    assert files(daemon.folder) == before  # the original bytes, no record, no backup
    assert daemon.boots() == boots + 2, "restarted on the change, then on the original"
    assert daemon.pid not in (None, first)
    assert live_runtimes(daemon) == {"runc"}


def test_a_candidate_containerd_does_not_load_is_never_written(
    daemon: RestartableContainerd,
) -> None:
    """containerd 1.x lets a later import replace the whole CRI table: the drop-in's runtime
    would vanish, and the node's own ``config dump`` of the candidate files shows it."""
    binary = require_binary("containerd")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if int(version.split()[2].split(".")[0]) != 1:
        pytest.skip("containerd 2.x merges imports key by key: nothing is replaced")
    conf_d = daemon.folder / "conf.d"
    conf_d.mkdir()
    later = conf_d / "zz-other.toml"
    later.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n'
                     '  enable_unprivileged_ports = true\n')
    text = daemon.config_path.read_text()
    daemon.config_path.write_text(f'imports = ["{conf_d}/*.toml"]\n' + text)
    before = files(daemon.folder)
    first = daemon.pid
    result = transaction(daemon, "configure", "--drop-in", str(conf_d / "99-nvidia.toml"),
                         "--binary", str(daemon.folder / "standin"))
    assert result.code == 2, result.out + result.err  # a refusal with nothing written
    # the never-break gate finds it first (as the node's own config dump would: 1.6 here)
    assert "[FAILED] pre-flight:" in result.out
    assert "runtime 'nvidia' would not be loaded; nothing written" in result.out
    assert "refused before writing: no file was changed" in result.out
    assert files(daemon.folder) == before
    assert daemon.pid == first, "containerd was restarted for a refused change"


def test_unconfigure_restarts_and_the_runtime_is_gone(daemon: RestartableContainerd) -> None:
    before = files(daemon.folder)
    configured = transaction(daemon, "configure", "--binary", str(daemon.folder / "standin"))
    assert configured.code == 0, configured.out + configured.err
    assert "nvidia" in live_runtimes(daemon)
    result = transaction(daemon, "unconfigure")
    assert result.code == 0, result.out + result.err
    assert "[ok] verify --live" in result.out
    assert live_runtimes(daemon) == {"runc"}
    assert files(daemon.folder) == before


def test_a_drop_in_with_restart_keeps_runc_and_the_sandbox_image_live(
    daemon: RestartableContainerd,
) -> None:
    drop_in = daemon.folder / "conf.d" / "99-nvidia.toml"
    result = transaction(daemon, "configure", "--drop-in", str(drop_in),
                         "--binary", str(daemon.folder / "standin"), "--probe")
    assert result.code == 0, result.out + result.err
    assert live_runtimes(daemon) == {"runc", "nvidia"}
    with CriClient(daemon.address, timeout=10) as client:
        live = client.status(verbose=True).config()
    assert live["sandboxImage"] == "registry.k8s.io/pause:3.9"
    main = tomllib.loads(daemon.config_path.read_text())
    assert main["imports"] == [str(drop_in)]


def test_pre_flight_refuses_candidates_that_lose_a_runtime(tmp_path: Path) -> None:
    """The node's own config dump decides: a change that drops runc is refused unwritten."""
    require_binary("containerd")
    from gpuready.plan import Plan
    from gpuready.workflow.daytwo import NodeConfig
    from gpuready.workflow.transaction import Outcome, RestartOptions, preflight

    config = tmp_path / "config.toml"
    text = lab_config(tmp_path)
    config.write_text(text)
    candidate = text.replace("runtimes.runc", "runtimes.nvidia")
    plans = [Plan(config, text, candidate, "replace runc")]
    outcome = Outcome(plans)
    preflight(NodeConfig(config, Path("/"), major=1), plans,
              options=RestartOptions(address="unused", expect_runtime="nvidia"), outcome=outcome)
    assert not outcome.ok
    assert outcome.steps[-1].detail == ("containerd's config dump of the new files loses "
                                        "runtime(s) runc")
    assert config.read_text() == text
