"""``lint`` and ``doctor`` for CRI-O: its rules over crio.conf and the drop-ins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuready.engines.crio import facts
from gpuready.node import Node
from gpuready.problems import Report
from gpuready.rules.base import Scope
from gpuready.rules.context import Options
from gpuready.rules.registry import rules_for


def node_paths(node: Node) -> list[Path]:
    """crio.conf (when present) and the drop-ins, in the order CRI-O reads them."""
    from gpuready.engines.crio.config import dropin_paths

    main = node.path(facts.MAIN_CONFIG)
    return ([main] if node.is_file(main) else []) + dropin_paths(node.path(facts.DROPIN_DIR),
                                                                 node=node)


def lint_crio(paths: Sequence[Path], *, options: Options, selected: frozenset[str]) -> Report:
    """The CRI-O rules over ``paths`` read together, in order (later files win)."""
    from gpuready.engines.crio.rules import CrioContext, CrioFileContext
    from gpuready.errors import InputError
    from gpuready.node import FileKind

    node = options.node
    files = [CrioFileContext(path, node.read_text(path, kind=FileKind.CRIO_CONFIG))
             for path in paths]
    if not files:
        raise InputError(node.path(facts.MAIN_CONFIG), "no CRI-O config here (nor drop-ins in "
                         f"{node.path(facts.DROPIN_DIR)})")
    context = CrioContext(files, options=options)
    report = Report(files=[f.display for f in files])
    for rule in rules_for(Scope.CRIO, selected):
        report.problems.extend(rule.check(context))
    order = {f.display: i for i, f in enumerate(files)}
    report.problems.sort(key=lambda p: (order.get(p.file, 0), p.line or 0, p.column or 0))
    return report
