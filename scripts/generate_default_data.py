#!/usr/bin/env python3
"""Write each recorded ``containerd config default`` of src/gpuready/data as JSON beside it.

Usage: PYTHONPATH=src python3 scripts/generate_default_data.py [--check]
Every run of lint, check, doctor and configure builds its view of the node over the line's
recorded defaults; reading them as JSON (the C decoder) costs about a thirtieth of parsing the TOML
again in pure Python (``tomllib``). The TOML stays the source: it is what containerd printed.
With --check, exit 1 when a JSON file is missing or says anything else than its TOML.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from generated import write_or_check

from gpuready.compat import tomllib

DATA = Path(__file__).resolve().parent.parent / "src" / "gpuready" / "data"


def sources() -> list[Path]:
    """The recorded defaults, one TOML file per containerd line."""
    return sorted(DATA.glob("containerd-*-default.toml"))


def as_json(source: Path) -> str:
    """The parse of ``source`` as JSON: the containerd defaults hold no dates, so JSON says
    exactly what tomllib does."""
    return json.dumps(tomllib.loads(source.read_text(encoding="utf-8")), indent=1) + "\n"


def main(argv: list[str]) -> int:
    """Write (or, with --check, compare) every JSON file."""
    generators = {source.with_suffix(".json"): functools.partial(as_json, source)
                  for source in sources()}
    return write_or_check(generators, argv,
                          script="PYTHONPATH=src python3 scripts/generate_default_data.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
