"""``gpuready migrate`` writes only what the target line reads, the way containerd's own migration
names it.

The facts are containerd 2.1.9's (version 3) and 2.3.4's (version 4) recorded ``config migrate``
of 1.6.20's ``config default`` and of the lab base (tests/data/observed), and the same releases'
recorded full-plugin ``config default`` (tests/data/containerd). Neither release runs here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd.files import Options
from gpuready.containerd.keyschema import key_paths
from gpuready.containerd.migrate import REMOVED_PLUGINS_V3, RENAMED_PLUGINS_V3, migrate_text
from gpuready.containerd.versions import CRI_RUNTIME
from gpuready.errors import InputError
from gpuready.rules.engine import lint_paths
from gpuready.rules.registry import REGISTRY
from tests.helpers import CONTAINERD_DATA, DATA, LAB_BASE, run_cli

OBSERVED = DATA / "observed"
SOURCES = {"lab-base": LAB_BASE,
           "containerd-1.6.20-default": CONTAINERD_DATA / "containerd-1.6.20-default.toml"}
RELEASES = {3: "2.1.9", 4: "2.3.4"}
LINES = {3: "2.1", 4: "2.3"}
# What lint may still say about a configured copy: it depends on the node, not on the file.
NODE_DEPENDENT = {"binary-missing", "cgroup-driver-mismatch"}
CASES = [pytest.param(source, to, id=f"{source}-to-{to}")
         for source in sorted(SOURCES) for to in sorted(RELEASES)]
RUNTIMES = ("plugins", CRI_RUNTIME, "containerd", "runtimes")


def _toml(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def _recorded_paths(to: int, source: str) -> set[tuple[str, ...]]:
    """Every key path of the target release's ``config default`` and of its ``config migrate``
    of ``source``."""
    release = RELEASES[to]
    default = _toml(CONTAINERD_DATA / f"containerd-{release}-default.toml")
    migrated = _toml(OBSERVED / f"migrate-{source}-by-containerd-{release}.toml")
    return set(key_paths(default)) | set(key_paths(migrated))


def _as_runc(path: tuple[str, ...]) -> tuple[str, ...]:
    """A path below a runtime's table, as the same path below runc's (the recorded one)."""
    if path[:len(RUNTIMES)] == RUNTIMES and len(path) > len(RUNTIMES):
        return (*RUNTIMES, "runc", *path[len(RUNTIMES) + 1:])
    return path


def _migrated_copy(tmp_path: Path, source: str, to: int) -> Path:
    config = tmp_path / "config.toml"
    shutil.copyfile(SOURCES[source], config)
    result = run_cli("migrate", "--to", str(to), "--config", str(config),
                     "--containerd-version", LINES[to])
    assert result.code == 0, result.err
    return config


def _lint(path: Path, root: Path):
    return lint_paths([path], options=Options(root=root), selected=frozenset(REGISTRY)).problems


@pytest.mark.parametrize(("source", "to"), CASES)
def test_every_key_path_written_is_one_the_target_line_has(source: str, to: int) -> None:
    text = migrate_text(SOURCES[source].read_text(), SOURCES[source], to=to)
    unknown = set(key_paths(tomllib.loads(text))) - _recorded_paths(to, source)
    assert not unknown, sorted(unknown)


@pytest.mark.parametrize(("source", "to"), CASES)
def test_migrated_and_configured_copy_lints_clean(tmp_path: Path, source: str, to: int) -> None:
    config = _migrated_copy(tmp_path, source, to)
    configured = run_cli("configure", "--config", str(config), "--containerd-version", LINES[to])
    assert configured.code == 0, configured.err
    problems = _lint(config, tmp_path)
    assert {p.rule for p in problems} <= NODE_DEPENDENT, \
        [f"{p.rule}: {p.key_path}: {p.message}" for p in problems]
    written = {_as_runc(path) for path in key_paths(_toml(config))}
    assert not written - _recorded_paths(to, source), sorted(written - _recorded_paths(to, source))


@pytest.mark.parametrize("to", sorted(RELEASES))
def test_plugins_take_the_names_the_target_line_gives_them(to: int) -> None:
    """Recorded: 2.x's migration writes restart and cgroups under their 2.x IDs, and leaves out
    plugin_dir, sched_core and the empty registry maps."""
    source = SOURCES["containerd-1.6.20-default"]
    data = tomllib.loads(migrate_text(source.read_text(), source, to=to))
    plugins = data["plugins"]
    assert plugins["io.containerd.monitor.container.v1.restart"] == {"interval": "10s"}
    assert plugins["io.containerd.monitor.task.v1.cgroups"] == {"no_prometheus": False}
    for gone in ("io.containerd.internal.v1.restart", "io.containerd.monitor.v1.cgroups",
                 "io.containerd.runtime.v1.linux", "io.containerd.snapshotter.v1.aufs"):
        assert gone not in plugins, gone
    assert "sched_core" not in plugins["io.containerd.runtime.v2.task"]
    assert "plugin_dir" not in data and "proxy_plugins" not in data
    assert set(plugins["io.containerd.cri.v1.images"]["registry"]) == {"config_path"}
    assert "CriuPath" not in plugins[CRI_RUNTIME]["containerd"]["runtimes"]["runc"]["options"]


def test_version_4_does_not_carry_empty_server_settings_over() -> None:
    """Recorded: 2.3.4 turned 1.6.20's ``[ttrpc] address = ""`` into the plugin's default
    address, not into an empty one; a table left with nothing goes."""
    source = SOURCES["containerd-1.6.20-default"]
    text = migrate_text(source.read_text(), source, to=4)
    data = tomllib.loads(text)
    assert "io.containerd.server.v1.ttrpc" not in data["plugins"]
    assert "io.containerd.server.v1.grpc-tcp" not in data["plugins"]
    assert data["plugins"]["io.containerd.server.v1.grpc"]["address"] == \
        "/run/containerd/containerd.sock"
    assert text.endswith("\n")
    kept = migrate_text('version = 3\n[ttrpc]\n  address = "/run/x.sock.ttrpc"  # mine\n',
                        source, to=4)
    assert kept == ('version = 4\n[plugins."io.containerd.server.v1.ttrpc"]\n'
                    '  address = "/run/x.sock.ttrpc"  # mine\n')


def test_non_empty_registry_maps_move_with_the_images_plugin() -> None:
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n'
            '  endpoint = ["https://mirror.example"]\n')
    data = tomllib.loads(migrate_text(text, LAB_BASE, to=3))
    registry = data["plugins"]["io.containerd.cri.v1.images"]["registry"]
    assert registry == {"mirrors": {"docker.io": {"endpoint": ["https://mirror.example"]}}}


@pytest.mark.parametrize(
    ("snippet", "named"),
    [
        ('plugin_dir = "/opt/plugins"\n', "plugin_dir"),
        ('[plugins."io.containerd.runtime.v2.task"]\n  sched_core = true\n', "sched_core"),
        ('[plugins."io.containerd.runtime.v1.linux"]\n  shim_debug = true\n', "shim_debug"),
        ('[plugins."io.containerd.snapshotter.v1.aufs"]\n  root_path = "/var/aufs"\n',
         "root_path"),
        ('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
         '  CriuPath = "/usr/sbin/criu"\n', "CriuPath"),
    ],
)
def test_a_setting_the_target_does_not_have_is_refused_unless_default(snippet, named) -> None:
    with pytest.raises(InputError, match=f"{named} = .* has no version 3 setting"):
        migrate_text("version = 2\n" + snippet, LAB_BASE, to=3)


def test_a_removed_plugin_holding_1x_defaults_is_dropped_with_its_comments_kept() -> None:
    text = ('version = 2\n# shim v1 defaults\n[plugins."io.containerd.runtime.v1.linux"]\n'
            '  # as 1.6 writes them\n  runtime = "runc"\n  shim = "containerd-shim"\n')
    assert migrate_text(text, LAB_BASE, to=3) == (
        "version = 3\n# shim v1 defaults\n  # as 1.6 writes them\n")


@pytest.mark.parametrize("release", ["1.6.20", "1.7.34"])
def test_the_removed_plugins_defaults_are_what_1x_writes(release: str) -> None:
    plugins = _toml(CONTAINERD_DATA / f"containerd-{release}-default.toml")["plugins"]
    for plugin, (defaults, _) in REMOVED_PLUGINS_V3.items():
        assert plugins[plugin] == defaults, plugin


@pytest.mark.parametrize("release", sorted(RELEASES.values()))
def test_renamed_and_removed_plugins_as_2x_lists_them(release: str) -> None:
    plugins = _toml(CONTAINERD_DATA / f"containerd-{release}-default.toml")["plugins"]
    for old, new in RENAMED_PLUGINS_V3.items():
        assert new in plugins and old not in plugins, old
    assert not set(REMOVED_PLUGINS_V3) & set(plugins)
