#!/usr/bin/env python3
"""Lint cost next to a bare tomllib parse of the same containerd default config, in one run.

Usage: PYTHONPATH=src python3 benchmarks/bench_lint.py [CONFIG]
(default: tests/data/containerd/containerd-1.6.20-default.toml). A fleet audit lints thousands of
configs, so lint's budget is a small multiple of the parse; tomlkit is shown for comparison.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

import tomlkit

from gpuready.compat import tomllib
from gpuready.rules import REGISTRY
from gpuready.rules.context import FileContext, Options
from gpuready.rules.engine import lint_file

DEFAULT = (
    Path(__file__).resolve().parent.parent / "tests/data/containerd/containerd-1.6.20-default.toml"
)


def best_of(action, *, number: int) -> float:
    """The best per-call time of ``action`` in seconds over five repeats."""
    return min(timeit.repeat(action, number=number, repeat=5)) / number


def main(argv: list[str]) -> int:
    """Measure and print the three timings and the ratios."""
    path = Path(argv[0]) if argv else DEFAULT
    text = path.read_text()
    selected = frozenset(REGISTRY)
    options = Options(root=Path("/nonexistent-root"))

    def lint_once():
        return lint_file(FileContext(path, text, options=options), selected=selected)

    found = lint_once()
    parse = best_of(lambda: tomllib.loads(text), number=200)
    lint = best_of(lint_once, number=200)
    edit = best_of(lambda: tomlkit.parse(text), number=20)
    print(f"config: {path.name} ({len(text)} bytes, {len(found)} problem(s) found)")
    print(f"tomllib.loads      {parse * 1e6:9.1f} µs   1.00x")
    print(f"gpuready lint      {lint * 1e6:9.1f} µs   {lint / parse:.2f}x")
    print(f"tomlkit.parse      {edit * 1e6:9.1f} µs   {edit / parse:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
