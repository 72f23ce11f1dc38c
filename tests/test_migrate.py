"""``gpuready migrate --to 3|4`` against what containerd's own migration produced.

containerd 2.1.9 and 2.3.4 cannot run here: their ``containerd config migrate`` output for the
lab base and for 1.6's default config was recorded (tests/data/observed) and stands in for them.
That output is a whole config with every default spelled out, so the comparison is the migrated
file laid over the same release's ``config default`` (tests/data/containerd, merged key by key as
2.x merges) against the recorded output, for the runtime, CRI and image settings. containerd's
migration copies a runtime's ``options`` as they are, ``CriuPath`` included, which 2.x's runc
shim no longer has (the option rules say so); gpuready drops it while it is empty, so it is left
out of the recorded side.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.migrate import migrate_text
from gpuready.containerd.versions import CRI_GRPC, CRI_IMAGES, CRI_RUNTIME, spec_for
from tests.helpers import CONTAINERD_DATA, DATA, LAB_BASE, require_binary, run_cli, stage_fixture

OBSERVED = DATA / "observed"
SOURCES = {"lab-base": LAB_BASE,
           "containerd-1.6.20-default": CONTAINERD_DATA / "containerd-1.6.20-default.toml"}
RELEASES = {3: "2.1.9", 4: "2.3.4"}
COMPARED = {3: (CRI_RUNTIME, CRI_IMAGES, CRI_GRPC),
            4: (CRI_RUNTIME, CRI_IMAGES, CRI_GRPC, "io.containerd.server.v1.grpc")}


def _over(base: dict, top: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _over(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _without_criu_path(table: dict | None) -> dict | None:
    """``table`` (a CRI runtime plugin table) without ``CriuPath`` in its runtimes' options."""
    table = copy.deepcopy(table)
    for runtime in ((table or {}).get("containerd", {}).get("runtimes", {})).values():
        runtime.get("options", {}).pop("CriuPath", None)
    return table


def _settings(table: dict | None) -> dict:
    """A table without empty sub-tables (``config dump`` leaves empty maps out)."""
    pruned = {key: _settings(value) if isinstance(value, dict) else value
              for key, value in (table or {}).items()}
    return {key: value for key, value in pruned.items() if value != {}}


@pytest.mark.parametrize("to", sorted(RELEASES))
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_migration_equals_containerds_own_for_runtime_cri_and_image_settings(
    source: str, to: int
) -> None:
    release = RELEASES[to]
    migrated = tomllib.loads(migrate_text(SOURCES[source].read_text(), SOURCES[source], to=to))
    assert migrated["version"] == to
    default = tomllib.loads((CONTAINERD_DATA / f"containerd-{release}-default.toml").read_text())
    recorded = tomllib.loads(
        (OBSERVED / f"migrate-{source}-by-containerd-{release}.toml").read_text())
    loaded = _over(default, migrated)
    for plugin in COMPARED[to]:
        assert _settings(loaded["plugins"].get(plugin)) == \
            _settings(_without_criu_path(recorded["plugins"].get(plugin))), plugin
    assert CRI_GRPC not in migrated["plugins"] or "containerd" not in \
        migrated["plugins"][CRI_GRPC], "the runtimes left the streaming server's table"


