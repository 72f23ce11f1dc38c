"""``gpuready unconfigure``: take back exactly what ``configure`` or ``setup`` added (containerd,
from their record), or remove the runtime ``configure`` registered (Docker, CRI-O)."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests

DESCRIPTION = """\
Remove exactly what 'gpuready configure' or 'gpuready setup' added, as the record beside the
config says (<config>.gpuready.json): the runtime table, the drop-in, the imports entry, enable_cdi
and cdi_spec_dirs if it set them; a default_runtime_name it changed gets its old value back.
On a node whose containerd belongs to an owner (k3s, RKE2, k0s, MicroK8s) the record is beside
the file they wrote for it (a template, a k0s drop-in), found through the same owner detection
as theirs (--distribution overrides it); the owner applies the change at its next start.
The files setup wrote (a config it created from a base, the CDI spec, runtimeclass.yaml, the
toolkit files) are removed, or get their original back, while they still hold what gpuready
wrote; one edited since is left as it is, and the output says so.

With --runtime-name NAME only that runtime goes (its table, and a default_runtime_name gpuready
set to it; a drop-in that held only it, with its imports entry), and only its part of the
record; what gpuready added for the other runtimes stays. A name the record does not hold is
refused (exit 2), naming the runtimes it does hold.

When a file is unchanged since gpuready wrote it, its original comes back byte for byte (a drop-in
gpuready created is removed, and the folders it created for it, such as conf.d/, once empty).
When the operator edited it meanwhile, only gpuready's own parts go, and a setting changed since
is left alone. Without a record there is nothing to do: gpuready never guesses what it added. A
second run finds no record and changes nothing.

For Docker (--engine docker) the runtimes entry in daemon.json goes (and "runtimes" when it is
left empty, and a "default-runtime" naming it, which dockerd would refuse); for CRI-O its table
in the drop-in. A file gpuready changed and nobody edited since gets its original bytes back;
a daemon.json or drop-in gpuready created, left empty, is removed.

For every engine, the systemd units 'gpuready cdi refresh --install-units' wrote go too, as their
record beside them says, with the 'systemctl enable' links to them; a unit edited since stays.
"""

EPILOG = """\
examples:
  gpuready unconfigure --dry-run
  gpuready unconfigure --restart --restart-command 'systemctl restart containerd'
  gpuready unconfigure --engine docker --reload
  gpuready unconfigure --engine crio --dry-run
"""


def register(subparsers) -> None:
    """Add the ``unconfigure`` command."""
    parser = common.add_command(
        subparsers,
        "unconfigure",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    from gpuready.cli.common import add_docker_address, add_engine

    common.add_root_and_config(parser)
    common.add_distribution(parser)
    common.add_runtime_to_remove(parser)
    add_engine(parser)
    add_docker_address(parser)
    parser.add_argument(
        "--reload", action="store_true",
        help="with --engine docker: SIGHUP dockerd and check through its API that the runtime "
        "is gone",
    )
    common.add_containerd_version(parser)
    common.add_dry_run(parser)
    common.add_restart(parser)
    common.add_format(parser)
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Unconfigure:
    """``unconfigure``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Unconfigure, vars(args))


