"""``gpuready show-config``: the effective config containerd builds from the main file and its
imports, each runtime marked with the file it came from."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests

DESCRIPTION = """\
Print the config the node's containerd builds from config.toml and every file it imports, merged
the way that containerd line merges them: 1.x replaces a whole plugin table from a later file
(a drop-in holding only a runtime makes runc vanish), 2.x merges tables key by key. Each runtime
is marked with the file(s) it came from.

This is containerd's own 'config dump' without the defaults it fills in: only what the files set.
"""

EPILOG = """\
Exit 1 when a --restart transaction on the node was never finished (its journal lies beside
the config): one error line says so; nothing is restarted or changed.

examples:
  gpuready show-config
  gpuready show-config --containerd-version 2.1 --format json
  gpuready show-config --root /mnt/node-image
"""


def register(subparsers) -> None:
    """Add the ``show-config`` command."""
    parser = common.add_command(
        subparsers,
        "show-config",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    common.add_root_and_config(parser)
    common.add_containerd_version(parser)
    common.add_format(parser)
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.ShowConfig:
    """``show-config``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.ShowConfig, vars(args))


def run(request: requests.ShowConfig) -> int:
    """Merge and print."""
    import json
    import sys

    from gpuready.cli.daytwo import node_config
    from gpuready.containerd.effective import load_effective, render_effective
    from gpuready.errors import ExitCode
    from gpuready.node import Node
    from gpuready.workflow import journal

    node = node_config(request)
    effective = load_effective(node.config, root=node.root, major=node.major)
    sources = effective.runtime_sources()
    # a reading command: a killed --restart is reported, never finished
    pending = journal.pending_message(Node(node.root), node.config)
    code = ExitCode.OK if pending is None else ExitCode.CHECK_FAILED
    if request.format == "json":
        print(json.dumps({
            "status": "ok" if pending is None else "failed",
            "pending_transaction": pending,
            "config": str(node.config),
            "containerd": f"{node.major}.x",
            "files": [str(f.path) for f in effective.files],
            "missing_imports": [entry for _, entry in effective.missing],
            "runtimes": {name: [str(p) for p in paths] for name, paths in sources.items()},
            "effective": effective.data,
        }, indent=2, default=str))
        return code
    print(render_effective(effective), end="")
    if pending is not None:
        print(f"gpuready: error: {pending}; fix: {journal.PENDING_FIX}", file=sys.stderr)
    return code
