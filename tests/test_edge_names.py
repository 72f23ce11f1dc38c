"""Names and small inputs at the edge, through the real command line on ``--root`` nodes.

A ``--drop-in`` containerd must not take as a drop-in (gpuready's journal, a CDI spec, another
engine's config, the main config, a name not ending in ``.toml``) is refused with exit 2, one line
with a good path, and not a byte written; a 5000-digit integer in daemon.json is a bad value at
its place; a control character in an address is refused; a U+202E in a path is shown escaped in
text and exact in JSON; a hard-linked config is written with a note that its other links keep
the old text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.measure import tree_snapshot
from tests.test_bad_input import _node

CONFIG = "etc/containerd/config.toml"
GOOD = "/etc/containerd/conf.d/99-nvidia.toml"


def _refused(result, tmp: Path, before: dict, *, says: str) -> None:
    """Exit 2, one line naming the problem, nothing changed below ``tmp``."""
    assert result.code == 2, result.out + result.err
    assert says in result.err, result.err
    assert len(result.err.splitlines()) == 1, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    assert tree_snapshot(tmp) == before


@pytest.mark.parametrize(("drop_in", "says"), [
    ("/etc/containerd/config.toml.gpuready.txn.json", "gpuready keeps for its own files"),
    ("/etc/containerd/conf.d/99-nvidia.gpuready.toml", "gpuready keeps for its own files"),
    ("/etc/cdi/nvidia.yaml", "lies in /etc/cdi"),
    ("/etc/cdi/nvidia.toml", "lies in /etc/cdi"),
    ("/var/run/cdi/nvidia.toml", "lies in /var/run/cdi"),
    ("/etc/containerd/config.toml", "is the main config"),
    ("/etc/containerd/conf.d/../config.toml", "is the main config"),
    ("/etc/docker/daemon.json", "Docker's config"),
    ("/etc/crio/crio.conf", "CRI-O's config"),
    ("/etc/crio/crio.conf.d/99-nvidia.toml", "CRI-O's drop-in folder"),
    ("/etc/containerd/conf.d/99-nvidia.conf", "not a file name ending in .toml"),
    ("/etc/containerd/conf.d/.toml", "not a file name ending in .toml"),
])
def test_a_drop_in_containerd_must_not_take_is_refused(tmp_path, drop_in, says):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), "--drop-in", drop_in)
    _refused(result, tmp_path, before, says=says)
    assert f"such as {GOOD}" in result.err


def test_the_journal_name_refused_keeps_later_writing_commands_working(tmp_path):
    """The issue's case: the journal's name as a drop-in broke every later writing command."""
    root = _node(tmp_path)
    run_cli("configure", "--root", str(root), "--drop-in",
            "/etc/containerd/config.toml.gpuready.txn.json")
    result = run_cli("configure", "--root", str(root))
    assert result.code == 0, result.out + result.err


def test_a_drop_in_a_link_leads_into_the_cdi_folder_is_refused(tmp_path):
    root = _node(tmp_path)
    (root / "etc/cdi").mkdir()
    (root / "etc/containerd/conf.d").symlink_to("../cdi")
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), "--drop-in",
                     "/etc/containerd/conf.d/99-nvidia.toml")
    _refused(result, tmp_path, before, says="lies in /etc/cdi")


def test_a_drop_in_that_is_the_named_config_is_refused(tmp_path):
    root = _node(tmp_path)
    other = root / "etc/containerd/other.toml"
    other.write_bytes((root / CONFIG).read_bytes())
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), "--config", str(other),
                     "--drop-in", "/etc/containerd/other.toml")
    _refused(result, tmp_path, before, says="is the main config /etc/containerd/other.toml")


def test_a_drop_in_no_imports_entry_can_reach_is_refused(tmp_path):
    """``imports`` that is not an array: no entry can be added, containerd would never load it."""
    root = _node(tmp_path)
    config = root / CONFIG
    config.write_text('imports = "/etc/containerd/conf.d/*.toml"\n' + config.read_text())
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), "--drop-in", "/opt/nvidia/runtime.toml")
    _refused(result, tmp_path, before, says="'imports' is not an array of paths")


@pytest.mark.parametrize("drop_in", [GOOD, "/opt/nvidia/runtime.toml"])
def test_a_good_drop_in_is_written_and_imported(tmp_path, drop_in):
    """What works stays: any .toml file gpuready can name in ``imports``."""
    root = _node(tmp_path)
    result = run_cli("configure", "--root", str(root), "--drop-in", drop_in)
    assert result.code == 0, result.out + result.err
    assert (root / drop_in.lstrip("/")).read_text().startswith("# Written by gpuready")
    assert f"imports = [\"{drop_in}\"]" in (root / CONFIG).read_text()


def _daemon_json(root: Path, text: str) -> Path:
    path = root / "etc/docker/daemon.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("sign", ["", "-"])
def test_a_5000_digit_integer_in_daemon_json_is_a_bad_value_at_its_place(tmp_path, sign):
    root = _node(tmp_path)
    path = _daemon_json(root, '{\n  "log-level": "info",\n  "x": [1, ' + sign + "9" * 5000
                        + "]\n}\n")
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--engine", "docker", "--root", str(root))
    _refused(result, tmp_path, before, says=f"{path}:3:12: bad value: an integer of 5000 digits")
    assert "set_int_max_str_digits" not in result.err


def test_lint_reports_the_long_integer_as_a_finding(tmp_path):
    root = _node(tmp_path)
    path = _daemon_json(root, '{"a": ' + "1" * 5000 + "}\n")
    result = run_cli("lint", "--engine", "docker", str(path))
    assert result.code == 1, result.out + result.err
    assert f"{path}:1:7: error docker-json-syntax: bad value" in result.out


@pytest.mark.parametrize(("env", "argv", "says"), [
    ({"CONTAINERD_ADDRESS": "/run/containerd/containerd.sock\nfake"}, (),
     "'CONTAINERD_ADDRESS=/run/containerd/containerd.sock\\nfake': holds a control character"),
    ({}, ("--address", "/run/containerd/containerd.sock\x1b[2J"),
     "holds a control character"),
    ({"DOCKER_HOST": "unix:///var/run/docker.sock\x85"}, ("--engine", "docker"),
     "holds a control character"),
])
def test_a_control_character_in_an_address_is_refused(tmp_path, env, argv, says):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("verify", "--live", "--root", str(root), *argv, env=env)
    _refused(result, tmp_path, before, says=says)


def test_configure_restart_refuses_a_newline_in_containerd_address(tmp_path):
    root = _node(tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_cli("configure", "--root", str(root), "--restart", "--restart-command", "true",
                     env={"CONTAINERD_ADDRESS": "/run/x.sock\n"})
    _refused(result, tmp_path, before, says="holds a control character")


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE


def test_a_bidi_character_in_a_path_is_escaped_in_text_and_exact_in_json(tmp_path):
    root = _node(tmp_path)
    drop_in = f"/etc/containerd/conf.d/99-nv{RLO}lmot.toml"
    text = run_cli("configure", "--root", str(root), "--drop-in", drop_in, "--dry-run")
    assert text.code == 0, text.out + text.err
    assert RLO not in text.out
    assert "99-nv\\u202elmot.toml: would write drop-in" in text.out
    shown = run_cli("configure", "--root", str(root), "--drop-in", drop_in, "--dry-run",
                    "--format", "json")
    assert json.loads(shown.out)["file"] == str(root) + drop_in


@pytest.mark.parametrize("name", [f"x{RLO}lmot.toml", "x\nFAKE LINE.toml", "x\x1b[31m.toml"])
def test_an_error_naming_a_hostile_path_stays_one_escaped_line(tmp_path, name):
    root = _node(tmp_path)
    result = run_cli("lint", "--root", str(root), f"/etc/{name}")
    assert result.code == 2, result.out + result.err
    assert len(result.err.splitlines()) == 1, result.err
    assert all(char not in result.err for char in (RLO, "\x1b")), result.err
    as_json = run_cli("lint", "--root", str(root), f"/etc/{name}", "--format", "json")
    assert name in json.loads(as_json.out)["error"]


def _linked(path: Path) -> Path:
    other = path.with_name(path.name + ".other-link")
    os.link(path, other)
    return other


@pytest.mark.parametrize("argv", [(), ("--drop-in",)])
def test_a_hard_linked_config_is_written_with_a_note(tmp_path, argv):
    root = _node(tmp_path)
    other = _linked(root / CONFIG)
    old = other.read_bytes()
    result = run_cli("configure", "--root", str(root), *argv)
    assert result.code == 0, result.out + result.err
    assert (f"note: {root / CONFIG} has 1 other hard link: gpuready writes a new file in its "
            "place, so the other links keep the old text") in result.out
    assert other.read_bytes() == old  # what the note says
    assert (root / CONFIG).read_bytes() != old


def test_a_hard_linked_daemon_json_is_written_with_a_note(tmp_path):
    root = _node(tmp_path)
    path = _daemon_json(root, "{}\n")
    _linked(path)
    result = run_cli("configure", "--engine", "docker", "--root", str(root), "--format", "json")
    assert result.code == 0, result.out + result.err
    notes = json.loads(result.out)["notes"]
    assert any(note.startswith(f"{path} has 1 other hard link") for note in notes), notes


def test_an_unlinked_config_gets_no_note(tmp_path):
    root = _node(tmp_path)
    result = run_cli("configure", "--root", str(root))
    assert result.code == 0, result.out + result.err
    assert "hard link" not in result.out