def run(request: requests.Unconfigure) -> int:
    """Plan under the files' locks, then show or apply."""
    from gpuready.changeset import check, locked_all
    from gpuready.cli import daytwo
    from gpuready.containerd.record import load_record
    from gpuready.errors import UsageError
    from gpuready.workflow.daytwo import plan_unconfigure_node, write

    daytwo.check_restart_options(request)
    require_units_record(request)
    engine = common.engine_name(request, config=request.config)
    if engine != "containerd":
        from gpuready.cli import engine_cli

        return unconfigure_units(request, engine_cli.unconfigure(request, engine))
    if request.reload:
        raise UsageError("--reload is for --engine docker: use --restart for containerd")
    owned = owned_targets(request)
    if owned is not None:
        return unconfigure_units(request, unconfigure_owned(request, *owned))
    node = daytwo.node_config(request)
    daytwo.finish_pending(request, node.config)
    record = load_record(node.config, node=node.node)
    if record is None and not node.node.lexists(node.config):
        from gpuready.errors import MissingFileError
        from gpuready.node import FileKind

        raise MissingFileError(node.config, node.node.missing_reason(node.config, FileKind.CONFIG))
    runtime = request.runtime_name
    if request.restart:
        runtimes = [s["name"] for s in (record or {}).get("settings", []) if s["kind"] == "runtime"]
        return unconfigure_units(request, daytwo.transact(
            request, node, lambda: plan_unconfigure_node(node, runtime=runtime),
            expect_runtime=None, gone_runtime=runtime or (runtimes[0] if runtimes else None),
        ))
    from pathlib import Path

    paths = [node.config] + [Path(name) for name in (record or {}).get("files", {})]
    with locked_all(paths, node=node.node):
        plans = plan_unconfigure_node(node, runtime=runtime)
        if request.dry_run:
            check(plans)  # the never-break gate's verdict, as a real run would meet it
        written = [] if request.dry_run else write(plans, node=node)
    report = daytwo.report(plans, written, dry_run=request.dry_run)
    if not plans:
        report["summary"] = f"nothing recorded for {node.config}: nothing to remove"
        report["file"] = str(node.config)
    daytwo.print_report(report, dry_run=request.dry_run, as_json=request.format == "json")
    if not plans and request.format != "json":
        print(report["summary"])
    return unconfigure_units(request, 0)


def owned_targets(request: requests.Unconfigure):
    """On a node whose containerd belongs to an owner (k3s, RKE2, k0s, MicroK8s...): the owner's
    detection and the files gpuready kept a record for, found through the owner table as
    ``configure`` writes them (``--config`` naming one of the owner's inputs: that file). None
    where ``unconfigure`` works on containerd's own config, as for plain containerd."""
    import os
    from pathlib import Path

    from gpuready.node import Node
    from gpuready.owners.records import is_owner_input, recorded_targets
    from gpuready.owners.table import EditKind
    from gpuready.paths import CONTAINERD_CONFIG

    node = Node(request.root)
    detection = common.detect_owner(request)
    owner = detection.owner
    if request.config:
        config = Path(os.path.abspath(request.config))
        return (detection, [config]) if is_owner_input(config, owner, node) else None
    if owner.edit is EditKind.IN_PLACE:
        return None
    targets = recorded_targets(owner, node)
    default = node.path(CONTAINERD_CONFIG)
    if set(targets) <= {default} and node.lexists(default):
        return None  # containerd's own config (kubespray's, edited with --force): as ever
    return detection, targets


