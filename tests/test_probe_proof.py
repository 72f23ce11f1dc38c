"""``verify --live --probe`` proves the runtime containerd decoded, on every containerd line.

containerd 1.6 is the real daemon (tests/harness/containerd.py, with a stand-in runtime that
records its calls). containerd 2.1 and 2.3 cannot run here: their tests talk to
tests/harness/replay.py, a CRI server that replays the answers recorded from 2.1.9 and 2.3.4 (and
1.6.20, as a cross-check of the replay itself) for the config those daemons ran with.
"""

from __future__ import annotations

import json
import shutil

import pytest

from gpuready.compat import tomllib
from tests.cli_runner import run_cli
from tests.harness.replay import RELEASES, config_used
from tests.helpers import CONTAINERD_DATA

# What the probe must conclude through each recorded runtime: pascal/camel/upper reach their
# stand-in as written; snake_case is dropped (plain runc runs); with two spellings the exact
# field name is what the config means, which 1.6 uses and 2.x does not.
EXPECTED_EXIT = {
    ("1.6.20", "both"): 0,
    ("1.6.20", "bothrev"): 0,
    **{(release, name): 0 for release in RELEASES for name in ("pascal", "camel", "upper")},
    **{(release, "snake"): 1 for release in RELEASES},
    **{(release, name): 1 for release in ("2.1.9", "2.3.4") for name in ("both", "bothrev")},
}


def verify(capsys, monkeypatch, address: str, config, *extra: str):
    """``gpuready verify --live`` against ``address``, compared with ``config``."""
    return run_cli(
        capsys, monkeypatch, "verify", "--live", "--address", address, "--config", str(config),
        *extra,
    )


@pytest.mark.parametrize(("release", "runtime"), sorted(EXPECTED_EXIT))
def test_probe_against_recorded_answers(capsys, monkeypatch, replay_containerd, release, runtime):
    server = replay_containerd(release)
    result = verify(
        capsys, monkeypatch, server.address, config_used(release),
        "--runtime-name", runtime, "--probe", "--format", "json",
    )
    report = json.loads(result.out)
    assert result.code == EXPECTED_EXIT[(release, runtime)], result.out
    probe = report["probe"]
    assert probe["proof"] == ("proven" if result.code == 0 else "differs")
    if runtime == "snake":
        assert probe["decoded"]["binary_name"] is None
        assert probe["intended"]["binary_name"] == "/usr/local/bin/standin-snake"
        assert any("BinaryName" in d and "plain runc" in d for d in probe["differences"])


@pytest.mark.parametrize("release", ["2.1.9", "2.3.4"])
def test_verify_live_names_the_binary_2x_uses(capsys, monkeypatch, replay_containerd, release):
    server = replay_containerd(release)
    result = verify(capsys, monkeypatch, server.address, config_used(release), "--runtime-name",
                    "both")
    rows = {line.split()[0]: line for line in result.out.splitlines()[2:] if line.startswith("  ")}
    assert "standin-both-camel (as binaryName)" in rows["both"]
    assert "standin-both-Pascal" not in rows["both"]
    assert "standin-camel (as binaryName)" in rows["camel"]
    assert "standin-upper (as BINARYNAME)" in rows["upper"]
    assert "standin-snake" not in rows["snake"]


def test_verify_live_names_the_binary_1_6_uses_from_the_recording(
    capsys, monkeypatch, replay_containerd
):
    server = replay_containerd("1.6.20")
    result = verify(capsys, monkeypatch, server.address, config_used("1.6.20"))
    rows = {line.split()[0]: line for line in result.out.splitlines()[2:] if line.startswith("  ")}
    assert "standin-both-Pascal" in rows["both"] and "camel" not in rows["both"]
    assert "standin-camel (as binaryName)" in rows["camel"]
    assert "standin-snake" not in rows["snake"]


def test_probe_without_decoded_fields_is_unproven(capsys, monkeypatch, replay_containerd):
    """A containerd that reports no runtimeOptions: the probe says so instead of passing."""
    server = replay_containerd("2.3.4")
    for record in server.sandbox_records.values():
        record["info"]["info"].pop("runtimeOptions")
    result = verify(capsys, monkeypatch, server.address, config_used("2.3.4"), "--runtime-name",
                    "pascal", "--probe")
    probe_line = next(line for line in result.out.splitlines() if line.startswith("probe"))
    assert probe_line.startswith("probe   unproven:"), result.out
    assert "did not report the decoded runtime options" in probe_line


def test_probe_image_build_on_a_2_3_default_config(capsys, monkeypatch, replay_containerd,
                                                     tmp_path):
    """A 2.3 node whose config came from its own `config default` (version 4): the pause image
    is the file's pinned_images.sandbox, which 2.x does not report over the CRI."""
    config = tmp_path / "config.toml"
    shutil.copy(CONTAINERD_DATA / "containerd-2.3.4-default.toml", config)
    (tmp_path / "usr/local/bin").mkdir(parents=True)
    configured = run_cli(capsys, monkeypatch, "configure", "--config", str(config), "--binary",
                         "/usr/local/bin/standin-pascal", "--root", str(tmp_path))
    assert configured.code == 0, configured.out + configured.err
    pinned = tomllib.loads(config.read_text())["plugins"]["io.containerd.cri.v1.images"]
    image = pinned["pinned_images"]["sandbox"]
    assert image == "registry.k8s.io/pause:3.10.2"
    server = replay_containerd("2.3.4", rename={"nvidia": "pascal"}, images={image})
    result = verify(capsys, monkeypatch, server.address, config, "--probe", "--probe-image",
                    "build")
    assert result.code == 0, result.out + result.err
    assert server.images_asked == [image]
    assert "through /usr/local/bin/standin-pascal as configured" in result.out


