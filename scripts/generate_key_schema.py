#!/usr/bin/env python3
"""Regenerate the ``generated`` part of src/gpuready/data/key-schema.json from recorded configs.

Usage: PYTHONPATH=src python3 scripts/generate_key_schema.py [--check]
The sources are each line's recorded ``containerd config default`` (tests/data/containerd;
builds with the full plugin set: btrfs, devmapper and zfs snapshotters included) and,
for 2.3, the plugin tables of a recorded ``config dump`` (tests/data/cri/observed). The
``documented``, ``moved`` and ``removed`` parts are kept by hand, each entry with its source.
With --check, exit 1 when the stored part differs from what the sources generate.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from gpuready.compat import tomllib
from gpuready.containerd.keyschema import generate

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "src" / "gpuready" / "data" / "key-schema.json"
# (line, recorded file, only its plugin tables)
SOURCES = (
    ("1.6", "tests/data/containerd/containerd-1.6.20-default.toml", False),
    ("1.7", "tests/data/containerd/containerd-1.7.34-default.toml", False),
    ("2.1", "tests/data/containerd/containerd-2.1.9-default.toml", False),
    ("2.3", "tests/data/containerd/containerd-2.3.4-default.toml", False),
    ("2.3", "tests/data/cri/observed/v4-top-level-server-tables.dump-by-containerd-2.3.4.toml",
     True),
)


def generated() -> dict:
    """The generated part, from the recorded files."""
    return generate(
        (line, tomllib.loads((REPO / path).read_text()), plugins_only)
        for line, path, plugins_only in SOURCES
    )


def dumps(value: object) -> str:
    """JSON with one key path (a list of strings) per line, for readable diffs."""
    text = json.dumps(value, indent=1)
    return re.sub(
        r"\[\s*((?:\"(?:[^\"\\]|\\.)*\",?\s*)+)\]",
        lambda m: json.dumps(json.loads(m.group(0))),
        text,
    ) + "\n"


def main(argv: list[str]) -> int:
    """Regenerate (or, with --check, compare) the generated part of the schema."""
    stored = json.loads(TARGET.read_text(encoding="utf-8"))
    fresh = generated()
    if "--check" in argv:
        if stored.get("generated") != fresh:
            print(f"{TARGET} is stale: run scripts/generate_key_schema.py", file=sys.stderr)
            return 1
        return 0
    stored["generated"] = fresh
    stored["sources"] = [f"{line}: {path}" for line, path, _ in SOURCES]
    TARGET.write_text(dumps(stored), encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
