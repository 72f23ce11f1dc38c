"""``lint`` and ``doctor`` for Docker: the daemon.json rules over one or more files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuready.rules.base import Scope
from gpuready.rules.context import Options
from gpuready.rules.engine import Report
from gpuready.rules.registry import REGISTRY


def lint_daemon_json(paths: Sequence[Path], *, options: Options, selected: frozenset[str],
                     release: tuple[int, int] | None) -> Report:
    """Every Docker rule on each file; a missing or unreadable file is an InputError (exit 2)."""
    from gpuready.node import FileKind
    from gpuready.rules.docker import DockerFileContext

    report = Report()
    for path in paths:
        text = options.node.read_text(path, kind=FileKind.DOCKER_CONFIG)
        context = DockerFileContext(path, text, options=options, release=release)
        report.files.append(context.display)
        for name, rule in REGISTRY.items():
            if rule.scope is Scope.DOCKER and name in selected:
                report.problems.extend(rule.check(context))
    report.problems.sort(key=lambda p: (p.file, p.line or 0, p.column or 0))
    return report
