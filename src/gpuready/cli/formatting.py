"""How ``--help`` is laid out: argparse's raw-description formatter, sized to the terminal.

argparse builds a formatter for every option it adds (to check the option's metavar), and its
formatter asks :func:`shutil.get_terminal_size` for the width, which imports :mod:`shutil` and the
compression modules it loads: a cost every run paid before reading a byte. The width is found here
the same way (``COLUMNS``, else the terminal of standard output, else 80) without that import.
"""

from __future__ import annotations

import argparse
import os
import sys

FALLBACK_COLUMNS = 80


def terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` gives it."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or FALLBACK_COLUMNS


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (their examples and tables keep their lines)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)
