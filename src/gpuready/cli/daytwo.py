"""What ``configure``, ``unconfigure`` and ``migrate`` share on the command line: which node and
files they work on, how their plans are reported, and the ``--restart`` transaction."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuready.errors import ExitCode, GpureadyError

if TYPE_CHECKING:
    from gpuready.cli import requests


class PendingTransactionError(GpureadyError):
    """A transaction a killed run left could not be finished; the command did nothing else."""

    exit_code = ExitCode.CHECK_FAILED


def node_config(request: requests.AnyRequest):
    """The :class:`~gpuready.workflow.daytwo.NodeConfig` of ``--config``, ``--root`` and
    ``--containerd-version`` (else ``containerd --version``, else the config version)."""
    from pathlib import Path

    from gpuready.containerd.semantics import choose
    from gpuready.workflow.daytwo import NodeConfig

    root = Path(request.root)
    path = config_path(request)
    flag = getattr(request, "containerd_version", None)
    semantics = choose(flag=flag, probe=True, config_version=_version_or_none(path, root),
                       root=root)
    return NodeConfig(config=path, root=root, major=semantics.major, line=semantics.line)


def config_path(request: requests.AnyRequest):
    """The containerd config ``--config`` names, else the node's ``/etc/containerd/config.toml``
    (where a ``--restart`` transaction keeps its journal)."""
    from pathlib import Path

    from gpuready.node import Node
    from gpuready.paths import CONTAINERD_CONFIG

    config = getattr(request, "config", None)
    return Path(config) if config else Node(request.root).path(CONTAINERD_CONFIG)


def _version_or_none(path, root):
    """The config's ``version`` for choosing the merge rule; its errors come with the plan."""
    from gpuready.containerd.document import load_config
    from gpuready.errors import GpureadyError
    from gpuready.node import Node

    try:
        return load_config(path, node=Node(root)).data.get("version")
    except GpureadyError:
        return None


def drop_in(request: requests.AnyRequest):
    """The drop-in ``--drop-in [PATH]`` names, or None to register in the main file."""
    from pathlib import Path

    from gpuready.containerd.dropin import drop_in_target

    if getattr(request, "drop_in", None) is None:
        return None
    return drop_in_target(request.drop_in or None, root=Path(request.root),
                          main=config_path(request))


def report(plans, written, *, dry_run: bool) -> dict:
    """The outcome of a change to several files, as data (the JSON form)."""
    from gpuready.containerd.record import is_bookkeeping, is_record
    from gpuready.fsio import backup_path

    shown = [plan for plan in plans if not is_record(plan)]
    written_paths = {plan.path for plan in written}
    files = [
        {
            "file": str(plan.path),
            "changed": plan.changes,
            "written": plan.path in written_paths,
            "removed": plan.changes and plan.after is None,
            "summary": plan.summary,
            "backup": str(backup_path(plan.path))
            if plan.path in written_paths and plan.before is not None
            and plan.after is not None and backup_path(plan.path).exists() else None,
            "diff": "" if is_bookkeeping(plan) else plan.diff(),
        }
        for plan in shown
    ]
    record = next((plan for plan in plans if is_record(plan)), None)
    first = files[0] if files else {"file": None, "changed": False, "written": False,
                                    "summary": "nothing to do", "backup": None, "diff": ""}
    return {
        "status": "ok",
        # the first file's outcome at the top level, as for a single-file change
        **{key: first[key] for key in ("file", "changed", "written", "summary", "backup")},
        "diff": "".join(entry["diff"] for entry in files),
        "notes": [note for plan in shown for note in plan.notes],
        "files": files,
        "record": str(record.path) if record and record.changes else None,
        "record_removed": bool(record and record.changes and record.after is None),
    }


def print_report(report: dict, *, dry_run: bool, as_json: bool) -> None:
    """Print the outcome: each file's summary and the notes, and every diff in a dry run."""
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if dry_run and report["diff"]:
        sys.stdout.write(report["diff"])
    for entry in report["files"]:
        prefix = "would " if dry_run and entry["changed"] else ""
        state = "" if entry["changed"] else " (no change)"
        print(f"{entry['file']}: {prefix}{entry['summary']}{state}")
    for note in report["notes"]:
        print(f"note: {note}")
    for entry in report["files"]:
        if entry["backup"]:
            print(f"backup of the original: {entry['backup']}")
    if report["record"] and not dry_run:
        done = "removed" if report["record_removed"] else "kept in"
        print(f"record of what gpuready changed: {done} {report['record']}")
    from gpuready.cli.report import print_findings

    print_findings(report.get("findings", ()))
    for reason in report.get("without_effect", ()):
        print(f"gpuready: error: {reason}", file=sys.stderr)


