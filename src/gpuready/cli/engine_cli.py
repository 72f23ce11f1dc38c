"""The ``--engine`` option, and what configure, unconfigure, lint, doctor and verify do for
Docker and CRI-O (containerd keeps its own code paths in the command modules)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DOCKER_DEFAULT_REFUSAL = """\
refusing --set-as-default without --confirm-every-pod-uses-it.
With "default-runtime": "{name}" every container on this machine, GPU or not, runs through the
NVIDIA runtime, and a problem in it (a driver upgrade, a missing library) stops them all. GPU
containers opt in instead: docker run --runtime {name} ... (or --gpus with the toolkit's hook)."""


# -- configure / unconfigure -------------------------------------------------------------------


def configure(args: argparse.Namespace, name: str) -> int:
    """``configure --engine docker|crio``: plan under the lock, then show or apply it."""
    from gpuready.containerd.gate import Intent
    from gpuready.engines import get
    from gpuready.engines.base import RuntimeChange
    from gpuready.errors import UsageError

    if args.set_as_default and not args.confirm_every_pod_uses_it:
        if name == "docker":
            raise UsageError(DOCKER_DEFAULT_REFUSAL.format(name=args.runtime_name))
        from gpuready.cli.common import SET_AS_DEFAULT_REFUSAL

        raise UsageError(SET_AS_DEFAULT_REFUSAL.format(name=args.runtime_name))
    engine = get(name)
    change = RuntimeChange(name=args.runtime_name, binary=args.binary,
                           enable_cdi=args.enable_cdi, set_as_default=args.set_as_default)
    notes = []
    if args.systemd_cgroup != "true":
        notes.append(f"--systemd-cgroup applies to containerd only; {engine.facts.title} "
                     "keeps its own cgroup driver")
    intent = Intent(confirmed=bool(args.confirm_every_pod_uses_it))

    def planner(path, node):
        from gpuready.engines.base import plan_engine_record

        plan = engine.plan_add_runtime(path, change, node=node)
        record = plan_engine_record(
            path, plan, node=node, runtime_name=args.runtime_name,
            previous_runtime=_file_runtime(name, plan.before, args.runtime_name, path))
        return [plan, record]

    return _apply(args, engine, planner, notes, intent=intent)


def unconfigure(args: argparse.Namespace, name: str) -> int:
    """``unconfigure``: remove the runtime gpuready registered."""
    from gpuready.containerd.gate import Intent
    from gpuready.engines import get

    engine = get(name)

    def planner(path, node):
        from gpuready.engines.base import plan_engine_unconfigure

        [removal] = engine.plan_remove_runtime(path, args.runtime_name, node=node)
        return plan_engine_unconfigure(path, removal, args.runtime_name, node=node)

    intent = Intent(removes=frozenset({args.runtime_name}))
    return _apply(args, engine, planner, [], intent=intent)


def _apply(args, engine, planner, notes: list[str], *, intent) -> int:
    from gpuready.containerd.gate import EngineGuard
    from gpuready.fsio import backup_path, locked
    from gpuready.node import Node

    node = Node(args.root)
    path = Path(args.config) if args.config else engine.config_path(node)
    with locked(path, node=node):
        plans = planner(path, node)
        plan = plans[0]  # the config's plan; then gpuready's own files (backup, record)
        # the never-break gate, for a dry run too: the verdict a real run would meet
        EngineGuard(engine, path, node.root, intent).enforce([plan])
        written = False if args.dry_run else _write(plans, node)
    report = {
        "status": "ok", "engine": engine.facts.name, "file": str(path), "changed": plan.changes,
        "written": written, "summary": plan.summary, "advice": None,
        "notes": [*plan.notes, *notes],
        "backup": (str(backup_path(path)) if written and plan.before is not None
                   and plan.after is not None and node.exists(backup_path(path)) else None),
        "diff": plan.diff(),
    }
    if getattr(args, "reload", False) and not args.dry_run:
        report["reload"] = _reload(args, engine, path, node)
    from gpuready.cli.report import print_configure_report

    print_configure_report(report, dry_run=args.dry_run, as_json=args.format == "json")
    if report.get("reload") and args.format != "json":
        print(f"reloaded: {report['reload']}")
    return 0


def _write(plans, node) -> bool:
    """Write (or remove) the config's plan and gpuready's own files under the held lock, all
    or nothing: the record first when it is written, last when it is removed (a run killed in
    between leaves a record the next run completes from). True when the config was written."""
    from gpuready.changeset import apply_all
    from gpuready.containerd.record import RECORD_SUFFIX

    own = [p.path for p in plans if p.path.name.endswith(RECORD_SUFFIX)]
    ordered = [*(p for p in plans if p.path in own and p.after is not None),
               *(p for p in plans if p.path not in own),
               *(p for p in plans if p.path in own and p.after is None)]
    written = apply_all(ordered, node=node, own=own)
    return plans[0] in written


def _file_runtime(name: str, text: str | None, runtime: str, path: Path) -> dict | None:
    """The entry of ``runtime`` in the file's text before gpuready changed it (None: absent)."""
    if not text:
        return None
    if name == "docker":
        from gpuready.engines.docker.config import parse_daemon_config

        entry = parse_daemon_config(text, path).runtimes().get(runtime)
    else:
        from gpuready.engines.crio.config import read_text_data, runtimes

        entry = runtimes(read_text_data(text)).get(runtime)
    if entry is None:
        return None
    return json.loads(json.dumps(entry, default=str)) if isinstance(entry, dict) else {}


def _reload(args, engine, path: Path, node) -> str:
    from gpuready.errors import UsageError

    if engine.facts.name != "docker":
        raise UsageError(f"--reload is for --engine docker; restart {engine.facts.title} "
                         "yourself (gpuready does not run it)")
    from gpuready.engines.docker.config import load_daemon_config
    from gpuready.engines.docker.live import reload

    live, note = reload(args.docker_address, load_daemon_config(path, node=node))
    loaded = (f"dockerd {live.version} at {args.docker_address} has runtimes "
              f"{', '.join(sorted(live.runtimes))} (default {live.default_runtime})")
    return f"{loaded}; note: {note}" if note else loaded


# -- lint / doctor ------------------------------------------------------------------------------


def lint(args: argparse.Namespace, name: str, *, doctor: bool) -> int:
    """``lint``/``doctor`` with ``--engine docker|crio``."""
    from gpuready.errors import ExitCode, UsageError
    from gpuready.reporting import render
    from gpuready.rules import selection
    from gpuready.rules.context import Options

    if getattr(args, "fix", False):
        raise UsageError(f"--fix repairs containerd configs only; edit the {name} file by hand")
    selected = selection(select=args.select, ignore=args.ignore)
    options = Options(runtime_name=args.runtime_name, root=Path(args.root))
    explicit = [Path(f) for f in getattr(args, "files", None) or ()]
    if getattr(args, "config", None):
        explicit.append(Path(args.config))
    if name == "docker":
        report = _lint_docker(args, explicit, options, selected)
    else:
        from gpuready.engines.crio.lint import lint_crio, node_paths

        report = lint_crio(explicit or node_paths(options.node), options=options,
                           selected=selected)
    command = "doctor" if doctor else "lint"
    print(render(args.format, report.problems, files=report.files, command=command), end="")
    return ExitCode.CHECK_FAILED if report.failed else ExitCode.OK


def _lint_docker(args, explicit, options, selected):
    from gpuready.engines.docker.facts import DAEMON_JSON
    from gpuready.engines.docker.installed import installed_release, parse_release
    from gpuready.engines.docker.lint import lint_daemon_json
    from gpuready.errors import UsageError
    release = None
    if getattr(args, "docker_version", None):
        release = parse_release(f"version {args.docker_version}")
        if release is None:
            raise UsageError(f"--docker-version {args.docker_version!r}: expected X.Y")
    elif Path(args.root).resolve() == Path("/"):
        release = installed_release()
    paths = explicit or [options.node.path(DAEMON_JSON)]
    return lint_daemon_json(paths, options=options, selected=selected, release=release)


# -- verify -------------------------------------------------------------------------------------


def verify(args: argparse.Namespace, name: str) -> int:
    """``verify --live --engine docker``: ask dockerd, compare with daemon.json, probe."""
    from gpuready.errors import ExitCode, UsageError

    if name == "crio":
        raise UsageError("verify --live is not available for CRI-O: gpuready checks CRI-O's "
                         "files (lint, doctor --engine crio) but does not claim live verification")
    if not args.live:
        raise UsageError("verify needs --live (it asks the running dockerd)")
    from gpuready.engines.docker.config import load_daemon_config
    from gpuready.engines.docker.facts import DAEMON_JSON
    from gpuready.engines.docker.live import (
        DockerReport,
        compare,
        daemon_pid,
        live_state,
        run_probe,
    )
    from gpuready.node import Node

    node = Node(args.root)
    path = Path(args.config) if args.config else node.path(DAEMON_JSON)
    config = load_daemon_config(path, node=node)
    address = args.docker_address
    live = live_state(address, timeout=args.timeout)
    report = DockerReport(address=address, config_path=path, live=live, pid=daemon_pid(address),
                          checks=compare(config, live, runtime_name=args.runtime_name))
    if args.probe:
        report.probe = run_probe(address, runtime=args.runtime_name,
                                 binary=Path(args.probe_binary), timeout=args.probe_timeout)
    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(docker_lines(report)))
    return ExitCode.OK if report.ok else ExitCode.CHECK_FAILED


def docker_lines(report) -> list[str]:
    """The human-readable Docker report."""
    live = report.live
    pid = f", pid {report.pid}" if report.pid else ""
    lines = [f"dockerd {live.version} at {report.address}{pid}; cgroup driver "
             f"{live.cgroup_driver}; compared with {report.config_path}", "live runtimes:"]
    for name, value in sorted(live.runtimes.items()):
        marker = " (default)" if name == live.default_runtime else ""
        lines.append(f"  {name + marker:<28}{value.get('path', '-')}")
    lines += [f"{check.outcome.value:<8}{check.message}" for check in report.checks]
    if report.probe:
        probe = report.probe
        outcome = "ok" if probe.ok and probe.removed else "failed"
        cleanup = "; removed" if probe.removed else f"; {probe.cleanup_error}"
        lines.append(f"{'probe':<8}{outcome}: {probe.message} ({probe.seconds:g}s){cleanup}")
    lines.append(f"status: {'ok' if report.ok else 'failed'}")
    return lines