def test_pause_image_falls_back_to_the_release_default(capsys, monkeypatch, replay_containerd,
                                                        tmp_path):
    config = tmp_path / "config.toml"
    text = config_used("2.3.4").read_text()
    config.write_text(text.replace('  sandbox = "registry.k8s.io/pause:3.10"\n', ""))
    server = replay_containerd("2.3.4", images={"registry.k8s.io/pause:3.10.2"})
    result = verify(capsys, monkeypatch, server.address, config, "--runtime-name", "pascal",
                    "--probe", "--format", "json")
    assert json.loads(result.out)["pause_image"]["name"] == "registry.k8s.io/pause:3.10.2"
    assert server.images_asked == ["registry.k8s.io/pause:3.10.2"]


# --- the real containerd ----------------------------------------------------------------------


def test_snake_case_binary_fails_the_probe_live(capsys, monkeypatch, start_containerd,
                                                probe_archive):
    # Without SystemdCgroup: plain runc (what runs when binary_name is dropped) cannot use the
    # systemd driver on a test machine without systemd; on a node it comes up all the same.
    daemon = start_containerd(
        runtimes={"nvidia": {"options": {"binary_name": "STANDIN"}}},
        image=probe_archive,
    )
    result = verify(capsys, monkeypatch, daemon.address, daemon.config_path, "--probe")
    assert result.code == 1, result.out
    probe_line = next(line for line in result.out.splitlines() if line.startswith("probe"))
    assert f"BinaryName: config {daemon.folder / 'standin'}, containerd decoded (not set" in (
        probe_line
    )
    assert not (daemon.folder / "standin.log").exists()  # plain runc ran, never the stand-in


def test_camel_case_binary_lints_clean_and_shows_live(capsys, monkeypatch, start_containerd,
                                                      probe_archive):
    daemon = start_containerd(
        runtimes={"runc": {"options": {"SystemdCgroup": True}},
                  "nvidia": {"options": {"binaryName": "STANDIN", "systemdCgroup": True}}},
        image=probe_archive,
    )
    lint = run_cli(capsys, monkeypatch, "lint", "--format", "json", str(daemon.config_path))
    problems = json.loads(lint.out)["problems"]
    assert [p for p in problems if p["severity"] == "error"] == [], problems
    assert {p["rule"] for p in problems} >= {"option-spelling"}
    result = verify(capsys, monkeypatch, daemon.address, daemon.config_path, "--probe")
    assert result.code == 0, result.out
    row = next(line for line in result.out.splitlines() if line.strip().startswith("nvidia"))
    assert f"{daemon.folder / 'standin'} (as binaryName)" in row
    assert "as configured" in result.out


def test_probe_image_build_on_the_running_releases_own_default(
    capsys, monkeypatch, start_containerd, containerd_build, tmp_path
):
    """`containerd config default` of the build under test (1.6: version 2 and sandbox_image;
    2.3: version 4 and pinned_images.sandbox), the GPU runtime registered by gpuready, no pause
    image on the node: --probe-image build names, builds and imports it, and the probe proves
    the stand-in ran."""
    import subprocess

    from tests.helpers import STANDIN_PATH

    binary = containerd_build.binary("containerd") or "containerd"
    default = subprocess.run([binary, "config", "default"], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    config = tmp_path / "config.toml"
    config.write_text(default)
    configured = run_cli(capsys, monkeypatch, "configure", "--config", str(config), "--binary",
                         STANDIN_PATH)
    assert configured.code == 0, configured.out + configured.err
    daemon = start_containerd(config_text=config.read_text())
    result = verify(capsys, monkeypatch, daemon.address, daemon.config_path, "--probe",
                    "--probe-image", "build", "--format", "json")
    report = json.loads(result.out)
    assert result.code == 0, result.out + result.err
    assert report["pause_image"]["built"] is True
    assert report["probe"]["proof"] == "proven"
    assert report["probe"]["decoded"]["binary_name"] == str(daemon.folder / "standin")


@pytest.mark.parametrize("release", ["2.1.9", "2.3.4"])
def test_2x_live_keys_and_enable_cdi_default(capsys, monkeypatch, replay_containerd, release,
                                            tmp_path):
    """2.x's live config spells runtimeType/defaultRuntimeName/enableCDI as recorded, and has
    CDI on by default: a file without enable_cdi agrees, one with enable_cdi = false does not."""
    server = replay_containerd(release)
    result = verify(capsys, monkeypatch, server.address, config_used(release), "--runtime-name",
                    "pascal", "--format", "json")
    checks = {c["check"]: c for c in json.loads(result.out)["checks"]}
    assert result.code == 0, result.out
    assert checks["runtime-type"]["live"] == "io.containerd.runc.v2"
    assert checks["default-runtime"]["live"] == "runc"
    assert (checks["enable-cdi"]["on_disk"], checks["enable-cdi"]["live"]) == (True, True)
    off = tmp_path / "config.toml"
    off.write_text(config_used(release).read_text().replace(
        '[plugins."io.containerd.cri.v1.runtime"]\n',
        '[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = false\n', 1))
    result = verify(capsys, monkeypatch, server.address, off, "--runtime-name", "pascal",
                    "--format", "json")
    checks = {c["check"]: c for c in json.loads(result.out)["checks"]}
    assert result.code == 1
    assert checks["enable-cdi"]["outcome"] == "failed"
