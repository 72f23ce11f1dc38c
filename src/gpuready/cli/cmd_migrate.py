"""``gpuready migrate --to 3|4``: upgrade a config and its imports, keeping comments and layout."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests

DESCRIPTION = """\
Upgrade a version 1, 2 or 3 containerd config, and every file it imports, to version 3
(containerd 2.0 to 2.2) or 4 (containerd 2.3) the way containerd's own migration does:
plugin IDs for version 1 names; the CRI plugin split into io.containerd.cri.v1.runtime,
io.containerd.cri.v1.images (sandbox_image becomes pinned_images.sandbox) and the streaming
server; the plugins containerd 2.0 renamed under their new IDs (io.containerd.internal.v1.restart
becomes io.containerd.monitor.container.v1.restart, io.containerd.monitor.v1.cgroups
io.containerd.monitor.task.v1.cgroups); for version 4 the [grpc], [ttrpc], [metrics] and
[debug] address settings as server plugins (an empty one is left to the plugin's default).
Unlike 'containerd config migrate', comments, order and quoting stay, no default is spelled out,
and imported files are migrated too. A setting the newer version no longer has (plugin_dir,
sched_core, the runc option CriuPath, the shim v1 and aufs plugins) is dropped when it is empty
or holds what containerd 1.x's 'config default' writes, and refused by name otherwise; empty
registry maps and [proxy_plugins] are left out, as containerd's own migration does.
"""

EPILOG = """\
examples:
  gpuready migrate --to 3 --dry-run
  gpuready migrate --to 4 --config /etc/containerd/config.toml
  gpuready migrate --to 3 --restart
"""


def register(subparsers) -> None:
    """Add the ``migrate`` command."""
    parser = common.add_command(
        subparsers,
        "migrate",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("--to", type=int, choices=(3, 4), required=True,
                        help="the config version to reach: 3 (containerd 2.0-2.2) or 4 (2.3)")
    common.add_root_and_config(parser)
    common.add_containerd_version(parser)
    common.add_dry_run(parser)
    common.add_restart(parser)
    common.add_format(parser)
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Migrate:
    """``migrate``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Migrate, vars(args))


def run(request: requests.Migrate) -> int:
    """Plan every file under the locks, then show or apply (or run the transaction)."""
    from gpuready.changeset import check, locked_all
    from gpuready.cli import daytwo
    from gpuready.workflow.daytwo import plan_migrate_node, write

    daytwo.check_restart_options(request)
    node = daytwo.node_config(request)
    daytwo.finish_pending(request, node.config)
    if request.restart:
        return daytwo.transact(request, node, lambda: plan_migrate_node(node, to=request.to),
                               expect_runtime=None)
    plans = plan_migrate_node(node, to=request.to)
    with locked_all([plan.path for plan in plans], node=node.node):
        plans = plan_migrate_node(node, to=request.to)
        if request.dry_run:
            check(plans)  # the never-break gate's verdict, as a real run would meet it
        written = [] if request.dry_run else write(plans, node=node)
    report = daytwo.report(plans, written, dry_run=request.dry_run)
    daytwo.print_report(report, dry_run=request.dry_run, as_json=request.format == "json")
    return 0
