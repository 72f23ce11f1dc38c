"""Entry point: builds the parser from the command modules and turns errors into exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from gpuready import __version__
from gpuready.cli.commands import BY_NAME, COMMANDS
from gpuready.errors import ExitCode, GpureadyError

SIGPIPE_EXIT = 141  # the shell's status for a process ended by SIGPIPE
EVERY_COMMAND = "*"  # build_parser(only=...): every command in full

DESCRIPTION = """\
Register the NVIDIA container runtime with containerd, write the CDI spec and the Kubernetes
RuntimeClass, and prove the configuration correct without a GPU.

default_runtime_name stays runc: GPU pods opt in through a RuntimeClass whose handler equals the
runtime's name, so a runtime problem cannot spread to every pod on the node.
"""

EPILOG = """\
exit codes:
  0  done, and every check passed
  1  a check or verification failed
  2  bad input or usage (nothing was written)
  3  the container runtime could not be reached

Run 'gpuready COMMAND --help' for the options of one command.
"""


def build_parser(only: str | None = EVERY_COMMAND) -> argparse.ArgumentParser:
    """The top-level parser: command ``only`` in full (every command with ``EVERY_COMMAND``,
    the default), the others as their name and summary, which is all ``--help`` and argparse's
    "invalid choice" message need. Only the modules of the commands built in full are imported.
    """
    parser = argparse.ArgumentParser(
        prog="gpuready",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpuready {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if only in (EVERY_COMMAND, command.name):
            importlib.import_module(command.module).register(subparsers)
        else:
            subparsers.add_parser(command.name, help=command.summary)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word, when that names a command (gpuready's own
    options, --help and --version, take no value, so a command is always the first word)."""
    return argv[0] if argv and argv[0] in BY_NAME else None


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen command, and return its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=chosen_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return ExitCode.BAD_INPUT
    try:
        return int(args.handler(args))
    except GpureadyError as error:
        print(f"gpuready: error: {error.message()}", file=sys.stderr)
        if getattr(args, "format", None) == "json":  # scripts still get a document to read
            import json

            print(json.dumps({"status": "error", "exit_code": int(error.exit_code),
                              "error": error.message()}, indent=2))
        return int(error.exit_code)
    except KeyboardInterrupt:
        print("gpuready: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as error:  # the outermost layer: never show a traceback to a user
        if os.environ.get("GPUREADY_DEBUG"):
            raise
        print(
            f"gpuready: internal error: {type(error).__name__}: {error} "
            "(set GPUREADY_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return ExitCode.BAD_INPUT


def _reader_gone() -> int:
    """The reader went away (``gpuready lint | head``): say nothing more, and do not claim
    success, since the verdict was never printed whole."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return SIGPIPE_EXIT


def entrypoint() -> None:
    """Console-script entry: run, flush, and exit with the command's code."""
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _reader_gone()
    sys.exit(code)
