"""A --restart transaction killed before its verdict is reported by every reading command.

``check``, ``show-config``, ``audit`` and ``verify --live`` each say the transaction is pending
(lint and doctor are covered in tests/test_journal.py), with a failing exit code, and none of
them restarts anything or changes a byte (or an mtime) of the node.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gpuready.workflow.journal import journal_path
from tests.helpers import run_cli
from tests.test_journal import killed_while_writing


def state(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``folder``: its bytes, mtime and mode."""
    return {str(p.relative_to(folder)): (
        os.readlink(p).encode() if p.is_symlink() else p.read_bytes(),
        p.lstat().st_mtime_ns, p.lstat().st_mode)
        for p in sorted(folder.rglob("*")) if p.is_file() or p.is_symlink()}


def killed_node(root: Path) -> Path:
    """A node folder whose --restart was killed in its write phase; the journal names node
    paths and the node's machine id (none: the folder has no /etc/machine-id)."""
    folder = root / "etc" / "containerd"
    folder.mkdir(parents=True)
    config, _ = killed_while_writing(folder)
    path = journal_path(config)
    data = json.loads(path.read_text().replace(str(root), ""))
    data["machine_id"] = None
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return config


@pytest.fixture
def node(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    killed_node(root)
    return root


def assert_untouched(root: Path, before: dict) -> None:
    assert state(root) == before  # nothing written, nothing finished


def test_check_fails_with_the_pending_transaction(node: Path) -> None:
    before = state(node)
    result = run_cli("check", "--root", str(node), "--containerd-version", "1.7")
    assert result.code == 1, result.out + result.err
    line = next(x for x in result.out.splitlines() if "no transaction pending" in x)
    assert line.startswith("FAIL"), line
    assert "killed in its write phase" in line
    assert "config.toml.gpuready.txn.json" in line
    assert_untouched(node, before)


def test_check_json_lists_the_failed_check(node: Path) -> None:
    before = state(node)
    result = run_cli("check", "--root", str(node), "--containerd-version", "1.7",
                     "--format", "json")
    assert result.code == 1, result.out + result.err
    document = json.loads(result.out)
    assert document["status"] == "failed"
    found = [c for c in document["checks"] if c["name"] == "no transaction pending"]
    assert len(found) == 1 and not found[0]["ok"]
    assert_untouched(node, before)


def test_check_without_a_journal_has_no_such_check(tmp_path: Path) -> None:
    root = tmp_path / "node"
    config = killed_node(root)
    journal_path(config).unlink()
    result = run_cli("check", "--root", str(root), "--containerd-version", "1.7")
    assert "no transaction pending" not in result.out


def test_check_reports_an_untrusted_journal_without_acting_on_it(node: Path) -> None:
    path = journal_path(node / "etc/containerd/config.toml")
    path.write_text("{")
    before = state(node)
    result = run_cli("check", "--root", str(node), "--containerd-version", "1.7")
    assert result.code == 1, result.out + result.err
    assert "refuses to act on" in result.out
    assert_untouched(node, before)


@pytest.mark.parametrize("how", [("--root",), ("--config",)])
def test_show_config_prints_then_says_the_transaction_is_pending(node: Path, how) -> None:
    before = state(node)
    where = (("--root", str(node)) if how == ("--root",)
             else ("--config", str(node / "etc/containerd/config.toml")))
    result = run_cli("show-config", *where, "--containerd-version", "1.7")
    assert result.code == 1, result.out + result.err
    assert "runtimes" in result.out  # the config is still printed
    errors = result.err.strip().splitlines()
    assert len(errors) == 1, result.err
    assert errors[0].startswith("gpuready: error: a --restart transaction on ")
    assert "was never finished" in errors[0]
    if how == ("--root",):  # by --config alone, the journal's node paths name another file
        assert "killed in its write phase" in errors[0]
    assert_untouched(node, before)


def test_show_config_json_says_so(node: Path) -> None:
    before = state(node)
    result = run_cli("show-config", "--root", str(node), "--containerd-version", "1.7",
                     "--format", "json")
    assert result.code == 1, result.out + result.err
    document = json.loads(result.out)
    assert document["status"] == "failed"
    assert "killed in its write phase" in document["pending_transaction"]
    assert_untouched(node, before)


def test_show_config_without_a_journal_exits_0(node: Path) -> None:
    journal_path(node / "etc/containerd/config.toml").unlink()
    result = run_cli("show-config", "--root", str(node), "--containerd-version", "1.7")
    assert result.code == 0, result.out + result.err
    assert result.err == ""


def test_audit_reports_the_pending_transaction_of_each_node(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    killed_node(fleet / "gpu-killed")
    clean = fleet / "gpu-clean" / "etc" / "containerd"
    clean.mkdir(parents=True)
    shutil.copyfile(tmp_path / "fleet/gpu-killed/etc/containerd/config.toml.gpuready.bak",
                    clean / "config.toml")
    before = state(fleet)
    result = run_cli("audit", str(fleet), "--containerd-version", "1.7",
                     "--select", "transaction-pending", "--format", "json")
    assert result.code == 1, result.out + result.err
    document = json.loads(result.out)
    rules = {item["rule"]: item for item in document["rules"]}
    assert rules["transaction-pending"]["severity"] == "error"
    assert rules["transaction-pending"]["nodes"] == 1
    text = run_cli("audit", str(fleet), "--containerd-version", "1.7",
                   "--select", "transaction-pending")
    assert text.code == 1
    assert "transaction-pending" in text.out
    assert state(fleet) == before


@pytest.mark.containerd
def test_verify_live_fails_on_the_pending_transaction(
    capsys, monkeypatch, lab_containerd, tmp_path: Path,
) -> None:
    from tests.cli_runner import run_cli as run_in_process

    root = tmp_path / "node"
    config = killed_node(root)
    shutil.copyfile(lab_containerd.config_path, config)  # what the daemon runs, plus a journal
    # the node's socket, inside the root (as a bind mount would put it there)
    (root / "run" / "containerd").mkdir(parents=True)
    (root / "run" / "containerd" / "containerd.sock").symlink_to(
        lab_containerd.address.removeprefix("unix://"))
    before = state(root)
    result = run_in_process(capsys, monkeypatch, "verify", "--live", "--root", str(root),
                            "--config", str(config))
    assert result.code == 1, result.out + result.err
    line = next(x for x in result.out.splitlines() if "transaction" in x)
    assert line.startswith("failed"), line
    assert "killed in its write phase" in line
    assert_untouched(root, before)
