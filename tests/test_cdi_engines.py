"""The CDI story on Docker and CRI-O nodes: whether the engine reads CDI, and the shadowing,
conflict and staleness findings over the directories it reads.

The nodes are fake driver trees (``tests/driver_trees.py``) standing in for a GPU node; the
specs come from gpuready's generator, the engines' configs are read by gpuready's own readers.
"""

from __future__ import annotations

import pytest

from gpuready.cdi.story import crio_reader, docker_reader
from gpuready.node import Node
from gpuready.rules.cdi_node import engine_problems
from tests import driver_trees as trees
from tests.driver_trees import VERSION_A, VERSION_B
from tests.test_cdi_staleness import generate


@pytest.mark.parametrize(("daemon", "release", "reads"), [
    ({}, None, None),
    ({"features": {"cdi": True}}, (24, 0), False),  # before 25.0: no CDI at all
    ({}, (25, 0), False),  # 25.0 to 28.1: opt-in
    ({"features": {"cdi": True}}, (25, 0), True),
    ({}, (28, 2), True),  # 28.2: on by default
    ({"features": {"cdi": False}}, (28, 2), False),
])
def test_docker_reads_cdi_by_release_and_features_cdi(daemon, release, reads):
    assert docker_reader(daemon, release).reads is reads


def test_docker_and_crio_spec_dirs():
    assert docker_reader({"cdi-spec-dirs": ["/opt/cdi"]}, (28, 2)).dirs == ("/opt/cdi",)
    assert crio_reader({}).dirs == ("/etc/cdi", "/var/run/cdi") and crio_reader({}).reads
    assert crio_reader({"crio": {"runtime": {"cdi_spec_dirs": ["/etc/cdi"]}}}).dirs == (
        "/etc/cdi",)


def crio_node(root, cdi_dirs: str = ""):
    trees.install_driver(root, VERSION_A)
    trees.write(root / "etc/crio/crio.conf", f"[crio.runtime]\n{cdi_dirs}")
    generate(root)


def rules(root, engine: str, **kwargs) -> list[str]:
    return [p.rule for p in engine_problems(Node(root), engine, **kwargs)]


def test_crio_node_shadowed_then_configured_dirs_then_stale(tmp_path):
    crio_node(tmp_path)
    assert rules(tmp_path, "crio") == []
    trees.second_tool_spec(tmp_path)
    assert rules(tmp_path, "crio") == ["cdi-spec-shadowed"]
    (tmp_path / "etc/crio/crio.conf").write_text('[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi"]\n')
    assert rules(tmp_path, "crio") == []
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    found = engine_problems(Node(tmp_path), "crio")
    assert [p.rule for p in found] == ["cdi-spec-stale"]
    assert f"libcuda.so.{VERSION_A} (mount)" in found[0].message


def test_docker_25_without_features_cdi_does_not_read_the_spec(tmp_path):
    trees.install_driver(tmp_path, VERSION_A)
    trees.write(tmp_path / "etc/docker/daemon.json", "{}\n")
    generate(tmp_path)
    found = engine_problems(Node(tmp_path), "docker", docker_release=(25, 0))
    assert [p.rule for p in found] == ["cdi-not-read"]
    assert "reads CDI specs only with features.cdi = true" in found[0].message
    assert "--enable-cdi" in found[0].fix
    assert rules(tmp_path, "docker", docker_release=(28, 2)) == []


def test_doctor_with_engine_crio_and_docker_tells_the_cdi_story(tmp_path, capsys):
    """``doctor --engine crio|docker`` runs the CDI rules on the directories the engine reads;
    ``--ignore`` drops them as any rule."""
    import json

    from gpuready.cli import main

    crio_node(tmp_path)
    trees.second_tool_spec(tmp_path)
    argv = ["doctor", "--engine", "crio", "--root", str(tmp_path), "--format", "json"]
    main.run(argv)
    assert "cdi-spec-shadowed" in [p["rule"] for p in json.loads(capsys.readouterr().out)[
        "problems"]]
    main.run([*argv, "--ignore", "cdi-spec-shadowed"])
    assert "cdi-spec-shadowed" not in [p["rule"] for p in json.loads(capsys.readouterr().out)[
        "problems"]]
    trees.write(tmp_path / "etc/docker/daemon.json", "{}\n")
    main.run(["doctor", "--engine", "docker", "--docker-version", "25.0", "--root", str(tmp_path),
              "--format", "json"])
    found = {p["rule"]: p for p in json.loads(capsys.readouterr().out)["problems"]}
    assert "cdi-not-read" in found, found
