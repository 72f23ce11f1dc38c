"""The ``--engine`` option, and what configure, unconfigure, lint, doctor and verify do for
Docker and CRI-O (containerd keeps its own code paths in the command modules)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

DOCKER_DEFAULT_REFUSAL = """\
refusing --set-as-default without --confirm-every-pod-uses-it.
With "default-runtime": "{name}" every container on this machine, GPU or not, runs through the
NVIDIA runtime, and a problem in it (a driver upgrade, a missing library) stops them all. GPU
containers opt in instead: docker run --runtime {name} ... (or --gpus with the toolkit's hook)."""

if TYPE_CHECKING:
    from gpuready.cli import requests


def docker_address(request: requests.AnyRequest):
    """The :class:`~gpuready.engines.docker.address.DockerAddress` of dockerd: ``--address`` (or
    ``--docker-address``) when given, else ``DOCKER_HOST``, else the default socket; a value
    that is not ``unix:///PATH`` is a usage error (exit 2) naming where it came from. Under
    ``--root`` the socket's path lies inside the root."""
    from gpuready.cli.common import node_socket
    from gpuready.engines.docker.address import resolve

    flag = getattr(request, "engine_address_flag", None) or "--address"
    found = resolve(getattr(request, "engine_address", None), flag=flag)
    # under --root, dockerd's socket is the node's, inside the root
    return found._replace(address=node_socket(request.root, found.address, option=flag))


# -- configure / unconfigure -------------------------------------------------------------------


def configure(request: requests.Configure, name: str) -> int:
    """``configure --engine docker|crio``: plan under the lock, then show or apply it."""
    from gpuready.containerd.gate import Intent
    from gpuready.engines import get
    from gpuready.engines.base import RuntimeChange
    from gpuready.errors import UsageError

    if request.set_as_default and not request.confirm_every_pod_uses_it:
        if name == "docker":
            raise UsageError(DOCKER_DEFAULT_REFUSAL.format(name=request.runtime_name))
        from gpuready.cli.common import SET_AS_DEFAULT_REFUSAL

        raise UsageError(SET_AS_DEFAULT_REFUSAL.format(name=request.runtime_name))
    engine = get(name)
    change = RuntimeChange(name=request.runtime_name, binary=request.binary,
                           enable_cdi=request.enable_cdi, set_as_default=request.set_as_default)
    notes = []
    if request.systemd_cgroup != "true":
        notes.append(f"--systemd-cgroup applies to containerd only; {engine.facts.title} "
                     "keeps its own cgroup driver")
    intent = Intent(confirmed=bool(request.confirm_every_pod_uses_it))

    def planner(path, node):
        from gpuready.engines.base import plan_engine_record

        plan = engine.plan_add_runtime(path, change, node=node)
        record = plan_engine_record(
            path, plan, node=node, runtime_name=request.runtime_name,
            previous_runtime=_file_runtime(name, plan.before, request.runtime_name, path))
        return [plan, record]

    check = _docker_check_before_write if name == "docker" else None
    return _apply(request, engine, planner, notes, intent=intent, check=check)


def _docker_check_before_write(request: requests.Configure, plan, node) -> list[str]:
    """Judge the daemon.json about to be written as the node's dockerd would (its own
    ``--validate`` on this machine, else the key table of its release): a refusal raises, doubts
    are returned as notes."""
    from gpuready.engines.docker.lint import check_before_write
    from gpuready.rules.context import Options

    if plan.after is None:
        return []
    on_host = Path(request.root).resolve() == Path("/")
    release = None
    if on_host:
        from gpuready.engines.docker.installed import installed_release

        release = installed_release()
    return check_before_write(plan.after, plan.path, options=Options(root=Path(request.root)),
                              release=release, ask_dockerd=on_host)


def unconfigure(request: requests.Unconfigure, name: str) -> int:
    """``unconfigure``: remove the runtime gpuready registered."""
    from gpuready.containerd.gate import Intent
    from gpuready.engines import get
    from gpuready.engines.base import recorded_engine_runtimes
    from gpuready.node import Node

    engine = get(name)

    def remover(path, runtime, node):
        [removal] = engine.plan_remove_runtime(path, runtime, node=node)
        return removal

    def planner(path, node):
        from gpuready.containerd.record import is_record
        from gpuready.engines.base import plan_engine_unconfigure

        plans = plan_engine_unconfigure(path, remover, request.runtime_name, node=node)
        record_goes = any(is_record(plan) and plan.after is None for plan in plans)
        if name == "docker" and record_goes:  # a runtime taken back alone keeps the backup
            from gpuready.engines.docker.engine import plan_leftovers

            plans = plan_leftovers(path, plans, node=node)
        return plans

    if name == "docker":
        _require_daemon_json(request, engine)
    node = Node(request.root)
    path = Path(request.config) if request.config else engine.config_path(node)
    removes = ({request.runtime_name} if request.runtime_name
               else set(recorded_engine_runtimes(path, node=node)))
    return _apply(request, engine, planner, [], intent=Intent(removes=frozenset(removes)))


def _require_daemon_json(request: requests.AnyRequest, engine) -> None:
    """``unconfigure --engine docker`` on a node without daemon.json: bad input (exit 2), as for
    containerd's config, with what dockerd runs without one."""
    from gpuready.errors import MissingFileError
    from gpuready.node import FileKind, Node

    node = Node(request.root)
    path = Path(request.config) if request.config else engine.config_path(node)
    if not node.lexists(path):
        raise MissingFileError(path, node.missing_reason(path, FileKind.DOCKER_CONFIG))


def _apply(request, engine, planner, notes: list[str], *, intent, check=None) -> int:
    from gpuready.changeset import link_notes
    from gpuready.containerd.gate import EngineGuard
    from gpuready.fsio import backup_path, locked
    from gpuready.node import Node

    node = Node(request.root)
    path = Path(request.config) if request.config else engine.config_path(node)
    reloading = getattr(request, "reload", False) and not request.dry_run
    # a bad DOCKER_HOST or --address, or no dockerd there, stops here: nothing written
    address = _reload_address(request, engine) if reloading else None
    with locked(path, node=node):
        plans = planner(path, node)
        plan = plans[0]  # the config's plan; then gpuready's own files (backup, record)
        # the never-break gate, for a dry run too: the verdict a real run would meet
        EngineGuard(engine, path, node.root, intent).enforce([plan])
        if check is not None:
            notes = [*notes, *check(request, plan, node)]
        notes = [*notes, *link_notes([plan], node=node)]  # before the write replaces the file
        written, backups = ([], []) if request.dry_run else _write(plans, node)
        reloaded = _reload(address, path, node, written, backups) if reloading else None
    report = {
        "status": "ok", "engine": engine.facts.name, "file": str(path), "changed": plan.changes,
        "written": plan in written, "summary": plan.summary, "advice": None,
        "notes": [*plan.notes, *notes],
        "backup": (str(backup_path(path)) if plan in written and plan.before is not None
                   and plan.after is not None and node.exists(backup_path(path)) else None),
        "diff": plan.diff(),
    }
    if reloaded is not None:
        report["reload"] = reloaded
        report["address"] = address.address
        report["address_source"] = address.source
    from gpuready.cli.report import print_configure_report

    print_configure_report(report, dry_run=request.dry_run, as_json=request.format == "json")
    if reloaded is not None and request.format != "json":
        print(f"reloaded: {reloaded}")
    return 0


def _write(plans, node) -> tuple[list, list[Path]]:
    """Write (or remove) the config's plan and gpuready's own files under the held lock, all
    or nothing: the record first when it grows, last when it is removed or shrinks (a run
    killed in between leaves a record the next run completes from). Returns the plans written
    and the backups the write created (what :func:`gpuready.changeset.put_back` takes back)."""
    from gpuready.changeset import apply_all, new_backups
    from gpuready.containerd.record import RECORD_SUFFIX
    from gpuready.workflow.daytwo import journal_order

    own = [p.path for p in plans if p.path.name.endswith(RECORD_SUFFIX)]
    ordered = journal_order(plans)
    backups = new_backups([p for p in ordered if p.path not in own], node=node)
    return apply_all(ordered, node=node, own=own), backups


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


def _reload_address(request: requests.AnyRequest, engine):
    """dockerd's address for ``--reload`` (which only Docker has)."""
    from gpuready.errors import UsageError

    if engine.facts.name != "docker":
        raise UsageError(f"--reload is for --engine docker; restart {engine.facts.title} "
                         "yourself (gpuready does not run it)")
    from gpuready.engines.docker.live import reload_target

    address = docker_address(request)
    reload_target(address)  # dockerd answers, and its pid is known: else exit 3, nothing written
    return address


def _reload(address, path: Path, node, written: list, backups: list[Path]) -> str:
    """SIGHUP dockerd and check it took the file. A reload it refused (no reload event came)
    puts back every file this run wrote (the config byte for byte, gpuready's record, and the
    backup it made) under the lock still held, and fails (exit 1) with dockerd's reason. Once
    the reload event came, the file is what dockerd loaded: nothing is put back, and a failure to
    confirm what it loaded fails with the files kept (exit 3 when dockerd became unreachable,
    else 1)."""
    from gpuready.engines.docker.config import load_daemon_config
    from gpuready.engines.docker.live import ReadBackError, ReloadError, await_reload, read_back

    try:
        config = load_daemon_config(path, node=node)
        pid = await_reload(address, config)
    except BaseException as error:  # refused, dockerd gone meanwhile, or Ctrl-C: undo the run
        from gpuready.changeset import put_back

        put_back(written, node=node, backups=backups)
        if not isinstance(error, ReloadError):
            raise
        undone = (f"{path} put back byte for byte, nothing left changed" if written else
                  "this run had written nothing")
        raise ReloadError(f"{error.message()}; {undone}") from None
    try:
        live, note = read_back(address, config, pid=pid)
    except ReadBackError as error:
        kept = (f"{path} kept as written, not put back: dockerd's reload event came" if written
                else "this run had written nothing")
        raise ReadBackError(f"{error.message()}; {kept}", error.exit_code) from None
    loaded = (f"dockerd {live.version} at {address.shown()} has runtimes "
              f"{', '.join(sorted(live.runtimes))} (default {live.default_runtime})")
    return f"{loaded}; note: {note}" if note else loaded


# -- lint / doctor ------------------------------------------------------------------------------


def lint(request: requests.Lint | requests.Doctor, name: str, *, doctor: bool) -> int:
    """``lint``/``doctor`` with ``--engine docker|crio``."""
    from gpuready.errors import ExitCode, UsageError
    from gpuready.reporting import render
    from gpuready.rules import selection
    from gpuready.rules.context import Options

    if getattr(request, "fix", False):
        raise UsageError(f"--fix repairs containerd configs only; edit the {name} file by hand")
    selected = selection(select=request.select, ignore=request.ignore)
    options = Options(runtime_name=request.runtime_name, root=Path(request.root))
    explicit = [Path(f) for f in getattr(request, "files", None) or ()]
    if getattr(request, "config", None):
        explicit.append(Path(request.config))
    release = None
    if name == "docker":
        release = _docker_release(request)
        report = _lint_docker(request, explicit, options, selected, release)
    else:
        from gpuready.engines.crio.lint import lint_crio, node_paths

        report = lint_crio(explicit or node_paths(options.node), options=options,
                           selected=selected)
    if doctor:  # the node's CDI story: does the engine read the specs, which one wins, stale
        from gpuready.rules.cdi_node import engine_problems

        report.problems += [problem for problem in engine_problems(
            options.node, name, docker_release=release) if problem.rule in selected]
    command = "doctor" if doctor else "lint"
    print(render(request.format, report.problems, files=report.files, command=command), end="")
    return ExitCode.CHECK_FAILED if report.failed else ExitCode.OK


def _docker_release(request):
    """Docker's release: ``--docker-version``, else the installed dockerd's on this machine, else
    None (unknown: a node in a folder)."""
    from gpuready.engines.docker.installed import installed_release, parse_release
    from gpuready.errors import UsageError

    if getattr(request, "docker_version", None):
        release = parse_release(f"version {request.docker_version}")
        if release is None:
            raise UsageError(f"--docker-version {request.docker_version!r}: expected X.Y")
        return release
    return installed_release() if Path(request.root).resolve() == Path("/") else None


def _lint_docker(request, explicit, options, selected, release):
    from gpuready.engines.docker.facts import DAEMON_JSON
    from gpuready.engines.docker.lint import lint_daemon_json

    paths = explicit or [options.node.path(DAEMON_JSON)]
    return lint_daemon_json(paths, options=options, selected=selected, release=release)


# -- verify -------------------------------------------------------------------------------------


def verify(request: requests.Verify, name: str) -> int:
    """``verify --live --engine docker``: ask dockerd, compare with daemon.json, probe."""
    from gpuready.errors import ExitCode, UsageError

    if name == "crio":
        raise UsageError("verify --live is not available for CRI-O: gpuready checks CRI-O's "
                         "files (lint, doctor --engine crio) but does not claim live verification")
    if not request.live:
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

    address = docker_address(request)  # a bad DOCKER_HOST or --address first: a usage error
    node = Node(request.root)
    path = Path(request.config) if request.config else node.path(DAEMON_JSON)
    config = load_daemon_config(path, node=node)
    live = live_state(address, timeout=request.timeout)
    report = DockerReport(address=address.address, config_path=path, live=live,
                          pid=daemon_pid(address), address_source=address.source,
                          checks=compare(config, live, runtime_name=request.runtime_name))
    if request.probe:
        report.probe = run_probe(address, runtime=request.runtime_name,
                                 binary=Path(request.probe_binary), timeout=request.probe_timeout)
    if request.format == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(docker_lines(report)))
    return ExitCode.OK if report.ok else ExitCode.CHECK_FAILED


def docker_lines(report) -> list[str]:
    """The human-readable Docker report."""
    live = report.live
    pid = f", pid {report.pid}" if report.pid else ""
    shown = (f"{report.address} (from {report.address_source})"
             if report.address_source == "DOCKER_HOST" else report.address)
    lines = [f"dockerd {live.version} at {shown}{pid}; cgroup driver "
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


