"""``gpuready configure``: register the NVIDIA runtime in an existing containerd config."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests

DESCRIPTION = """\
Register the NVIDIA runtime in containerd's config.toml at the table its 'version' reads
(1: plugins.cri, 2: plugins."io.containerd.grpc.v1.cri", 3 and 4:
plugins."io.containerd.cri.v1.runtime"), starting from runc's table so the runtime inherits
runtime_type and the cgroup driver, then setting options.BinaryName and options.SystemdCgroup.

Every byte gpuready does not own stays as it was: comments, key order, blank lines, quoting.
A second run reports "already registered" and does not touch the file. Writes are atomic, locked,
and keep a backup of the file as it was before gpuready first changed it (<file>.gpuready.bak).
"""

EPILOG = """\
default runtime:
  default_runtime_name is never changed: GPU pods opt in with a RuntimeClass whose handler is the
  runtime's name, so a problem in the NVIDIA runtime cannot spread to every pod on the node.
  --set-as-default exists for the rare node that needs it and is refused without
  --confirm-every-pod-uses-it. So is any edit that changes how the default runtime (runc
  when unset) runs -- its runtime_type, BinaryName or SystemdCgroup -- such as
  --runtime-name runc.

in place or drop-in:
  By default the runtime goes into the config itself. With --drop-in [PATH] it goes into a file
  of its own (default /etc/containerd/conf.d/99-nvidia.toml) and the config gets one imports
  entry, unless an existing entry (a glob) already covers it. containerd 2.x merges an import key
  by key, so the drop-in holds only the runtime; 1.x replaces the whole CRI table from an import,
  so there the drop-in carries a copy of it and shadows the main file's CRI section (run
  configure --drop-in again after editing it). 'gpuready show-config' prints what containerd
  builds from both; 'gpuready unconfigure' takes either back.

never break the node:
  Before anything is written (and in --dry-run), the change is judged on the node's containerd
  line (--containerd-version; else 'containerd --version'; under --root the root's package
  database; else the config version): it is refused when a runtime loaded now would be lost,
  the CRI plugin would not load (disabled_plugins: --enable-cri; a default_runtime_name naming
  no runtime), the GPU runtime would not be loaded, or the line does not read the file's
  version. containerd 1.x drops its built-in runc once a file names any runtime: where that
  would happen, runc's table is written too, from the line's own default.

Exit 1 also when the runtime was written where containerd does not read it (no imports entry).

examples:
  gpuready configure --dry-run
  gpuready configure --config /etc/containerd/config.toml --runtime-name nvidia
  gpuready configure --enable-cdi --format json
  gpuready configure --enable-cri                  # on a node whose containerd came with Docker
  gpuready configure --drop-in --dry-run
  gpuready configure --restart --probe
  gpuready configure --restart --restart-command 'rc-service containerd restart'
  gpuready configure --engine docker --reload      # /etc/docker/daemon.json, then SIGHUP dockerd
  gpuready configure --engine crio                 # /etc/crio/crio.conf.d/99-nvidia.toml
"""



def register(subparsers) -> None:
    """Add the ``configure`` command."""
    parser = common.add_command(
        subparsers,
        "configure",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    common.add_root(parser)
    common.add_distribution(parser)
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="the containerd config to edit in place (default: where the node's owner reads: "
        "/etc/containerd/config.toml, a k3s/RKE2 template, a k0s drop-in, MicroK8s's template)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="kubespray and the GPU Operator: edit the config even though their next run "
        "rewrites it (without it, gpuready prints the values to set there and changes nothing)",
    )
    add_runtime_options(parser)
    parser.add_argument(
        "--enable-cdi",
        action="store_true",
        help="also set enable_cdi = true and cdi_spec_dirs (containerd 1.7 and later read them)",
    )
    parser.add_argument(
        "--set-as-default",
        action="store_true",
        help="make the runtime containerd's default (refused without the confirmation below)",
    )
    common.add_default_confirmation(
        parser, what="--set-as-default, or an edit of the default runtime's own table")
    parser.add_argument(
        "--reload",
        action="store_true",
        help="with --engine docker: send dockerd SIGHUP and check through its API that it "
        "loaded the runtime (dockerd reloads runtimes without a restart)",
    )
    parser.add_argument(
        "--drop-in",
        nargs="?",
        const="",
        metavar="PATH",
        help="register in a drop-in file the config imports (default path: "
        "/etc/containerd/conf.d/99-nvidia.toml); see 'in place or drop-in' below",
    )
    common.add_containerd_version(parser)

    from gpuready.cli.common import add_docker_address, add_engine

    add_engine(parser)
    add_docker_address(parser)
    common.add_dry_run(parser)
    common.add_restart(parser)
    common.add_format(parser)
    parser.set_defaults(handler=run)


def add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """The options that describe the runtime, shared with ``setup``."""
    common.add_runtime_name(parser)
    common.add_binary(parser)
    parser.add_argument(
        "--systemd-cgroup",
        choices=("true", "false", "inherit"),
        default="true",
        help="SystemdCgroup of the runtime: true (default), false, or inherit runc's setting",
    )
    parser.add_argument(
        "--enable-cri",
        action="store_true",
        help="take the CRI plugin out of disabled_plugins (Docker's containerd.io package "
        "disables it); other disabled plugins stay",
    )


def runtime_request(request: requests.Configure | requests.Setup):
    """The :class:`RuntimeRequest` the runtime options describe."""
    from gpuready.containerd.register import CgroupMode, RuntimeRequest

    return RuntimeRequest(
        name=request.runtime_name, binary=request.binary,
        systemd_cgroup=CgroupMode(request.systemd_cgroup),
        default_confirmed=request.confirm_every_pod_uses_it,
    )


def request_from(args: argparse.Namespace) -> requests.Configure:
    """``configure``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Configure, vars(args))


