"""The ``--restart`` transaction's journal, and the checks made before its first write.

A restart option no transaction can run with is refused before anything is written. A restart
command that prints without end does not exhaust memory. A run killed between writing and its
verdict leaves a journal beside the config: the next writing command finishes the transaction
(restart and verify, or roll back) and says which; a reading command reports it pending.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from gpuready.node import Node
from gpuready.workflow.journal import journal_path, machine_id
from gpuready.workflow.transaction import OUTPUT_KEPT, run_bounded
from tests.harness.restartable import RestartableContainerd
from tests.helpers import LAB_BASE, run_cli

CONFIG_TEXT = LAB_BASE.read_text()


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


# -- options refused before the first write ------------------------------------------------------


@pytest.mark.parametrize("timeout", ["nan", "inf", "1e308", "-1", "0"])
@pytest.mark.parametrize("command", [("configure",), ("unconfigure",), ("migrate", "--to", "3")])
def test_a_bad_restart_timeout_is_refused_before_anything_is_written(
    tmp_path: Path, timeout: str, command: tuple[str, ...],
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG_TEXT)
    before = listing(tmp_path)
    result = run_cli(*command, "--config", str(config), "--restart", "--restart-command", "true",
                     "--restart-timeout", timeout)
    assert result.code == 2, result.out + result.err
    assert result.err.startswith("gpuready: error: --restart-timeout"), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "internal error" not in result.err
    assert listing(tmp_path) == before  # no config change, no backup, no record, no journal


@pytest.mark.parametrize("option", [("--restart-command", " "), ("--restart-command", "a\nb"),
                                    ("--address", "tcp://127.0.0.1:1")])
def test_other_bad_restart_options_are_refused_before_anything_is_written(
    tmp_path: Path, option: tuple[str, str],
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG_TEXT)
    before = listing(tmp_path)
    result = run_cli("configure", "--config", str(config), "--restart", *option)
    assert result.code == 2, result.out + result.err
    assert result.err.startswith(f"gpuready: error: {option[0]}"), result.err
    assert listing(tmp_path) == before


# -- a restart command's output is bounded ---------------------------------------------------------


def test_a_restart_command_printing_without_end_keeps_only_the_tail() -> None:
    script = ("import sys; out = sys.stderr.buffer\n"
              "for _ in range(200): out.write(b'x' * 1024 * 1024)\n"
              "out.write(b'\\nthe last line\\n'); sys.exit(3)")
    result = run_bounded(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}", timeout=60)
    assert result is not None
    code, stderr = result
    assert code == 3
    assert len(stderr.encode()) <= OUTPUT_KEPT
    assert stderr.splitlines()[-1] == "the last line"


def test_a_restart_command_past_its_timeout_is_stopped() -> None:
    assert run_bounded("sleep 30", timeout=0.5) is None


# -- a journal a killed run left (no containerd needed) --------------------------------------------


HOST_ID = machine_id(Node("/"))  # this machine's: a journal gpuready wrote here names it


def killed_while_writing(folder: Path) -> tuple[Path, str]:
    """The config written, its record not yet: what a SIGKILL in the write phase leaves."""
    config = folder / "config.toml"
    after = CONFIG_TEXT + '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
    config.write_text(after)
    (folder / "config.toml.gpuready.bak").write_text(CONFIG_TEXT)
    record = folder / "config.toml.gpuready.json"
    journal = {
        "kind": "gpuready restart transaction", "format": 2, "node": "/",
        "config": str(config), "major": 1, "phase": "write", "restart": True,
        "options": {"runtime_name": "nvidia", "expect_runtime": "nvidia", "gone_runtime": None},
        "machine_id": HOST_ID,
        "files": [
            {"path": str(record), "before": None, "before_sha256": None,
             "after_sha256": sha("{}\n")},
            {"path": str(config), "before": CONFIG_TEXT, "before_sha256": sha(CONFIG_TEXT),
             "after_sha256": sha(after)},
        ],
        "backups": [str(folder / "config.toml.gpuready.bak")],
    }
    path = journal_path(config)
    path.write_text(json.dumps(journal))
    path.chmod(0o600)
    return config, after


def test_a_run_killed_while_writing_is_rolled_back_by_the_next_writing_command(
    tmp_path: Path,
) -> None:
    config, _ = killed_while_writing(tmp_path)
    result = run_cli("unconfigure", "--config", str(config))
    assert result.code == 0, result.out + result.err
    assert "was killed before its verdict" in result.out
    assert "pending transaction rolled back" in result.out
    assert "containerd was not restarted" in result.out  # it never read the change: no restart
    assert listing(tmp_path) == {"config.toml": CONFIG_TEXT.encode()}


def test_a_dry_run_only_says_a_transaction_is_pending(tmp_path: Path) -> None:
    config, after = killed_while_writing(tmp_path)
    before = listing(tmp_path)
    result = run_cli("configure", "--config", str(config), "--dry-run")
    assert "was killed before its verdict" in result.out
    assert "a run without --dry-run finishes it first" in result.out
    assert listing(tmp_path) == before


def test_a_file_edited_since_the_kill_is_left_alone(tmp_path: Path) -> None:
    config, after = killed_while_writing(tmp_path)
    config.write_text(after + "# edited by hand\n")
    before = listing(tmp_path)
    result = run_cli("configure", "--config", str(config))
    assert result.code == 1, result.out + result.err
    assert "changed since the transaction was killed: nothing touched" in result.out
    assert "pending --restart transaction is not finished" in result.err
    assert listing(tmp_path) == before


@pytest.mark.parametrize("change", ["group-writable", "not-json", "outside-hash",
                                    "another-machine", "a-command", "earlier-format"])
def test_a_journal_gpuready_cannot_trust_is_refused_and_nothing_touched(
    tmp_path: Path, change: str,
) -> None:
    config, _ = killed_while_writing(tmp_path)
    path = journal_path(config)
    if change == "group-writable":
        path.chmod(0o664)
    elif change == "not-json":
        path.write_text("{")
    else:
        data = json.loads(path.read_text())
        if change == "outside-hash":  # a "before" text that is not the one its hash names
            data["files"][1]["before"] = "planted = true\n"
        elif change == "another-machine":  # a tree copied from another node, journal and all
            data["machine_id"] = "0123456789abcdef0123456789abcdef"
        elif change == "a-command":  # what the journal's finisher would have run
            data["options"]["command"] = f"touch {tmp_path / 'ran'}"
        else:  # gpuready's earlier journal, which held the restart command
            data["format"] = 1
            data["options"].update(command=f"touch {tmp_path / 'ran'}", address="unix:///x")
        path.write_text(json.dumps(data))
    before = listing(tmp_path)
    for command in (("unconfigure", "--config", str(config)),
                    ("configure", "--config", str(config), "--restart", "--restart-command",
                     "true", "--restart-timeout", "1")):
        result = run_cli(*command)
        assert result.code == 2, result.out + result.err
        assert "transaction journal" in result.err, result.err
        assert listing(tmp_path) == before
    assert not (tmp_path / "ran").exists()


def test_a_pending_restart_is_carried_out_only_with_this_runs_options(tmp_path: Path) -> None:
    """Every file written, the restart not done: a run without --restart touches nothing and
    says a restart is pending (exit 1, its own change not made); nothing from the journal runs."""
    config, after = killed_while_writing(tmp_path)
    (tmp_path / "config.toml.gpuready.json").write_text("{}\n")  # the record was written too
    before = listing(tmp_path)
    result = run_cli("configure", "--config", str(config), "--runtime-name", "other")
    assert result.code == 1, result.out + result.err
    assert "restart pending" in result.out and "--restart" in result.out
    assert "pending --restart transaction is not finished" in result.err
    assert listing(tmp_path) == before  # the journal kept, no runtime "other" added


def test_reading_commands_report_the_pending_transaction(tmp_path: Path) -> None:
    root = tmp_path / "node"
    folder = root / "etc" / "containerd"
    folder.mkdir(parents=True)
    killed_while_writing(folder)
    # the journal names node paths and the node's machine id (this root has none)
    path = journal_path(folder / "config.toml")
    data = json.loads(path.read_text().replace(str(root), ""))
    path.write_text(json.dumps({**data, "machine_id": None}))
    before = listing(root)
    for command in (("doctor",), ("lint",)):
        result = run_cli(*command, "--root", str(root), "--containerd-version", "1.7",
                         "--select", "transaction-pending")
        assert result.code == 1, result.out + result.err
        assert "transaction-pending" in result.out
        assert "killed in its write phase" in result.out
    assert listing(root) == before  # reported, never finished


# -- a --restart killed for real, with a real containerd ------------------------------------------


# the fixture ``daemon`` (tests/conftest.py): a restartable containerd on the lab config


def killing_restart(daemon: RestartableContainerd) -> str:
    """A restart command that kills gpuready the first time (``$PPID``: the gpuready that
    runs it), and restarts containerd every later time."""
    flag = daemon.folder / "killed-once"
    return (f"if [ -e {flag} ]; then {daemon.restart_command}; "
            f"else touch {flag}; kill -9 $PPID; fi")


def live_runtimes(daemon: RestartableContainerd) -> set[str]:
    from gpuready.cri.client import CriClient
    from gpuready.cri.live import parse_live_config

    with CriClient(daemon.address, timeout=10) as client:
        return set(parse_live_config(client.status(verbose=True).config()).runtimes)


def restart_args(daemon: RestartableContainerd, command: str) -> tuple[str, ...]:
    return ("--config", str(daemon.config_path), "--restart", "--restart-command", command,
            "--address", daemon.address, "--restart-timeout", "30")


@pytest.mark.containerd
def test_a_killed_restart_is_finished_by_the_next_writing_command(
    daemon: RestartableContainerd,
) -> None:
    standin = str(daemon.folder / "standin")
    first = daemon.pid
    killed = run_cli("configure", "--binary", standin,
                     *restart_args(daemon, killing_restart(daemon)))
    assert killed.code == -9, killed.out + killed.err
    journal = journal_path(daemon.config_path)
    assert journal.is_file()
    assert "nvidia" in daemon.config_path.read_text()  # written, containerd not restarted
    assert daemon.pid == first and live_runtimes(daemon) == {"runc"}

    doctor = run_cli("doctor", "--config", str(daemon.config_path), "--select",
                     "transaction-pending")
    assert doctor.code == 1, doctor.out + doctor.err
    assert "killed in its restart phase" in doctor.out
    assert daemon.pid == first and journal.is_file()  # a reading command restarts nothing

    again = run_cli("configure", "--binary", standin,
                    *restart_args(daemon, daemon.restart_command))
    assert again.code == 0, again.out + again.err
    assert "was killed before its verdict" in again.out
    assert "[ok] verify --live" in again.out
    assert "pending transaction finished" in again.out
    assert "nothing to change; containerd not restarted" in again.out  # then its own work
    assert not journal.exists()
    assert daemon.pid != first and live_runtimes(daemon) == {"runc", "nvidia"}


@pytest.mark.containerd
def test_a_killed_restart_that_fails_its_proof_is_rolled_back_by_the_next_command(
    daemon: RestartableContainerd,
) -> None:
    """Without ``--restart`` the next command restarts nothing (the journal names no command):
    it says a restart is pending. With its own ``--restart`` options it restarts containerd on
    the change, and the probe it asks for fails through the missing binary: rolled back."""
    config = daemon.config_path
    original = config.read_bytes()
    killed = run_cli("configure", "--binary", "/nonexistent/nvidia-container-runtime", "--probe",
                     *restart_args(daemon, killing_restart(daemon)))
    assert killed.code == -9, killed.out + killed.err
    boots = daemon.boots()
    left = config.read_bytes()
    plain = run_cli("unconfigure", "--config", str(config))
    assert plain.code == 1, plain.out + plain.err
    assert "restart pending" in plain.out
    assert config.read_bytes() == left and daemon.boots() == boots  # nothing touched, nor run
    result = run_cli("unconfigure", "--probe", *restart_args(daemon, daemon.restart_command))
    assert result.code == 0, result.out + result.err
    assert "[FAILED] probe" in result.out
    assert "pending transaction rolled back" in result.out
    assert "nothing to change; containerd not restarted" in result.out  # then its own work
    assert config.read_bytes() == original
    assert sorted(p.name for p in config.parent.glob("config.toml*")) == ["config.toml"]
    assert daemon.boots() == boots + 2, "restarted on the change, then on the original"
    assert live_runtimes(daemon) == {"runc"}
    assert os.path.exists(daemon.folder / "killed-once")
