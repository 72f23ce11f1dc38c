"""Generated files kept in the repository: write them, or say which differ from their sources.

Used by the scripts that generate documents and data (``generate_docs.py``,
``generate_default_data.py``); their tests run them with ``--check``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path


def write_or_check(generators: Mapping[Path, Callable[[], str]], argv: list[str], *,
                   script: str) -> int:
    """Write each target's rendered text where it differs; with ``--check`` in ``argv``, write
    nothing and name each stale target (exit status 1 when one is)."""
    stale = []
    for target, render in generators.items():
        text = render()
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current == text:
            continue
        if "--check" in argv:
            stale.append(target)
            continue
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    for target in stale:
        print(f"{target} is stale: run {script}", file=sys.stderr)
    return 1 if stale else 0
