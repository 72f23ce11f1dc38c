"""The engine interface: every engine satisfies it, detection reads the node, and one plan from
each engine goes through add, default runtime and remove the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.engines import NAMES, detect, get
from gpuready.engines.base import Engine, RuntimeChange
from gpuready.errors import UsageError
from gpuready.node import Node
from tests.helpers import LAB_BASE


@pytest.mark.parametrize("name", NAMES)
def test_every_engine_satisfies_the_interface_and_has_facts(name: str) -> None:
    engine = get(name)
    assert isinstance(engine, Engine)
    assert engine.facts.name == name and engine.facts.config.is_absolute()
    assert engine.facts.source


def seed(root: Path, name: str) -> Path:
    node = Node(root)
    path = get(name).config_path(node)
    path.parent.mkdir(parents=True, exist_ok=True)
    if name == "containerd":
        path.write_text(LAB_BASE.read_text())
    elif name == "docker":
        path.write_text('{\n  "debug": true\n}\n')
    return path


@pytest.mark.parametrize("name", NAMES)
def test_add_then_read_back_through_the_interface(name: str, tmp_path: Path) -> None:
    engine = get(name)
    node = Node(tmp_path)
    path = seed(tmp_path, name)
    plan = engine.plan_add_runtime(path, RuntimeChange("nvidia", "/usr/bin/nv"), node=node)
    assert plan.changes
    path.write_text(plan.after)
    assert "nvidia" in engine.runtimes(path, node=node)
    assert engine.default_runtime(path, node=node) != "nvidia"
    assert not engine.plan_add_runtime(path, RuntimeChange("nvidia", "/usr/bin/nv"),
                                       node=node).changes


@pytest.mark.parametrize("name", ["docker", "crio"])
def test_remove_undoes_add(name: str, tmp_path: Path) -> None:
    """The text comes back; a file gpuready created (no backup beside it) is removed."""
    from gpuready.fsio import apply_plan

    engine = get(name)
    node = Node(tmp_path)
    path = seed(tmp_path, name)
    before = path.read_text() if path.exists() else None
    apply_plan(engine.plan_add_runtime(path, RuntimeChange("nvidia", "/x"), node=node), node=node)
    [plan] = engine.plan_remove_runtime(path, "nvidia", node=node)
    assert plan.after == before


def test_containerd_removal_goes_through_the_record(tmp_path: Path) -> None:
    """containerd's unconfigure takes back what its record says; without one, nothing."""
    engine = get("containerd")
    node = Node(tmp_path)
    path = seed(tmp_path, "containerd")
    assert engine.plan_remove_runtime(path, "nvidia", node=node) == []


def test_detection(tmp_path: Path) -> None:
    assert detect(tmp_path).name == "containerd"  # nothing there: the default
    (tmp_path / "etc" / "docker").mkdir(parents=True)
    (tmp_path / "etc" / "docker" / "daemon.json").write_text("{}")
    assert detect(tmp_path).name == "docker"
    (tmp_path / "etc" / "crio").mkdir(parents=True)
    (tmp_path / "etc" / "crio" / "crio.conf").write_text("")
    with pytest.raises(UsageError, match="choose one with --engine"):
        detect(tmp_path)
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    assert detect(tmp_path).name == "containerd"  # containerd is there: it wins


def test_a_docker_node_is_configured_without_naming_the_engine(tmp_path: Path) -> None:
    from tests.helpers import run_cli

    path = seed(tmp_path, "docker")
    result = run_cli("configure", "--root", str(tmp_path))
    assert result.code == 0, result.err
    assert "nvidia" in json.loads(path.read_text())["runtimes"]
