#!/usr/bin/env python3
"""Write docs/rules.md from the rule docstrings (the same text as ``gpuready rules --markdown``).

Usage: PYTHONPATH=src python3 scripts/generate_rules_doc.py [--check]
With --check, exit 1 when docs/rules.md differs from what the docstrings generate.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuready.rules.docs import markdown

TARGET = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def main(argv: list[str]) -> int:
    """Generate (or, with --check, compare) docs/rules.md."""
    text = markdown()
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is stale: run scripts/generate_rules_doc.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
