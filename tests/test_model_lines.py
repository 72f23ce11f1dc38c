"""The effective-config model against what real containerd answered, line by line.

containerd 1.7.34, 2.1.9 and 2.3.4 cannot run here: their answers were recorded from the real
daemons (``tests/data/observed``, ``tests/data/cri/observed``) and are replayed below, so the
model is checked against containerd, not against itself. Debian's 1.6 runs here: the last tests
ask its ``config dump`` live, on every fixture and corpus file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import model
from gpuready.containerd.lines import LINES, NodeLine, line_for_release, node_line
from gpuready.errors import UsageError
from tests.helpers import DATA

OBSERVED = DATA / "observed"
CRI_OBSERVED = DATA / "cri" / "observed"
RECORDED = {"1.6": "1.6.20", "1.7": "1.7.34", "2.1": "2.1.9", "2.3": "2.3.4"}


def _line(name: str) -> NodeLine:
    return NodeLine(LINES[name], LINES[name].release, "test")


def _build(text: str, name: str) -> model.Loaded:
    return model.build([(Path("config.toml"), tomllib.loads(text))], _line(name))


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_a_file_naming_only_nvidia_loads_what_each_line_recorded(name):
    """Replayed: runtimes-map-by-line.json, per line (1.x loses runc and its CRI plugin)."""
    recorded = json.loads((OBSERVED / "runtimes-map-by-line.json").read_text())["lines"][name]
    loaded = _build(recorded["config_file"], name)
    assert sorted(loaded.runtimes) == sorted(recorded["config_dump"]["runtimes"])
    assert loaded.default_runtime == recorded["config_dump"]["default_runtime_name"]
    assert loaded.cri_loaded == recorded["started_on_config_file"]["cri_plugin_loaded"]
    if not loaded.cri_loaded:  # the daemon's own words are the model's
        logged = " ".join(recorded["started_on_config_file"]["log_lines_about_cri"])
        assert loaded.cri_error.split(" for ")[0] in logged


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_model_of_the_config_used_matches_the_live_cri_config(name):
    """Replayed: the CRI config each daemon reported (Status verbose) for the config it ran."""
    version = RECORDED[name]
    text = (CRI_OBSERVED / f"containerd-{version}-config-used.toml").read_text()
    live = json.loads((CRI_OBSERVED / f"containerd-{version}-cri-status-info.json").read_text())
    live = live["config"]
    loaded = _build(text, name)
    assert sorted(loaded.runtimes) == sorted(live["containerd"]["runtimes"])
    assert loaded.default_runtime == live["containerd"]["defaultRuntimeName"]
    for runtime, entry in live["containerd"]["runtimes"].items():
        assert loaded.runtimes[runtime]["runtime_type"] == entry["runtimeType"]
    cri = loaded.cri_table
    assert cri.get("enable_cdi", None) == live.get("enableCDI", None)
    assert cri.get("cdi_spec_dirs") == live.get("cdiSpecDirs")
    assert cri.get("enable_selinux") == live["enableSelinux"]
    if "sandboxImage" in live:
        assert cri["sandbox_image"] == live["sandboxImage"]


@pytest.mark.parametrize(("source", "version"), [
    ("containerd-1.6.20-default", "2.1.9"), ("containerd-1.6.20-default", "2.3.4"),
    ("lab-base", "2.1.9"), ("lab-base", "2.3.4"),
])
def test_2x_reads_an_old_file_as_its_own_config_migrate_writes_it(source, version):
    """Replayed: `containerd config migrate` by 2.1.9 and 2.3.4; the model's in-memory migration
    of the old file loads what the recorded migrated file loads."""
    name = version.rsplit(".", 1)[0]
    old = _build((DATA / "containerd" / f"{source}.toml").read_text(), name)
    migrated = _build((OBSERVED / f"migrate-{source}-by-containerd-{version}.toml").read_text(),
                      name)
    assert model.without_zero_values(old.runtimes) == model.without_zero_values(migrated.runtimes)
    assert old.default_runtime == migrated.default_runtime
    assert old.cri_loaded and migrated.cri_loaded
    images = ("plugins", "io.containerd.cri.v1.images")
    assert model.without_zero_values(model._table(old.data, images)) == \
        model.without_zero_values(model._table(migrated.data, images))


def test_1x_leaves_a_version_3_file_unread_and_2x_refuses_a_newer_one():
    text = ('version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
            '  runtime_type = "io.containerd.runc.v2"\n')
    on_16 = _build(text, "1.6")
    assert on_16.unread and "nvidia" not in on_16.runtimes and on_16.cri_loaded
    on_21 = _build(text.replace("version = 3", "version = 4"), "2.1")
    assert on_21.refused and not on_21.cri_loaded


def test_disabled_cri_plugin_loads_no_runtime():
    loaded = _build('version = 2\ndisabled_plugins = ["cri"]\n', "1.7")
    assert not loaded.cri_loaded and loaded.loaded_runtimes == {}
    assert "disabled_plugins" in loaded.cri_error


@pytest.mark.parametrize(("release", "line", "said"), [
    ((1, 6), "1.6", False), ((1, 7), "1.7", False), ((2, 1), "2.1", False), ((2, 3), "2.3", False),
    ((1, 5), "1.6", True), ((2, 0), "2.1", True), ((2, 2), "2.1", True), ((2, 4), "2.3", True),
])
def test_releases_without_a_line_are_read_as_the_nearest_and_said_so(release, line, said):
    found, note = line_for_release(release)
    assert found.name == line
    assert bool(note) == said


def test_a_release_no_line_stands_for_is_refused():
    with pytest.raises(UsageError):
        line_for_release((3, 0))


DPKG = """Package: runc
Status: install ok installed
Version: 1.1.5