def restart_options(request: requests.Restartable, *, expect_runtime: str | None = None,
                    gone_runtime: str | None = None):
    """The :class:`~gpuready.workflow.transaction.RestartOptions` of ``--restart``'s options."""
    from gpuready.cli.common import containerd_address
    from gpuready.workflow.transaction import RestartOptions

    return RestartOptions(
        address=containerd_address(request, default=request.address),
        command=request.restart_command,
        timeout=request.restart_timeout,
        probe=request.probe,
        probe_image=request.probe_image,
        probe_binary=request.probe_binary,
        runtime_name=getattr(request, "runtime_name", None) or "nvidia",
        expect_runtime=expect_runtime,
        gone_runtime=gone_runtime,
    )


def _restart_defaults(request: requests.Restartable) -> bool:
    """True when no restart option was given a value of its own."""
    from gpuready.cli.common import RESTART_DEFAULTS

    return all(getattr(request, name) == value for name, value in RESTART_DEFAULTS.items())


def check_restart_options(request: requests.AnyRequest) -> None:
    """Refuse restart options no transaction can run with (``--restart-timeout nan``), before
    anything is written: a bad input, exit 2. Under ``--root`` a restart needs
    ``--restart-command``: gpuready never restarts this machine's containerd for a node in a
    folder."""
    if getattr(request, "restart", False) and request.root != "/" and not request.restart_command:
        from gpuready.errors import UsageError

        raise UsageError(f"--restart under --root {request.root}: give --restart-command CMD "
                         "(how that node's containerd is restarted) and --address with its socket "
                         "inside the root; this machine's systemctl and socket are not the "
                         "node's; nothing written")
    if not hasattr(request, "restart_timeout") or _restart_defaults(request):
        return  # the defaults can drive a transaction: nothing to load the transaction for
    from gpuready.errors import UsageError
    from gpuready.workflow.transaction import options_problem

    problem = options_problem(restart_options(request))
    if problem is not None:
        raise UsageError(f"{problem}; nothing written")


def finish_pending(request: requests.AnyRequest, config=None) -> None:
    """Before a writing command changes anything: finish the ``--restart`` transaction a killed
    run left beside the config (restart and verify, or roll back) and say which.

    A dry run only says one is pending. When the node is left in no known state (containerd did
    not come back, a file was edited since), the command stops there (exit 1)."""
    from pathlib import Path

    from gpuready.node import Node
    from gpuready.workflow import journal

    config = config or config_path(request)
    out = sys.stderr if getattr(request, "format", "text") == "json" else sys.stdout
    if not journal.pending(Node(request.root), config):
        return
    from gpuready.workflow.transaction import finish_pending as finish

    if getattr(request, "dry_run", False):
        print(f"note: a --restart transaction on this node was killed before its verdict "
              f"(journal {journal.journal_path(config)}); a run without --dry-run finishes it "
              "first", file=out)
        return
    override = restart_options(request) if getattr(request, "restart", False) else None
    finished = finish(Path(request.root), config, override=override)
    if finished is None:
        return
    print("\n".join(finished.lines()), file=out)
    if not finished.settled:
        raise PendingTransactionError(f"the pending --restart transaction is not finished "
                               f"({finished.detail}); nothing else done")


def transact(
    request: requests.Restartable,
    node,
    plan: Callable[[], list],
    *,
    expect_runtime: str | None,
    gone_runtime: str | None = None,
) -> int:
    """Run the change as the ``--restart`` transaction and print its report."""
    from gpuready.workflow.transaction import run_transaction

    options = restart_options(request, expect_runtime=expect_runtime, gone_runtime=gone_runtime)
    outcome = run_transaction(node, plan, options=options, dry_run=request.dry_run)
    if request.format == "json":
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        if request.dry_run and outcome.diff:
            sys.stdout.write(outcome.diff)
        print("\n".join(outcome.lines()))
    return outcome.exit_code
