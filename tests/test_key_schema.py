"""The key schema: generated from recorded defaults, and the lint rules that use it.

The generated part is rebuilt from each line's recorded ``containerd config default``
(tests/data/containerd) and 2.3.4's recorded ``config dump`` (tests/data/cri/observed); the
version 4 cases replay what 2.3.4 made of top-level server tables.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.containerd import keyschema
from gpuready.containerd.files import Options
from gpuready.rules.engine import lint_paths
from gpuready.rules.registry import REGISTRY
from tests.helpers import CONTAINERD_DATA, DATA, REPO

OBSERVED = DATA / "cri" / "observed"
# (config version, the recorded full-plugin `config default` of a line reading it as written)
DEFAULTS = ((2, "containerd-1.6.20-default.toml"), (2, "containerd-1.7.34-default.toml"),
            (3, "containerd-2.1.9-default.toml"), (4, "containerd-2.3.4-default.toml"))
SNAPSHOTTERS = ("btrfs", "devmapper", "zfs")


def lint_text(tmp_path: Path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text)
    report = lint_paths([path], options=Options(root=tmp_path), selected=frozenset(REGISTRY))
    return report.problems


def test_generated_part_is_current():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_key_schema.py"), "--check"],
        env={"PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr


def test_every_hand_kept_entry_names_its_source():
    data = keyschema.raw()
    for kind in ("documented", "moved", "removed"):
        assert data[kind], kind
        for entry in data[kind]:
            assert entry["source"].strip() and entry["lines"], entry


@pytest.mark.parametrize(("version", "name"), DEFAULTS, ids=[name for _, name in DEFAULTS])
def test_each_lines_own_default_has_no_unknown_key(version, name):
    from gpuready.compat import tomllib

    data = tomllib.loads((CONTAINERD_DATA / name).read_text())
    assert keyschema.unknown_keys(data, version) == []


def test_lines_and_the_versions_they_read_as_written():
    assert keyschema.lines_for(1) == ()
    assert keyschema.lines_for(2) == ("1.6", "1.7")
    assert keyschema.lines_for(3) == ("2.1",)
    assert keyschema.lines_for(4) == ("2.3",)
    assert keyschema.schema_for(1) is None


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("snapshotter", SNAPSHOTTERS)
def test_full_plugin_snapshotters_are_known(version, snapshotter):
    """Every recorded default lists them (official builds have them)."""
    data = {"plugins": {f"io.containerd.snapshotter.v1.{snapshotter}": {"root_path": ""}}}
    assert keyschema.unknown_keys(data, version) == []


def test_keys_only_1_7_reads_are_known_in_version_2():
    data = {"plugins": {"io.containerd.nri.v1.nri": {"disable": True},
                        "io.containerd.grpc.v1.cri": {"enable_cdi": True}}}
    assert keyschema.unknown_keys(data, 2) == []


@pytest.mark.parametrize("version", [3, 4])
def test_plugin_dir_is_read_by_1x_only(version):
    """2.1.9's and 2.3.4's recorded `config migrate` drop it."""
    assert keyschema.unknown_keys({"plugin_dir": ""}, 2) == []
    assert [found.path for found in keyschema.unknown_keys({"plugin_dir": ""}, version)] == \
        [("plugin_dir",)]


@pytest.mark.parametrize(
    ("snippet", "rule", "suggestion"),
    [
        ('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
         '  runtime_typ = "io.containerd.runc.v2"\n', "unknown-key", "runtime_type"),
        ('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
         "  SystemCgroup = true\n", "unknown-option", "SystemdCgroup"),
        ('[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdl = true\n', "unknown-key",
         "enable_cdi"),
        ("[plugin]\n  x = 1\n", "unknown-key", "plugins"),
    ],
)
def test_typos_get_a_did_you_mean(tmp_path, snippet, rule, suggestion):
    problems = lint_text(tmp_path, "version = 2\n" + snippet)
    found = [p for p in problems if p.rule == rule]
    assert len(found) == 1, [f"{p.rule}: {p.message}" for p in problems]
    assert f"did you mean {suggestion}?" in found[0].fix


def test_version_4_top_level_server_tables_are_reported(tmp_path):
    """2.3.4 echoed these tables in `config dump` but kept the server plugins' defaults."""
    text = (OBSERVED / "v4-top-level-server-tables.toml").read_text()
    problems = lint_text(tmp_path, text)
    moved = {p.key_path for p in problems if p.rule == "moved-key"}
    assert moved == {"grpc", "ttrpc", "metrics", "debug.address"}
    assert all(p.severity.value == "error" for p in problems if p.rule == "moved-key")
    grpc = next(p for p in problems if p.key_path == "grpc")
    assert "plugins.'io.containerd.server.v1.grpc'" in grpc.message


def test_the_dump_kept_the_server_plugin_defaults():
    """The fact behind moved-key, as recorded: top-level values did not reach the plugins."""
    from gpuready.compat import tomllib

    dump = tomllib.loads(
        (OBSERVED / "v4-top-level-server-tables.dump-by-containerd-2.3.4.toml").read_text()
    )
    server = dump["plugins"]["io.containerd.server.v1.grpc"]
    assert server["address"] == "/run/containerd/containerd.sock"
    assert dump["grpc"]["address"] == "/run/example/containerd.sock"
    assert dump["plugins"]["io.containerd.server.v1.metrics"]["address"] == ""


def test_the_same_tables_in_a_version_3_file_are_fine(tmp_path):
    text = (OBSERVED / "v4-top-level-server-tables.toml").read_text()
    problems = lint_text(tmp_path, text.replace("version = 4", "version = 3"))
    assert [p for p in problems if p.rule in ("moved-key", "unknown-key")] == []


def test_registry_mirrors_removed_in_2x_but_read_by_1_6(tmp_path):
    v3 = ("version = 3\n[plugins.'io.containerd.cri.v1.images'.registry.mirrors.'docker.io']\n"
          "  endpoint = ['https://mirror.example']\n")
    problems = [p for p in lint_text(tmp_path, v3) if p.rule == "unknown-key"]
    assert len(problems) == 1 and "removed in containerd 2.0" in problems[0].message
    v2 = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n'
          '  endpoint = ["https://mirror.example"]\n')
    assert [p for p in lint_text(tmp_path, v2) if p.rule == "unknown-key"] == []


def test_lint_cli_exit_code_for_a_version_4_grpc_table(tmp_path, capsys, monkeypatch):
    from tests.cli_runner import run_cli

    path = tmp_path / "config.toml"
    path.write_text("version = 4\n[grpc]\n  address = '/run/x.sock'\n")
    result = run_cli(capsys, monkeypatch, "lint", "--format", "json", "--select", "moved-key",
                     str(path))
    assert result.code == 1
    assert [p["rule"] for p in json.loads(result.out)["problems"]] == ["moved-key"]


def test_the_recorded_defaults_read_as_json_say_what_their_toml_says():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_default_data.py"), "--check"],
        env={"PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
