"""Entry point: builds the parser from the command modules and turns errors into exit codes."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from gpuready import __version__
from gpuready.cli.commands import BY_NAME, COMMANDS
from gpuready.cli.formatting import Formatter
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
Run 'gpuready COMMAND --help' for the options of one command.
"""


class ArgumentFailure(Exception):
    """argparse refused the command line: the parser that refused it and argparse's message."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse's parser, which suggests the nearest command, engine or other choice, and hands
    its errors to :func:`run` (which prints them, as JSON too when asked) instead of exiting."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", Formatter)  # sub-parsers too: no shutil import
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse's hook; never returns
        """Raise :class:`ArgumentFailure` for :func:`run` to report."""
        raise ArgumentFailure(self, message)

    def _check_value(self, action, value):  # argparse's hook for ``choices``
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as error:
            from gpuready.suggest import hint

            raise argparse.ArgumentError(
                action, error.message + hint(str(value), map(str, action.choices))) from None


def build_parser(only: str | None = EVERY_COMMAND, *, for_help: bool = True
                 ) -> argparse.ArgumentParser:
    """The top-level parser: command ``only`` in full (every command with ``EVERY_COMMAND``,
    the default). Without a command (``only`` None) the others are their name and summary, which
    is all ``--help`` and argparse's "invalid choice" message need; with one, the others are left
    out, since the command line already named its command. Only the modules of the commands
    built in full are imported.

    ``for_help``: end every epilog with the exit-code table (a run that prints no help leaves it
    out, and with it the wrapping of the table's lines).
    """
    table = ""
    if for_help:
        from gpuready.errors import exit_code_help

        table = exit_code_help()
    parser = Parser(
        prog="gpuready",
        description=DESCRIPTION,
        epilog=f"{table}\n\n{EPILOG}" if table else EPILOG,
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"gpuready {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if only in (EVERY_COMMAND, command.name):
            importlib.import_module(command.module).register(_Summarised(subparsers))
            if table:
                _add_exit_codes(subparsers.choices[command.name], table)
        elif only is None:
            subparsers.add_parser(command.name, help=command.summary)
    return parser


class _Summarised:
    """The top-level sub-parsers as a command's ``register`` sees them: a command added without
    a one-line help of its own gets its summary from :mod:`gpuready.cli.commands`. The table
    names the command modules, so they do not read it themselves (an import circle)."""

    def __init__(self, subparsers) -> None:
        self._subparsers = subparsers

    def add_parser(self, name: str, **options):
        """Add command ``name``, its help the table's summary unless ``options`` give one."""
        if options.get("help") is None:
            options["help"] = BY_NAME[name].summary
        return self._subparsers.add_parser(name, **options)


def _add_exit_codes(parser: argparse.ArgumentParser, table: str) -> None:
    """End the epilog of ``parser`` and of its actions' parsers (``cdi validate``) with the one
    exit-code table."""
    parser.epilog = f"{parser.epilog.rstrip()}\n\n{table}" if parser.epilog else table
    for child in _children(parser).values():
        _add_exit_codes(child, table)


def _children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-parsers of ``parser`` by name (``cdi``'s actions), empty for most commands."""
    return next((action.choices for action in parser._actions
                 if isinstance(action, argparse._SubParsersAction)), {})


def _refusing_parser(parser: argparse.ArgumentParser, argv: Sequence[str]):
    """The deepest parser ``argv`` names (``gpuready cdi list``'s), whose options a mistyped
    option is compared with and whose usage is shown."""
    for word in argv:
        children = _children(parser)
        if word in children:
            parser = children[word]
        elif not word.startswith("-"):
            break
    return parser


def _option_hint(parser: argparse.ArgumentParser, message: str) -> str:
    """``did you mean`` for each word of "unrecognized arguments: ..." that is close to one of
    ``parser``'s options."""
    from gpuready.suggest import did_you_mean

    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return ""
    options = [option for action in parser._actions for option in action.option_strings]
    hints = []
    for word in message[len(prefix):].split():
        if word.startswith("--"):
            guess = did_you_mean(word.split("=", 1)[0], options)
            if guess:
                hints.append(f"did you mean {guess!r} for {word.split('=', 1)[0]!r}?")
    return "; " + "; ".join(hints) if hints else ""


# Where --format names what the command writes, not its report: an error object there would
# land in the output (``cdi generate --format json > /etc/cdi/nvidia.json``).
OUTPUT_FORMATS = (("cdi", "generate"),)


def _wants_json(argv: Sequence[str]) -> bool:
    """True when the command line asks for JSON output (``--format json``, ``--format=json``),
    read from the words themselves, since a usage error leaves no parsed arguments."""
    words = list(argv)
    if tuple(words[:2]) in OUTPUT_FORMATS:
        return False
    return "--format=json" in words or any(
        word == "--format" and following == "json" for word, following in zip(words, words[1:]))


def _print_error(message: str, code: int, *, as_json: bool) -> None:
    """The one-line error on stderr (a newline or a bidi control from a path or value shown
    escaped, so it stays one line that reads as written), and with ``--format json`` the error
    object on stdout, exact."""
    from gpuready.terminal import shown

    print(f"gpuready: error: {shown(message)}", file=sys.stderr)
    if as_json:  # scripts still get a document to read
        import json

        print(json.dumps({"status": "error", "exit_code": int(code), "error": message},
                         indent=2))


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word, when that names a command (gpuready's own
    options, --help and --version, take no value, so a command is always the first word)."""
    return argv[0] if argv and argv[0] in BY_NAME else None


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen command, and return its exit code.

    Its text output goes through :class:`gpuready.terminal.EscapedStream`: a path or value from
    the node or the command line never reaches a terminal with a raw control or bidi character.
    Standard output stays exact where it is the product (``cdi generate``'s spec).
    """
    from gpuready.terminal import EscapedStream

    argv = sys.argv[1:] if argv is None else list(argv)
    saved = sys.stdout, sys.stderr
    if tuple(argv[:2]) not in OUTPUT_FORMATS:
        sys.stdout = EscapedStream(sys.stdout)
    sys.stderr = EscapedStream(sys.stderr)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = saved


def _run(argv: list[str]) -> int:
    """:func:`run` itself."""
    parser = build_parser(only=chosen_command(argv),
                          for_help=not argv or "-h" in argv or "--help" in argv)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            _refusing_parser(parser, argv).error(f"unrecognized arguments: {' '.join(extra)}")
    except ArgumentFailure as failure:
        failure.parser.print_usage(sys.stderr)
        message = failure.message + _option_hint(failure.parser, failure.message)
        _print_error(message, ExitCode.BAD_INPUT, as_json=_wants_json(argv))
        return ExitCode.BAD_INPUT
    if not getattr(args, "handler", None):
        parser.print_help()
        return ExitCode.BAD_INPUT
    try:
        _require_node_root(getattr(args, "root", None), command=args.command)
        command = BY_NAME[args.command]
        if command.lasting:
            gc.enable()
        request = importlib.import_module(command.module).request_from(args)
        return int(args.handler(request))
    except GpureadyError as error:
        _print_error(error.message(), error.exit_code,
                     as_json=getattr(args, "format", None) == "json"
                     and tuple(argv[:2]) not in OUTPUT_FORMATS)
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


# The top-level folders of a Linux file system: a --root holding none of them is no node.
NODE_FOLDERS = ("etc", "usr", "var", "dev", "proc", "sys", "run", "opt", "lib")


def _require_node_root(root: str | None, *, command: str) -> None:
    """Refuse a ``--root`` that does not look like a node (no ``etc/``, ``usr/``, ``dev/`` ...):
    a mistyped root would otherwise read as a node with nothing on it. ``setup`` alone makes
    node roots."""
    if root in (None, "/") or command == "setup" or any(
            os.path.isdir(os.path.join(root, folder)) for folder in NODE_FOLDERS):
        return
    from gpuready.errors import UsageError

    what = "no such folder" if not os.path.isdir(root) else "it has no etc/ (nor usr/, dev/ ...)"
    raise UsageError(f"--root {root}: {what}, so it is not a node's root; give the folder that "
                     "holds the node's etc/ (or make a sandbox node with 'gpuready setup --root "
                     f"{root}')")


def _reader_gone() -> int:
    """The reader went away (``gpuready lint | head``): say nothing more, and do not claim
    success, since the verdict was never printed whole."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return SIGPIPE_EXIT


def entrypoint() -> None:
    """Console-script entry: run, flush, and exit with the command's code.

    The cyclic garbage collector is off for the run (a command that runs long turns it back
    on, :attr:`Command.lasting`): a run lives for a fraction of a second, and its collections,
    over the tens of thousands of objects its imports make, cost about 8% of a ``check``
    (``benchmarks/bench_startup.py``); memory is still freed by reference counting."""
    gc.disable()
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _reader_gone()
    sys.exit(code)