def run(request: requests.Configure) -> int:
    """Plan the change under the files' locks, then show it (dry run) or apply it.

    Without --drop-in and --restart the runtime goes where the node's owner reads it; with
    either, into containerd's own config (plain containerd, or --config).
    """
    from gpuready.cli import daytwo
    from gpuready.errors import UsageError

    daytwo.check_restart_options(request)
    engine = common.engine_name(request, config=request.config)
    if engine != "containerd":
        from gpuready.cli import engine_cli

        return engine_cli.configure(request, engine)
    if request.reload:
        raise UsageError("--reload is for --engine docker: restart containerd to load the change")
    if request.set_as_default and not request.confirm_every_pod_uses_it:
        raise UsageError(common.SET_AS_DEFAULT_REFUSAL.format(name=request.runtime_name))
    change = configure_request(request)
    if request.drop_in is not None or request.restart:
        return run_day_two(request, change)
    return run_for_owner(request, change)


def run_day_two(request: requests.Configure, change) -> int:
    """``--drop-in`` and ``--restart``: containerd's own config, and the files it imports."""
    from gpuready.changeset import check, locked_all
    from gpuready.cli import daytwo
    from gpuready.errors import UsageError
    from gpuready.owners.table import EditKind
    from gpuready.workflow.daytwo import plan_configure_node, write

    owner = common.detect_owner(request).owner
    if request.config is None and owner.edit is not EditKind.IN_PLACE:
        raise UsageError(f"--drop-in and --restart work on containerd's own config, which "
                         f"{owner.name} rewrites {owner.regenerated}: run configure without "
                         "them (it writes where the owner reads), or pass --config")
    node = daytwo.node_config(request)
    drop_in = daytwo.drop_in(request)
    daytwo.finish_pending(request, node.config)
    if request.restart:
        return daytwo.transact(
            request, node, lambda: plan_configure_node(node, change, drop_in=drop_in),
            expect_runtime=request.runtime_name,
        )
    paths = [node.config] + ([drop_in.path] if drop_in else [])
    with locked_all(paths, node=node.node):
        plans = plan_configure_node(node, change, drop_in=drop_in)
        if request.dry_run:
            check(plans)  # the verdict a real run would meet
        written = [] if request.dry_run else write(plans, node=node)
    report = daytwo.report(plans, written, dry_run=request.dry_run)
    main = next(plan for plan in plans if plan.path == node.config)
    report["without_effect"] = _without_effect(main, node.config, node=node.node,
                                               runtime_name=request.runtime_name)
    judged = next((plan for plan in plans if drop_in and plan.path == drop_in.path), main)
    report["findings"] = _findings(request, judged, node=node.node, config=node.config)
    if report["findings"]:  # the node's one cgroup verdict is the finding, not a note as well
        report["notes"] = _without_cgroup_notes(report["notes"])
    if report["without_effect"] or report["findings"]:
        report["status"] = "failed"
    if request.enable_cdi:
        report["notes"].append(cdi_support_note(request, main.after))
    daytwo.print_report(report, dry_run=request.dry_run, as_json=request.format == "json")
    return 1 if report["without_effect"] or report["findings"] else 0


