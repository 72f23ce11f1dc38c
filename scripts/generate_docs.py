#!/usr/bin/env python3
"""Write the generated documents: docs/rules.md (from the rule docstrings, the same text as
``gpuready rules --markdown``) and docs/owners.md (from the owner table and its sources).

Usage: PYTHONPATH=src python3 scripts/generate_docs.py [--check]
With --check, write nothing and exit 1 when a document differs from what its source generates.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from generated import write_or_check

DOCS = Path(__file__).resolve().parent.parent / "docs"


def generators() -> dict[Path, Callable[[], str]]:
    """Each generated document and the function that renders it."""
    from gpuready.owners.table import markdown as owners_markdown
    from gpuready.rules.docs import markdown as rules_markdown

    return {DOCS / "rules.md": rules_markdown, DOCS / "owners.md": owners_markdown}


def main(argv: list[str]) -> int:
    """Generate (or, with --check, compare) every document."""
    return write_or_check(generators(), argv,
                          script="PYTHONPATH=src python3 scripts/generate_docs.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
