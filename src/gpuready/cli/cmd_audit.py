"""``gpuready audit``: doctor over a whole fleet of fetched node files, in parallel."""

from __future__ import annotations

import argparse

from gpuready.cli import requests
from gpuready.cli.common import add_command, add_runtime_name

DESCRIPTION = """\
Check many nodes at once and summarise: how many are clean, have warnings, have errors or could
not be read; how many nodes each rule found; the worst nodes first.

Each PATH is a node folder laid out like the node's file system (it has etc/containerd), a
folder of such node folders (what Ansible's fetch module writes: DEST/HOST/etc/containerd/...),
or a lone containerd config file (checked with the lint rules). A node folder is checked like
'gpuready doctor --root NODE': the config and its imports, RuntimeClass, CDI specs, kubelet.

Nodes are checked in parallel processes (--jobs, default: one per CPU). A progress bar is drawn
on stderr when it is a terminal. A node that cannot be read is reported as unreadable; the
others are still checked.
"""

EPILOG = """\

examples:
  ansible all -m ansible.builtin.fetch -a 'src=/etc/containerd/config.toml dest=fleet/'
  gpuready audit fleet/
  gpuready audit fleet/ --format json > audit.json
  gpuready audit node1.toml node2.toml --select runtime-not-registered
"""

DEFAULT_WORST = 20


def register(subparsers) -> None:
    """Add the ``audit`` sub-command."""
    from gpuready.cli.cmd_lint import add_rule_selection

    parser = add_command(
        subparsers,
        "audit",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="node folders, or config files")
    add_runtime_name(parser)
    add_rule_selection(parser, formats=("text", "json"))
    parser.add_argument(
        "--jobs", type=int, metavar="N", help="worker processes (default: one per CPU)"
    )
    parser.add_argument(
        "--worst",
        type=int,
        default=DEFAULT_WORST,
        metavar="N",
        help=f"how many of the worst nodes the text summary lists (default: {DEFAULT_WORST})",
    )
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Audit:
    """``audit``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Audit, vars(args))


def run(request: requests.Audit) -> int:
    """Audit the nodes; return the exit code."""
    import json
    import sys
    from pathlib import Path

    from gpuready.errors import ExitCode, UsageError
    from gpuready.fleet.audit import ProgressBar, audit, document, render_text
    from gpuready.fleet.nodes import discover
    from gpuready.rules import selection

    if request.jobs is not None and request.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    for path in request.paths:
        _require_exists(Path(path))
    sources = discover([Path(p) for p in request.paths])
    if not sources:
        raise UsageError(f"no node found in {', '.join(request.paths)} (a node folder has "
                         "etc/containerd; a fleet folder has one such folder per host)")
    summary = audit(
        sources,
        runtime_name=request.runtime_name,
        selected=selection(select=request.select, ignore=request.ignore),
        containerd_version=request.containerd_version,
        jobs=request.jobs,
        progress=ProgressBar() if ProgressBar.wanted() else None,
    )
    if request.format == "json":
        sys.stdout.write(json.dumps(document(summary), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(summary, worst=max(request.worst, 0)))
    return ExitCode.CHECK_FAILED if summary.failed else ExitCode.OK


def _require_exists(path) -> None:
    """Refuse a path that is not there (a mistyped fleet folder), naming the nearest sibling."""
    import os

    if os.path.lexists(path):
        return
    from gpuready.errors import UsageError
    from gpuready.suggest import hint

    try:
        siblings = os.listdir(path.parent)
    except OSError:
        siblings = []
    raise UsageError(f"{path}: no such file or folder{hint(path.name, siblings)}")