def run_for_owner(request: requests.Configure, change) -> int:
    """The runtime where the node's owner reads it; a config edited in place gets a record of
    what gpuready added, for ``unconfigure`` (planned by
    :func:`gpuready.workflow.owner_change.plan_owner_change`, which ``gpuready agent`` runs too)."""
    from pathlib import Path

    from gpuready.changeset import check, link_notes
    from gpuready.cli import daytwo
    from gpuready.fsio import backup_path, locked
    from gpuready.node import Node
    from gpuready.owners.configure import target_for_owner
    from gpuready.workflow.daytwo import NodeConfig, write
    from gpuready.workflow.owner_change import plan_owner_change

    node = Node(request.root)
    detection = common.detect_owner(request)
    daytwo.finish_pending(request)

    def plan():
        return plan_owner_change(detection, node=node, change=change, force=request.force,
                                 config=Path(request.config) if request.config else None,
                                 containerd_version=request.containerd_version)

    # the file to lock (the plan and the gate's verdicts come under the lock)
    to_lock = target_for_owner(detection, node=node, request=change, force=request.force,
                               config=Path(request.config) if request.config else None)
    with locked(to_lock, node=node):
        planned = plan()
        owned, plans, repairs = planned.owned, planned.plans, planned.repairs
        target = NodeConfig(owned.target, node.root, major=1)
        if request.dry_run:
            check(plans)  # the verdict a real run would meet
        split_links = link_notes(plans, node=node)  # before the write replaces the file
        written = [] if request.dry_run else write(plans, node=target)
    owned = owned._replace(notes=(*owned.notes, *split_links))
    changed = written and written[0].path == owned.target
    without_effect = _without_effect(owned.plan, owned.target, node=node,
                                     runtime_name=request.runtime_name) if owned.plan else []
    if planned.shadowed:
        without_effect.append(planned.shadowed)
    findings = _findings(request, owned.plan, node=node, config=owned.target) if owned.plan \
        else []
    if findings:  # the node's one cgroup verdict is the finding: no second one as a note
        owned = owned._replace(notes=_without_cgroup_notes(owned.notes))
    report = {
        "status": "failed" if without_effect or findings else "ok",
        "without_effect": without_effect,
        "findings": findings,
        "owner": detection.owner.name,
        "file": str(owned.target),
        "changed": owned.changes,
        "written": bool(changed),
        "summary": owned.summary,
        "advice": owned.advice or None,
        "notes": list(dict.fromkeys(owned.notes)),
        "backup": str(backup_path(owned.target)) if changed and owned.plan.before else None,
        "diff": owned.plan.diff() if owned.plan else "",
        "repairs": [{"file": str(plan.path), "summary": plan.summary, "diff": plan.diff(),
                     "written": any(done.path == plan.path for done in written)}
                    for plan in repairs],
        "record": str(plans[-1].path) if len(plans) > 1 and plans[-1].changes and written
        else None,
    }
    if request.enable_cdi:
        report["notes"].append(cdi_support_note(
            request, owned.plan.after if owned.plan else None))
    from gpuready.cli.report import print_configure_report

    print_configure_report(report, dry_run=request.dry_run, as_json=request.format == "json")
    return 1 if without_effect or findings else 0


def _without_effect(plan, path, *, node, runtime_name: str) -> list[str]:
    """Why containerd will not load the runtime as the file will be (empty when it will)."""
    from gpuready.rules.effect import without_effect

    return without_effect(path, plan.after, node=node, runtime_name=runtime_name)


def _findings(request: requests.Configure, plan, *, node, config) -> list[dict]:
    """What fails the first sandbox of the file ``plan`` writes (``doctor``'s finding, with its
    fix): ``SystemdCgroup = true`` on a node that shows no systemd. A ``--config`` outside the
    node's containerd folder is a working copy (drop-in and all), not judged by the node's
    facts."""
    from gpuready.rules.effect import in_containerd_folder, without_systemd

    if request.config and not in_containerd_folder(config, node=node):
        return []
    return [problem.to_dict() for problem in without_systemd(
        plan.path, plan.after, node=node, runtime_name=request.runtime_name,
        containerd_version=request.containerd_version)]


def _without_cgroup_notes(notes) -> list[str]:
    """``notes`` less lint's cgroup-driver-mismatch (said without knowing whether systemd runs)."""
    from gpuready.containerd.register import CGROUP_NOTE

    return [note for note in notes if not note.startswith(CGROUP_NOTE)]


def configure_request(request: requests.Configure):
    """The :class:`ConfigureRequest` the options describe."""
    from gpuready.containerd.configure import ConfigureRequest

    return ConfigureRequest(
        runtime=runtime_request(request),
        enable_cdi=request.enable_cdi,
        set_as_default=request.set_as_default,
        enable_cri=request.enable_cri,
    )


def cdi_support_note(request: requests.Configure, config_text: str | None) -> str:
    """What the node's containerd does with ``enable_cdi``, on the node's line as decided once
    (:func:`gpuready.containerd.lines.node_line`): ``--containerd-version`` wins over the
    installed binary, and under ``--root`` the host's containerd says nothing."""
    from gpuready.containerd.lines import node_line
    from gpuready.containerd.model import file_version

    told = node_line(root=request.root, flag=request.containerd_version,
                     config_version=file_version(config_text))
    if told.release is None:  # only the config's version spoke
        return ("enable_cdi needs containerd 1.7 or later; earlier releases ignore it "
                "(--containerd-version names the node's release)")
    if not told.line.reads_cdi:
        return (f"{told.label}: it ignores enable_cdi (CDI needs containerd 1.7 or later)")
    return f"{told.label} reads enable_cdi"
