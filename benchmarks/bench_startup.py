"""Start-up cost of the command line, measured side by side in one run.

Prints the median wall time of ``python -c pass`` (the interpreter alone), ``gpuready --help``
(parser only: every command module must stay light), and ``gpuready check`` on a node prepared
by ``gpuready setup``, and the ratios between them. Not a test: numbers depend on the machine.

    python3 benchmarks/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def median_seconds(command: list[str], runs: int, env: dict[str, str]) -> float:
    """Median wall time of ``command`` over ``runs`` runs (after one warm-up run)."""
    subprocess.run(command, env=env, capture_output=True, check=False)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, capture_output=True, check=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    """Measure and print the three timings and their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(SRC))
    with tempfile.TemporaryDirectory() as root:
        gpuready = [sys.executable, "-m", "gpuready"]
        subprocess.run([*gpuready, "setup", "--root", root], env=env, capture_output=True,
                       check=True)
        bare = median_seconds([sys.executable, "-c", "pass"], args.runs, env)
        help_ = median_seconds([*gpuready, "--help"], args.runs, env)
        check = median_seconds([*gpuready, "check", "--root", root], args.runs, env)
    print(f"python -c pass        {bare * 1000:7.1f} ms   1.00x")
    print(f"gpuready --help       {help_ * 1000:7.1f} ms   {help_ / bare:.2f}x")
    print(f"gpuready check        {check * 1000:7.1f} ms   {check / bare:.2f}x")


if __name__ == "__main__":
    main()
