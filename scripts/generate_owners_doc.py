#!/usr/bin/env python3
"""Write docs/owners.md from the owner table (who owns containerd, where, and the sources).

Usage: PYTHONPATH=src python3 scripts/generate_owners_doc.py [--check]
With --check, exit 1 when docs/owners.md differs from what the table generates.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuready.owners.table import markdown

TARGET = Path(__file__).resolve().parent.parent / "docs" / "owners.md"


def main(argv: list[str]) -> int:
    """Generate (or, with --check, compare) docs/owners.md."""
    text = markdown()
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is stale: run scripts/generate_owners_doc.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
