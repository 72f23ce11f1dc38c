"""``gpuready unconfigure``: remove the runtime ``configure`` registered."""

from __future__ import annotations

import argparse

from gpuready.cli import common

DESCRIPTION = """\
Remove the runtime 'gpuready configure' registered, keeping every other byte: for Docker the
runtimes entry in daemon.json (and "runtimes" when it is left empty, and a "default-runtime"
naming it, which dockerd would refuse); for CRI-O its table in the drop-in. A file gpuready
changed and nobody edited since gets its original bytes back. A second run changes nothing.
"""

EPILOG = """\
exit codes:
  0  removed, or nothing to remove
  2  bad input (unreadable or invalid file); nothing was written

examples:
  gpuready unconfigure --engine docker --reload
  gpuready unconfigure --engine crio --dry-run
"""


def register(subparsers) -> None:
    """Add the ``unconfigure`` command."""
    from gpuready.cli.engine_cli import add_docker_address, add_engine

    parser = common.add_command(
        subparsers,
        "unconfigure",
        help="remove the runtime gpuready configure registered",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    common.add_root(parser)
    parser.add_argument(
        "--config", metavar="PATH",
        help="the file to edit (default: the engine's file under --root)",
    )
    common.add_runtime_name(parser)
    add_engine(parser)
    add_docker_address(parser)
    parser.add_argument(
        "--reload", action="store_true",
        help="with --engine docker: SIGHUP dockerd and check through its API that the runtime "
        "is gone",
    )
    common.add_dry_run(parser)
    common.add_format(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Plan under the file's lock, then show or apply."""
    from gpuready.cli import engine_cli

    return engine_cli.unconfigure(args, engine_cli.engine_name(args, config=args.config))