Package: containerd
Status: install ok installed
Version: {version}
"""


@pytest.mark.parametrize(("version", "line"), [("1.6.20~ds1-1+deb12u1", "1.6"),
                                               ("1.7.24-1", "1.7"), ("2.2.1-0ubuntu1", "2.1")])
def test_under_a_root_the_package_database_names_the_line(tmp_path, version, line):
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text(DPKG.format(version=version))
    found = node_line(root=tmp_path, flag=None, config_version=3)
    assert found.line.name == line
    assert found.source == "package database /var/lib/dpkg/status"


def test_under_a_root_no_binary_is_run_not_the_hosts_nor_the_roots(tmp_path):
    """A containerd inside the root would print 2.3 if it were run: it must not be."""
    binary = tmp_path / "usr/bin/containerd"
    binary.parent.mkdir(parents=True)
    marker = tmp_path / "ran"
    binary.write_text(f"#!/bin/sh\ntouch {marker}\necho containerd v2.3.4\n")
    binary.chmod(0o755)
    found = node_line(root=tmp_path, flag=None, config_version=2)
    assert found.line.name == "1.7" and found.release is None
    assert found.source.startswith("config version 2")
    assert not marker.exists()


def test_the_flag_wins_over_everything(tmp_path):
    assert node_line(root=tmp_path, flag="2.3.1", config_version=2).line.name == "2.3"


# -- the containerd installed here (Debian's 1.6, or any build the harness is given), live ------

FILES = sorted((DATA / "containerd").glob("*.toml")) + sorted((DATA / "corpus").glob("*.toml"))
REAL = sorted((DATA / "corpus-real").rglob("*.toml"))


def _live_line() -> NodeLine:
    from gpuready.containerd.installed import installed_release

    release = installed_release()
    assert release is not None, "containerd --version did not answer"
    return NodeLine(line_for_release(release)[0], release, "containerd --version")


@pytest.mark.containerd
@pytest.mark.parametrize("path", FILES + REAL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_model_loads_what_the_real_containerd_dumps(path, tmp_path, config_dump):
    """The model of the installed line against that containerd's own `config dump`, on every
    fixture and corpus file (imports left out: each file alone)."""
    import tomlkit

    data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    data.pop("imports", None)
    copy = tmp_path / "config.toml"
    copy.write_text(tomlkit.dumps(data))
    result = config_dump(copy)
    line = _live_line()
    loaded = model.build([(copy, data)], line)
    if result.returncode != 0:  # containerd refuses the file: the model must not load it either
        assert not loaded.cri_loaded or loaded.refused, result.stderr
        return
    dumped = model.build([(copy, tomllib.loads(result.stdout))], line)
    assert sorted(loaded.runtimes) == sorted(dumped.runtimes)
    assert loaded.default_runtime == dumped.default_runtime
    assert loaded.cri_error == dumped.cri_error
    for name, entry in loaded.runtimes.items():
        assert (entry.get("runtime_type") or "") == (dumped.runtimes[name].get("runtime_type")
                                                     or "")


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_an_empty_default_runtime_name_stops_the_cri_plugin(name):
    version = 2 if name < "2" else 3
    plugin = "io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.runtime"
    loaded = _build(f'version = {version}\n[plugins."{plugin}".containerd]\n'
                    '  default_runtime_name = ""\n', name)
    assert not loaded.cri_loaded and "is empty" in loaded.cri_error


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_shipped_defaults_are_the_recorded_ones(name):
    """gpuready ships each line's `config default` for the model; the tests' copy is the same."""
    from gpuready.containerd.lines import recorded_default_text

    recorded = RECORDED[name]
    assert recorded_default_text(recorded) == (
        DATA / "containerd" / f"containerd-{recorded}-default.toml").read_text()
