"""Run the command line in-process, as a user would, and capture what it prints."""

from __future__ import annotations

from dataclasses import dataclass

from gpuready.cli import main


@dataclass
class Outcome:
    """Exit code and output of one command-line run."""

    code: int
    out: str
    err: str


def run_cli(capsys, monkeypatch, *argv: str) -> Outcome:
    """``gpuready ARGV...`` in this process; never raises."""
    capsys.readouterr()
    code = main.run(list(argv))
    captured = capsys.readouterr()
    return Outcome(int(code), captured.out, captured.err)
