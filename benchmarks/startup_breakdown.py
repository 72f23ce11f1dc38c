"""Where a command's start-up goes above its floor: gpuready's own time, by module.

For each command of ``benchmarks/bench_startup.py`` (on the same inputs), prints

- the self time of each gpuready module's import (``python -X importtime``, the median over
  ``--runs`` runs), and the other modules the command imports beyond its floor's;
- the time of the command's run after its imports, by the module whose code ran (``cProfile``
  self time, the run made once in a process that has imported everything, so that the imports
  are left out; cProfile slows Python code more than C, so the shares, not the milliseconds,
  are what to read).

Not a test: it explains the ratios ``bench_startup.py`` prints, so that a change can be aimed at
the modules that cost most.

    python3 benchmarks/startup_breakdown.py [--runs 7] [--top 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_startup  # noqa: E402  (after the path set-up above)

# Run in a child process: the command's run profiled by module, its imports made first by a
# warm-up run of the same command (whose memory of parsed texts is then forgotten).
PROFILED_RUN = """
import cProfile, contextlib, io, json, pstats, sys
from gpuready.cli.main import run
argv = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    run(argv)
from gpuready import sametext
from gpuready.containerd import document, files
document._RECENT_PARSES = sametext.Recent()
files._RECENT = sametext.Recent()
profile = cProfile.Profile()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    profile.enable()
    run(argv)
    profile.disable()
by_module = {}
for (filename, _, _), (_, _, own, _, _) in pstats.Stats(profile).stats.items():
    if "/gpuready/" in filename:
        inside = filename.split("/gpuready/", 1)[1].removesuffix(".py")
        name = "gpuready." + inside.replace("/", ".")
    elif "/site-packages/" in filename:
        name = filename.split("/site-packages/", 1)[1].split("/")[0]
    elif filename.startswith("~") or filename.startswith("<"):
        name = "(built-in functions)"
    else:
        name = filename.rsplit("/", 1)[-1].removesuffix(".py")
    by_module[name] = by_module.get(name, 0.0) + own
print(json.dumps(by_module))
"""


def import_self_times(command: list[str], runs: int) -> dict[str, float]:
    """Median self time (ms) of each module's import over ``runs`` runs of ``command``."""
    samples: dict[str, list[float]] = defaultdict(list)
    python, *rest = _as_python(command)
    for _ in range(runs):
        result = subprocess.run([python, "-X", "importtime", *rest], env=bench_startup.ENV,
                                capture_output=True, text=True, check=False)
        for line in result.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, _, name = line[len("import time:"):].split("|")
            samples[name.strip()].append(int(own) / 1000)
    return {name: statistics.median(values + [0.0] * (runs - len(values)))
            for name, values in samples.items()}


def _as_python(command: list[str]) -> list[str]:
    """``command`` started through the Python that runs it (``-X importtime`` needs it)."""
    if command[0].endswith("gpuready"):
        return [*bench_startup.ENTRY, *command[1:]]
    return command


def run_by_module(command: list[str]) -> dict[str, float]:
    """Self seconds of the command's run (its imports made before), by module."""
    argv = command[1:] if command[0].endswith("gpuready") else command[3:]
    result = subprocess.run([sys.executable, "-c", PROFILED_RUN, json.dumps(argv)],
                            env=bench_startup.ENV, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def report(target: bench_startup.Target, runs: int, top: int) -> str:
    """The breakdown of one target, as lines of text."""
    floor = import_self_times(target.floor, runs)
    command = import_self_times(target.command, runs)
    own = {name: ms for name, ms in command.items() if name.startswith("gpuready")}
    beyond = {name: ms for name, ms in command.items()
              if not name.startswith("gpuready") and name not in floor}
    lines = [f"{target.name.strip()}: imports of {len(own)} gpuready modules "
             f"{sum(own.values()):.1f} ms (self), other modules beyond the floor "
             f"{sum(beyond.values()):.1f} ms"]
    for name, ms in sorted(own.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {ms:6.2f} ms  {name}")
    if beyond:
        shown = ", ".join(f"{name} {ms:.2f}" for name, ms in
                          sorted(beyond.items(), key=lambda item: -item[1])[:top])
        lines.append(f"    beyond the floor: {shown}")
    run = run_by_module(target.command)
    total = sum(run.values()) or 1.0
    lines.append("  its run, by module (cProfile self time, share of the run):")
    for name, seconds in sorted(run.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {seconds / total:6.1%}  {name}")
    return "\n".join(lines)


def main() -> None:
    """Print the breakdown of every start-up target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--top", type=int, default=12)
    options = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(bench_startup.SRC)],
                   check=True)
    with tempfile.TemporaryDirectory(prefix="gpuready-breakdown-") as folder:
        for target in bench_startup.targets(*bench_startup.prepare(Path(folder))):
            if target.name == "--help":
                continue
            print(report(target, options.runs, options.top), flush=True)


if __name__ == "__main__":
    main()
