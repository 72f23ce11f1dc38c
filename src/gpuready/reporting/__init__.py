"""Reporters: render a list of problems as text, JSON or SARIF. They return strings; the CLI prints.

Each reporter takes the problems and the files that were checked, so any command that yields
:class:`gpuready.problems.Problem` (lint, doctor, cdi validate, check) can reuse them.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuready.problems import Problem

FORMATS = ("text", "json", "sarif")


def render(
    format_name: str, problems: Sequence[Problem], *, files: Sequence[str], command: str
) -> str:
    """The report in ``format_name`` (one of :data:`FORMATS`)."""
    if format_name == "json":
        from gpuready.reporting.json import render as render_json

        return render_json(problems, files=files, command=command)
    if format_name == "sarif":
        from gpuready.reporting.sarif import render as render_sarif

        return render_sarif(problems, files=files)
    from gpuready.reporting.text import render as render_text

    return render_text(problems, files=files)
