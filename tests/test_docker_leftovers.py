"""``unconfigure --engine docker`` leaves nothing of gpuready's behind: the backup it kept goes
too, as its record proves it gpuready's, while a file the operator made stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_cli

ORIGINAL = '{\n    "log-level": "info"\n}\n'


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A sandbox node with an operator's daemon.json."""
    path = tmp_path / "etc" / "docker" / "daemon.json"
    path.parent.mkdir(parents=True)
    path.write_text(ORIGINAL)
    return tmp_path


def daemon_json(root: Path) -> Path:
    return root / "etc" / "docker" / "daemon.json"


def files(root: Path) -> list[str]:
    return sorted(path.name for path in daemon_json(root).parent.iterdir())


def gpuready(command: str, root: Path, *extra: str):
    result = run_cli(command, "--engine", "docker", "--root", str(root), *extra)
    assert result.code == 0, result.out + result.err
    return result


def edit_by_hand(root: Path) -> None:
    data = json.loads(daemon_json(root).read_text())
    data["log-level"] = "debug"
    daemon_json(root).write_text(json.dumps(data, indent=4) + "\n")


def test_unconfigure_after_an_edit_removes_the_backup_gpuready_kept(node: Path) -> None:
    gpuready("configure", node)
    assert files(node) == ["daemon.json", "daemon.json.gpuready.bak", "daemon.json.gpuready.json"]
    edit_by_hand(node)  # now the backup cannot simply be restored
    result = gpuready("unconfigure", node)
    assert "remove runtime nvidia from runtimes" in result.out
    assert "remove gpuready's backup daemon.json.gpuready.bak" in result.out
    assert "backup of the original" not in result.out
    assert files(node) == ["daemon.json"]
    assert json.loads(daemon_json(node).read_text()) == {"log-level": "debug"}  # the edit stays


def test_unconfigure_leaves_no_backup_of_its_own_making(node: Path) -> None:
    """The backup is gone (the operator removed it) and the file was edited: the writer keeps a
    backup of the file as unconfigure found it, and unconfigure takes that one away again."""
    gpuready("configure", node)
    (daemon_json(node).parent / "daemon.json.gpuready.bak").unlink()
    edit_by_hand(node)
    gpuready("unconfigure", node)
    assert files(node) == ["daemon.json"]
    assert json.loads(daemon_json(node).read_text()) == {"log-level": "debug"}


def test_a_backup_the_operator_made_stays(node: Path) -> None:
    """A daemon.json.gpuready.bak that was there before gpuready (with other content) is not
    gpuready's: its record names another original."""
    theirs = daemon_json(node).parent / "daemon.json.gpuready.bak"
    theirs.write_text('{"operator": "kept this"}\n')
    gpuready("configure", node)
    edit_by_hand(node)
    gpuready("unconfigure", node)
    assert files(node) == ["daemon.json", "daemon.json.gpuready.bak"]
    assert theirs.read_text() == '{"operator": "kept this"}\n'


def test_without_a_record_nothing_is_removed(node: Path) -> None:
    """A backup beside a file gpuready has no record of is left alone."""
    gpuready("configure", node)
    (daemon_json(node).parent / "daemon.json.gpuready.json").unlink()
    edit_by_hand(node)
    result = gpuready("unconfigure", node)
    assert "nothing recorded" in result.out
    assert files(node) == ["daemon.json", "daemon.json.gpuready.bak"]


def test_the_plain_round_trip_still_restores_the_original(node: Path) -> None:
    gpuready("configure", node)
    gpuready("unconfigure", node)
    assert daemon_json(node).read_text() == ORIGINAL
    assert files(node) == ["daemon.json"]
