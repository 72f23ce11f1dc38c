"""The exceptions gpuready raises, and the exit code each one maps to.

Everything below the command line raises one of these; only ``gpuready.cli`` turns them into a
message and an exit code, so no traceback reaches a user.
"""

from __future__ import annotations

from enum import IntEnum

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every start
if TYPE_CHECKING:
    from pathlib import Path


class ExitCode(IntEnum):
    """The documented exit codes of every gpuready command."""

    OK = 0
    CHECK_FAILED = 1
    BAD_INPUT = 2
    UNREACHABLE = 3


# The one exit-code contract of every command and engine: the README's table, the epilog of every
# ``--help`` and the exit-code test are all read from here.
EXIT_CODES: tuple[tuple[ExitCode, str], ...] = (
    (ExitCode.OK, "done: every check passed, or there was nothing to do"),
    (ExitCode.CHECK_FAILED, "a finding: a lint error, a failed check or verification, a refused "
                            "reload, a rolled-back --restart (every file put back), or a file "
                            "someone else changed while gpuready wrote it (their change kept)"),
    (ExitCode.BAD_INPUT, "bad input, usage or a refusal (a missing or unreadable file, a config "
                         "that cannot be edited safely, the never-break gate); nothing was "
                         "written"),
    (ExitCode.UNREACHABLE, "the container runtime could not be reached"),
)


def exit_code_help() -> str:
    """The exit-code table as ``--help`` shows it, under an ``exit codes:`` heading."""
    import textwrap

    rows = (textwrap.fill(meaning, width=92, break_on_hyphens=False,
                          initial_indent=f"  {int(code)}  ", subsequent_indent="     ")
            for code, meaning in EXIT_CODES)
    return "exit codes (with --format json an error is a JSON object with exit_code and error):\n" \
        + "\n".join(rows)


class GpureadyError(Exception):
    """Base class: a problem that ends a command with a one-line message."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def message(self) -> str:
        """The one line shown to the user."""
        return str(self)


class UsageError(GpureadyError):
    """The command line asks for something that cannot be done as asked."""


class InputError(GpureadyError):
    """A file is missing, unreadable, or not what it should be.

    ``line`` and ``column`` are 1-based and given when the position is known (TOML or YAML syntax).
    """

    def __init__(
        self,
        path: Path | str,
        reason: str,
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.path = str(path)
        self.reason = reason
        self.line = line
        self.column = column
        super().__init__(self.message())

    def message(self) -> str:
        """``path:line:column: reason``, leaving out what is unknown."""
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.reason}"


class MissingFileError(InputError):
    """A file gpuready must read is not there (a node that was never configured, a mistyped
    path): bad input, whatever the command, since nothing was there to judge."""


class UnsupportedVersionError(InputError):
    """The config's ``version`` is one gpuready does not know how to edit."""


class WriteError(GpureadyError):
    """A file could not be written safely; the original is left as it was."""


class VerificationError(GpureadyError):
    """A verification step found the configuration wrong."""

    exit_code = ExitCode.CHECK_FAILED


class RuntimeUnreachableError(GpureadyError):
    """The container runtime's API could not be reached (socket missing, refused, not CRI)."""

    exit_code = ExitCode.UNREACHABLE


class CriNotLoadedError(RuntimeUnreachableError):
    """containerd answers on its socket but serves no CRI runtime service: its CRI plugin did
    not load (or it predates CRI v1). A failed check (exit 1), not an unreachable runtime: the
    files it was started on are the cause, and :func:`gpuready.cri.verify.verify_live` names it."""

    exit_code = ExitCode.CHECK_FAILED
