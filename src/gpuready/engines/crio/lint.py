"""``lint`` and ``doctor`` for CRI-O: its rules over crio.conf and the drop-ins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuready.engines.crio import facts
from gpuready.paths import under_root
from gpuready.rules.base import Scope
from gpuready.rules.context import Options
from gpuready.rules.engine import Report
from gpuready.rules.registry import REGISTRY


def node_paths(root: Path) -> list[Path]:
    """crio.conf (when present) and the drop-ins, in the order CRI-O reads them."""
    main = under_root(root, facts.MAIN_CONFIG)
    folder = under_root(root, facts.DROPIN_DIR)
    paths = [main] if main.is_file() else []
    if folder.is_dir():
        paths += sorted(p for p in folder.iterdir()
                        if p.is_file() and p.suffix in (".conf", ".toml"))
    return paths


def lint_crio(paths: Sequence[Path], *, options: Options, selected: frozenset[str]) -> Report:
    """The CRI-O rules over ``paths`` read together, in order (later files win)."""
    from gpuready.engines.crio.config import MAX_BYTES
    from gpuready.errors import InputError
    from gpuready.rules.crio import CrioContext, CrioFileContext
    from gpuready.textfile import read_text

    files = []
    for path in paths:
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            raise InputError(path, f"larger than {MAX_BYTES} bytes: not a CRI-O config")
        files.append(CrioFileContext(path, read_text(path)))
    if not files:
        raise InputError(under_root(options.root, facts.MAIN_CONFIG),
                         "no CRI-O config here (nor drop-ins in "
                         f"{under_root(options.root, facts.DROPIN_DIR)})")
    context = CrioContext(files, options=options)
    report = Report(files=[f.display for f in files])
    for name, rule in REGISTRY.items():
        if rule.scope is Scope.CRIO and name in selected:
            report.problems.extend(rule.check(context))
    order = {f.display: i for i, f in enumerate(files)}
    report.problems.sort(key=lambda p: (order.get(p.file, 0), p.line or 0, p.column or 0))
    return report