def unconfigure_owned(request: requests.Unconfigure, detection, targets) -> int:
    """Take back what the records beside ``targets`` say gpuready wrote: an owner's input (a
    template, a drop-in) gets its original bytes back, or goes with the folders gpuready created
    for it; a config containerd reads as it is (``--force``, ``--config``) is judged by the
    never-break gate as ever. The owner applies the change at its next start."""
    from functools import partial
    from pathlib import Path

    from gpuready.changeset import check, locked_all
    from gpuready.cli import daytwo
    from gpuready.containerd.record import load_record
    from gpuready.containerd.unconfigure import plan_unconfigure
    from gpuready.errors import UsageError
    from gpuready.node import Node
    from gpuready.owners.records import is_owner_input, owner_inputs, remover_for
    from gpuready.workflow.daytwo import NodeConfig, plan_unconfigure_node, write

    owner = detection.owner
    node = Node(request.root)
    if request.restart:
        raise UsageError(f"--restart works on containerd's own config; {owner.name} applies "
                         f"this change at its next start ({owner.apply})")
    plans, written = [], []
    for path in targets:
        if is_owner_input(path, owner, node):
            config = NodeConfig(path, node.root, major=1)  # not read by containerd as it is
            planner = partial(plan_unconfigure, path, node=node, remove=remover_for(owner),
                              runtime=request.runtime_name)
        else:
            config = daytwo.node_config(request._replace(config=str(path)))
            daytwo.finish_pending(request, path)
            planner = partial(plan_unconfigure_node, config, runtime=request.runtime_name)
        record = load_record(path, node=node) or {}
        with locked_all([path, *(Path(name) for name in record.get("files", {}))], node=node):
            planned = planner()
            if request.dry_run:
                check(planned)  # the never-break gate's verdict, as a real run would meet it
            written += [] if request.dry_run else write(planned, node=config)
        plans += planned
    report = daytwo.report(plans, written, dry_run=request.dry_run)
    report["owner"] = owner.name
    if not plans:
        shown = ", ".join(str(path) for path in owner_inputs(owner, node)) or str(
            node.path(owner.config))
        report["summary"] = f"nothing recorded for {shown}: nothing to remove"
        report["file"] = shown
    elif any(plan.changes and is_owner_input(plan.path, owner, node) for plan in plans):
        report["notes"].append(f"{owner.name} reads the change at its next start, until then "
                               f"{owner.config} keeps what it has: {owner.apply}")
    daytwo.print_report(report, dry_run=request.dry_run, as_json=request.format == "json")
    if not plans and request.format != "json":
        print(report["summary"])
    return 0


def require_units_record(request: requests.Unconfigure) -> None:
    """Refuse, before the engine's step writes anything, a record of the units that
    :func:`unconfigure_units` would refuse after it (not valid, or one another user could have
    written): the command then changes nothing at all."""
    from gpuready.cdi import units
    from gpuready.node import Node

    node = Node(request.root)
    if node.lexists(units.record_file(node)):
        units.plan_removal(node)  # reads and checks only


def unconfigure_units(request: requests.Unconfigure, code: int) -> int:
    """Once the engine's own step succeeded (``code`` 0), remove the systemd units
    ``cdi refresh --install-units`` wrote, whatever the engine, as their record says
    (:func:`gpuready.cdi.units.plan_removal`), and the ``systemctl enable`` links to them; one
    edited since is left as it is. Each file's outcome is a line on standard output (on standard
    error with ``--format json``, whose document is the engine's). Returns ``code``."""
    import sys

    from gpuready.cdi import units
    from gpuready.changeset import apply_all, check, locked_all
    from gpuready.containerd.unconfigure import remove_empty_folders
    from gpuready.node import Node

    if code != 0:
        return code
    node = Node(request.root)
    record = units.record_file(node)
    if not node.lexists(record):
        return code
    paths = [record, node.path(units.SERVICE), node.path(units.PATH_UNIT),
             node.path(units.WANTS / units.SERVICE.name)]
    with locked_all(paths, node=node):
        removal = units.plan_removal(node)
        if removal is None:
            return code
        check(removal.plans)
        written = [] if request.dry_run else apply_all(removal.plans, node=node, own=[record])
        links = removal.links if request.dry_run else units.remove_links(removal.links, node=node)
    if any(plan.path == record for plan in written):
        remove_empty_folders(removal.folders, node=node)
    lines = [f"{plan.path}: {'would ' if request.dry_run and plan.changes else ''}{plan.summary}"
             for plan in removal.plans if units.is_unit(plan.path)]
    lines += [f"{link}: {'would remove' if request.dry_run else 'removed'} the 'systemctl enable' "
              "link to gpuready's unit" for link in links]
    if not request.dry_run:
        lines.append(f"record of the units gpuready wrote: removed {record}")
    out = sys.stderr if request.format == "json" else sys.stdout
    for line in lines:
        print(f"gpuready: {line}" if out is sys.stderr else line, file=out)
    return code
