"""Text: one line per problem, like a compiler, with a fix hint under it, then a summary.

etc/containerd/config.toml:12:5: error bool-as-string: SystemdCgroup is the string 'true', …
  fix: write SystemdCgroup = true without quotes (gpuready lint --fix)
1 error, 0 warnings, 0 info in 1 file
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from gpuready.problems import Problem, Severity


def location(problem: Problem) -> str:
    """``file:line:column`` with what is known."""
    where = problem.file
    if problem.line is not None:
        where += f":{problem.line}"
        if problem.column is not None:
            where += f":{problem.column}"
    return where


def render_problem(problem: Problem) -> str:
    """The problem's line, and its fix hint on the next line when it has one."""
    text = f"{location(problem)}: {problem.severity.value} {problem.rule}: {problem.message}"
    return text + (f"\n  fix: {problem.fix}" if problem.fix else "")


def summary(problems: Sequence[Problem], *, files: Sequence[str]) -> str:
    """``2 errors, 1 warning, 0 info in 3 files`` (or ``no problems in 3 files``)."""
    count = len(files)
    in_files = f"in {count} file{'s' if count != 1 else ''}"
    if not problems:
        return f"no problems {in_files}"
    by = Counter(p.severity for p in problems)
    errors, warnings = by[Severity.ERROR], by[Severity.WARNING]
    return (
        f"{errors} error{'s' if errors != 1 else ''}, "
        f"{warnings} warning{'s' if warnings != 1 else ''}, {by[Severity.INFO]} info {in_files}"
    )


def render(problems: Sequence[Problem], *, files: Sequence[str]) -> str:
    """Every problem, then the summary line."""
    lines = [render_problem(p) for p in problems]
    lines.append(summary(problems, files=files))
    return "\n".join(lines) + "\n"
