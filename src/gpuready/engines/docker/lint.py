"""``lint`` and ``doctor`` for Docker: the daemon.json rules over one or more files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuready.problems import Report
from gpuready.rules.base import Scope
from gpuready.rules.context import Options
from gpuready.rules.registry import rules_for


def lint_daemon_json(paths: Sequence[Path], *, options: Options, selected: frozenset[str],
                     release: tuple[int, int] | None) -> Report:
    """Every Docker rule on each file; a missing or unreadable file is an InputError (exit 2)."""
    from gpuready.engines.docker.rules import DockerFileContext
    from gpuready.node import FileKind

    report = Report()
    for path in paths:
        text = options.node.read_text(path, kind=FileKind.DOCKER_CONFIG)
        context = DockerFileContext(path, text, options=options, release=release)
        report.files.append(context.display)
        for rule in rules_for(Scope.DOCKER, selected):
            report.problems.extend(rule.check(context))
    report.problems.sort(key=lambda p: (p.file, p.line or 0, p.column or 0))
    return report