def test_comments_order_and_quoting_stay(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    shutil.copyfile(LAB_BASE, config)
    result = run_cli("migrate", "--to", "3", "--config", str(config),
                     "--containerd-version", "2.1")  # the host's containerd plays no part
    assert result.code == 0, result.err
    text = config.read_text()
    comments = [line.strip() for line in LAB_BASE.read_text().splitlines()
                if line.strip().startswith("#")]
    assert comments and all(comment in text for comment in comments)
    assert '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]' in text
    assert '          runtime_type = "io.containerd.runc.v2"' in text  # indentation kept
    assert Path(str(config) + ".gpuready.bak").read_text() == LAB_BASE.read_text()
    again = run_cli("migrate", "--to", "3", "--config", str(config),
                    "--containerd-version", "2.1")
    assert again.code == 0 and "already version 3 (no change)" in again.out


def test_imports_are_migrated_too(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    shutil.copyfile(LAB_BASE, config)
    drop_in = tmp_path / "conf.d" / "99-nvidia.toml"
    configured = run_cli("configure", "--config", str(config), "--drop-in", str(drop_in),
                         "--containerd-version", "2.1")
    assert configured.code == 0, configured.err
    result = run_cli("migrate", "--to", "4", "--config", str(config),
                     "--containerd-version", "2.3")  # a node whose containerd reads version 4
    assert result.code == 0, result.err
    for path in (config, drop_in):
        assert tomllib.loads(path.read_text())["version"] == 4
    shown = run_cli("show-config", "--config", str(config), "--containerd-version", "2.3",
                    "--format", "json")
    effective = json.loads(shown.out)["effective"]
    runtimes = facts.runtimes(effective, spec_for(4))
    assert set(runtimes) == {"runc", "nvidia"}
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_migrate_after_setup_keeps_the_runtime_at_the_version_3_table(tmp_path: Path) -> None:
    root = tmp_path / "node"
    stage_fixture(root)
    assert run_cli("setup", "--root", str(root)).code == 0
    assert run_cli("migrate", "--to", "3", "--root", str(root)).code == 0
    data = tomllib.loads((root / "etc/containerd/config.toml").read_text())
    nvidia = facts.runtime(data, spec_for(3), "nvidia")
    assert nvidia["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime",
                                 "SystemdCgroup": True}
    assert facts.runtimes(data, spec_for(2)) == {}
    assert facts.default_runtime_name(data, spec_for(3)) == "runc"


def test_a_version_1_file_goes_through_version_2(tmp_path: Path) -> None:
    source = DATA / "register" / "v1-no-version" / "input.toml"
    data = tomllib.loads(migrate_text(source.read_text(), source, to=3))
    before = tomllib.loads(source.read_text())
    assert facts.runtimes(data, spec_for(3)) == facts.runtimes(before, spec_for(1))
    assert "cri" not in data["plugins"]


def test_what_cannot_be_mapped_is_refused_by_name(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    text = LAB_BASE.read_text().replace(
        'sandbox_image = "registry.k8s.io/pause:3.9"',
        'sandbox_image = "registry.k8s.io/pause:3.9"\n    systemd_cgroup = true')
    config.write_text(text)
    result = run_cli("migrate", "--to", "3", "--config", str(config))
    assert result.code == 2
    assert result.err == (
        f"gpuready: error: {config}: cannot migrate to version 3: "
        "plugins.io.containerd.grpc.v1.cri.systemd_cgroup = True has no version 3 setting "
        "(set SystemdCgroup in each runtime's options instead); nothing written\n")
    assert config.read_text() == text


@pytest.mark.containerd
def test_restart_refuses_a_version_the_installed_containerd_does_not_read(
    tmp_path: Path,
) -> None:
    binary = require_binary("containerd")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if not version.split()[2].startswith("1."):
        pytest.skip("the installed containerd reads version 3")
    config = tmp_path / "config.toml"
    shutil.copyfile(LAB_BASE, config)
    result = run_cli("migrate", "--to", "3", "--config", str(config), "--restart",
                     "--restart-command", "false", "--address", f"unix://{tmp_path}/none.sock")
    assert result.code == 2, result.out + result.err  # refused before writing
    # the never-break gate, in the pre-flight: the installed 1.x reads versions 1 and 2 only
    assert "[FAILED] pre-flight:" in result.out
    assert "reads config versions 1 and 2" in result.out
    assert "refused before writing: no file was changed" in result.out
    assert config.read_bytes() == LAB_BASE.read_bytes()


FIXTURES = sorted(CONTAINERD_DATA.glob("*.toml")) + sorted((DATA / "register").glob("*/input.toml"))


CASES = [
    pytest.param(path, to, id=f"{path.parent.name}-{path.stem}-to-{to}")
    for path in FIXTURES for to in sorted(RELEASES)
    if tomllib.loads(path.read_text()).get("version", 1) <= to
]


def _as_version_3(entry: dict) -> dict:
    """A version 2 runtime table as 2.x reads it: shim v1 keys and an empty CriuPath gone,
    ``sandbox_mode`` renamed ``sandboxer``."""
    entry = {("sandboxer" if key == "sandbox_mode" else key): copy.deepcopy(value)
             for key, value in entry.items() if key not in ("runtime_engine", "runtime_root")}
    if entry.get("options", {}).get("CriuPath") == "":
        del entry["options"]["CriuPath"]
    return entry


@pytest.mark.parametrize(("fixture", "to"), CASES)
def test_every_fixture_keeps_its_runtimes_and_default(fixture: Path, to: int) -> None:
    before = tomllib.loads(fixture.read_text())
    spec = spec_for(before.get("version", 1))
    text = migrate_text(fixture.read_text(), fixture, to=to)
    after = tomllib.loads(text)
    assert after["version"] == to
    expected = facts.runtimes(before, spec)
    if spec.number < 3:
        expected = {name: _as_version_3(dict(entry)) for name, entry in expected.items()}
    assert facts.runtimes(after, spec_for(to)) == expected
    assert facts.default_runtime_name(after, spec_for(to)) == \
        facts.default_runtime_name(before, spec)
    assert migrate_text(text, fixture, to=to) == text  # a second migration changes nothing
