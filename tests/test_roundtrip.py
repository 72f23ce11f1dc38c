"""Round trips on every config fixture, for each containerd line that reads it, in place and with
a drop-in: configure then unconfigure gives back every byte; configure twice changes nothing;
both modes give containerd the same effective config; an operator's edit in between survives.

The effective config of the 1.6 line is containerd's own ``config dump`` (the real daemon reads
the files); 2.1 and 2.3 cannot run here, so their merge is gpuready's model of the behaviour
measured on the real 2.1.9 and 2.3.4 (an import merges key by key; tests/data/observed).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuready.changeset import locked_all
from gpuready.compat import tomllib
from gpuready.containerd.configure import ConfigureRequest
from gpuready.containerd.dropin import drop_in_target
from gpuready.containerd.effective import load_effective
from gpuready.containerd.register import RuntimeRequest
from gpuready.workflow.daytwo import (
    NodeConfig,
    plan_configure_node,
    plan_unconfigure_node,
    write,
)
from gpuready.workflow.transaction import RestartOptions, config_dump
from tests.helpers import CONTAINERD_DATA, DATA, require_binary

FIXTURES = sorted(CONTAINERD_DATA.glob("*.toml")) + sorted((DATA / "register").glob("*/input.toml"))
# The containerd lines that read a file of each config version (2.x reads 1 and 2 too).
LINES = {1: (1, 2), 2: (1, 2), 3: (2,), 4: (2,)}
CASES = [
    pytest.param(path, major, id=f"{path.parent.name}-{path.stem}-{major}.x")
    for path in FIXTURES
    for major in LINES[tomllib.loads(path.read_text()).get("version", 1)]
]
MODES = ("in-place", "drop-in")
REQUEST = ConfigureRequest(RuntimeRequest())


def _node(tmp_path: Path, fixture: Path, major: int) -> NodeConfig:
    root = tmp_path / "root"
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(fixture, config)
    return NodeConfig(config=config, root=root, major=major)


def _drop_in(node: NodeConfig, mode: str):
    return drop_in_target(None, root=node.root) if mode == "drop-in" else None


def configure(node: NodeConfig, mode: str, request: ConfigureRequest = REQUEST) -> list:
    drop_in = _drop_in(node, mode)
    with locked_all([node.config] + ([drop_in.path] if drop_in else []), node=node.node):
        return write(plan_configure_node(node, request, drop_in=drop_in), node=node)


def unconfigure(node: NodeConfig) -> list:
    with locked_all([node.config, node.root / "etc/containerd/conf.d/x"], node=node.node):
        return write(plan_unconfigure_node(node), node=node)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fixture", "major"), CASES)
def test_configure_then_unconfigure_gives_back_every_byte(
    tmp_path: Path, fixture: Path, major: int, mode: str
) -> None:
    node = _node(tmp_path, fixture, major)
    original = snapshot(node.root)
    assert configure(node, mode), "configure changed nothing"
    configured = snapshot(node.root)
    assert configure(node, mode) == [], "a second configure wrote something"
    assert snapshot(node.root) == configured
    assert unconfigure(node)
    assert snapshot(node.root) == original
    assert unconfigure(node) == [], "a second unconfigure wrote something"


@pytest.mark.parametrize("mode", MODES)
def test_a_file_already_the_original_again_leaves_only_the_backup_to_remove(
    tmp_path: Path, mode: str
) -> None:
    """What an unconfigure stopped after restoring the file (or a restore by hand) leaves: the
    next unconfigure removes the backup and the record, and the node is as it was."""
    node = _node(tmp_path, CONTAINERD_DATA / "containerd-2.1.9-default.toml", 2)
    original = snapshot(node.root)
    configure(node, mode)
    node.config.write_bytes(original["etc/containerd/config.toml"])
    assert unconfigure(node)
    assert snapshot(node.root) == original


def test_a_configure_stopped_after_the_record_completes_on_the_next_run(tmp_path: Path) -> None:
    """The record is the journal, written before the config it describes (a kill between the
    two, the other way round, would lose the record and with it unconfigure: the kill suite
    shows it). A kill in between leaves the record and the original config; the next configure
    completes to the same node, and unconfigure gives back every byte."""
    node = _node(tmp_path, CONTAINERD_DATA / "containerd-2.1.9-default.toml", 2)
    original = snapshot(node.root)
    plans = plan_configure_node(node, REQUEST)
    with locked_all([node.config], node=node.node):
        written = write(plans, node=node)
    assert [plan.path.name for plan in written] == ["config.toml", "config.toml.gpuready.json"]
    reference = snapshot(node.root)
    for name in ("config.toml", "config.toml.gpuready.bak"):  # the state after such a kill
        (node.config.parent / name).unlink()
    node.config.write_bytes(original["etc/containerd/config.toml"])
    configure(node, "in-place")
    assert snapshot(node.root) == reference
    unconfigure(node)
    assert snapshot(node.root) == original


@pytest.mark.containerd
@pytest.mark.parametrize(("fixture", "major"), CASES)
def test_drop_in_and_in_place_give_the_same_effective_config(
    tmp_path: Path, fixture: Path, major: int
) -> None:
    in_place = _node(tmp_path / "a", fixture, major)
    drop_in = _node(tmp_path / "b", fixture, major)
    configure(in_place, "in-place")
    configure(drop_in, "drop-in")
    assert _effective(drop_in) == _effective(in_place)


def _effective(node: NodeConfig) -> dict:
    if node.major == 1:  # the real daemon merges (and fills in its defaults)
        require_binary("containerd")
        data = config_dump(node, {}, options=RestartOptions(address="unused"))
    else:
        data = load_effective(node.config, root=node.root, major=node.major).data
    data.pop("imports", None)
    return data


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fixture", "major"), CASES)
def test_an_edit_in_between_survives_and_only_gpureadys_parts_go(
    tmp_path: Path, fixture: Path, major: int, mode: str
) -> None:
    node = _node(tmp_path, fixture, major)
    original = node.config.read_text()
    configure(node, mode, ConfigureRequest(RuntimeRequest(), enable_cdi=True))
    node.config.write_text(node.config.read_text() + "# the operator's line\n")
    unconfigure(node)
    # every line as it was, the operator's kept; a blank line may be left where a table went
    assert _text_lines(node.config.read_text()) == _text_lines(original + "# the operator's line")
    assert not (node.root / "etc/containerd/conf.d/99-nvidia.toml").exists()
    assert not Path(str(node.config) + ".gpuready.json").exists()


def _text_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("mode", MODES)
def test_a_default_runtime_gpuready_changed_gets_its_old_value_back(
    tmp_path: Path, mode: str
) -> None:
    node = _node(tmp_path, CONTAINERD_DATA / "lab-base.toml", 2)
    original = node.config.read_text()
    configure(node, mode, ConfigureRequest(RuntimeRequest(), set_as_default=True))
    effective = load_effective(node.config, root=node.root, major=2).data
    assert effective["plugins"]["io.containerd.grpc.v1.cri"]["containerd"][
        "default_runtime_name"] == "nvidia"
    node.config.write_text(node.config.read_text().replace(
        'snapshotter = "overlayfs"', 'snapshotter = "native"'))
    unconfigure(node)
    assert node.config.read_text() == original.replace(
        'snapshotter = "overlayfs"', 'snapshotter = "native"')


def test_a_setting_the_operator_changed_since_is_left_alone(tmp_path: Path) -> None:
    node = _node(tmp_path, CONTAINERD_DATA / "lab-base.toml", 1)
    configure(node, "in-place", ConfigureRequest(RuntimeRequest(), enable_cdi=True))
    node.config.write_text(node.config.read_text().replace("enable_cdi = true",
                                                           "enable_cdi = false"))
    unconfigure(node)
    data = tomllib.loads(node.config.read_text())
    cri = data["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is False  # the operator's value now
    assert "cdi_spec_dirs" not in cri
    assert "nvidia" not in cri["containerd"]["runtimes"]
