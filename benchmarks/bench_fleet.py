"""Fleet speed, measured side by side in one run: every ratio with its target, met or not.

Generates 10,000 nodes from the real default configs (see fleet_data.py) twice: as a fleet
deployed alike has them (nodes configured alike have identical files), and with every file made
distinct by a comment naming its host, so that audit's sharing of identical texts gains nothing.
Checks that ``gpuready audit`` reports every injected fault in both, then prints the median of
several runs of (audit and the bare loop in turns, so that both see the same load, with their CPU
seconds beside the wall time):

1. ``gpuready audit`` over the fleet / a bare single-process loop parsing the same files
   (tomllib for TOML, PyYAML's C loader for YAML): target at most 1.0, for both fleets;
2. ``containerd config dump`` per config / ``gpuready audit`` per node (the distinct fleet):
   target at least 20 (dump is timed on a sample of the configs: 10,000 dumps take minutes);
3. the start-up of ``lint FILE``, ``--help``, ``check --root R`` and ``configure --dry-run``
   beside their bare baselines, with their targets (``benchmarks/bench_startup.py``).

Not a test: the numbers depend on the machine (and on what else runs on it).

    python3 benchmarks/bench_fleet.py [--nodes 10000] [--runs 3] [--dump-sample 40]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(HERE))

import bench_startup  # noqa: E402  (after the path set-up above)
import fleet_data  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(SRC))
GPUREADY = [sys.executable, "-m", "gpuready"]

BARE_LOOP = """\
import sys, tomllib, yaml
from pathlib import Path
loader = yaml.CSafeLoader
for node in sorted(Path(sys.argv[1]).iterdir()):
    for path in node.rglob("*"):
        if path.suffix == ".toml":
            try:
                tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError:
                pass
        elif path.suffix == ".yaml":
            yaml.load(path.read_text(), Loader=loader)
"""


def median_seconds(action: Callable[[], object], runs: int, *, warm_up: bool = True) -> float:
    """Median wall time of ``action`` over ``runs`` runs, after one warm-up run."""
    if warm_up:
        action()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def run(command: list[str], *, check: bool = False) -> subprocess.CompletedProcess:
    """Run a command quietly."""
    return subprocess.run(command, env=ENV, capture_output=True, text=True, check=check)


def verify_faults(fleet: Path, expected: dict[str, str]) -> str:
    """Audit once and confirm every injected fault is reported on its node."""
    result = run([*GPUREADY, "audit", str(fleet), "--format", "json"])
    document = json.loads(result.stdout)
    found = {Path(n["node"]).name: {p["rule"] for p in n["problems"]} for n in document["nodes"]}
    missed = [host for host, rule in expected.items() if rule not in found.get(host, set())]
    if missed:
        raise SystemExit(f"audit missed {len(missed)} injected faults, e.g. {missed[:5]}")
    summary = document["summary"]
    return (f"{summary['nodes']} nodes audited: {summary['clean']} clean, "
            f"{summary['warnings']} with warnings, {summary['errors']} with errors, "
            f"{summary['unreadable']} unreadable; all {len(expected)} injected faults reported")


@dataclass(frozen=True)
class Pair:
    """Medians of ``gpuready audit`` and of the bare loop over one fleet, run in turns."""

    audit: float  # wall seconds
    bare: float
    ratio: float  # median of the ratios of the runs taken together
    audit_cpu: float  # CPU seconds of the command and its worker processes
    bare_cpu: float


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, its children included) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run(command)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def audit_and_bare(fleet: Path, runs: int) -> Pair:
    """``gpuready audit`` and the bare parse loop over ``fleet``, in turns, ``runs`` times each.

    Taking turns keeps both under the same load when the machine is shared; each ratio is of
    two runs taken one after the other.
    """
    bare_loop = [sys.executable, "-c", BARE_LOOP, str(fleet)]
    run(bare_loop)  # warm-up (the audit that checked the faults warmed the files up for it)
    audits, bares = [], []
    for _ in range(runs):
        audits.append(timed([*GPUREADY, "audit", str(fleet)]))
        bares.append(timed(bare_loop))
    return Pair(statistics.median(a for a, _ in audits), statistics.median(b for b, _ in bares),
                statistics.median(a / b for (a, _), (b, _) in zip(audits, bares)),
                statistics.median(c for _, c in audits), statistics.median(c for _, c in bares))


def dump_seconds(fleet: Path, sample: int) -> float | None:
    """Median seconds of ``containerd config dump`` on one node's config, from a sample."""
    binary = shutil.which("containerd")
    if binary is None:
        return None
    configs = sorted(fleet.iterdir())[:: max(1, len(list(fleet.iterdir())) // sample)][:sample]
    samples = []
    for node in configs:
        config = node / "etc" / "containerd" / "config.toml"
        start = time.perf_counter()
        subprocess.run([binary, "--config", str(config), "config", "dump"], capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def line(name: str, ratio: float, target: str, met: bool) -> str:
    """One row of the result table."""
    verdict = "met" if met else "NOT met (gap: see the ratio)"
    return f"{name:<52} {ratio:7.2f}   target {target:<7} {verdict}"


def main() -> None:
    """Generate, verify, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dump-sample", type=int, default=40)
    args = parser.parse_args()
    # As installed: pip byte-compiles a package, so no run pays for compiling gpuready's source
    # (PYTHONDONTWRITEBYTECODE in the environment would otherwise make every run compile it).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True)
    with tempfile.TemporaryDirectory(prefix="gpuready-fleet-") as folder:
        fleet, distinct = Path(folder) / "fleet", Path(folder) / "distinct"
        expected = fleet_data.generate(fleet, args.nodes)
        print(verify_faults(fleet, expected))
        expected = fleet_data.generate(distinct, args.nodes, distinct=True)
        print("every file distinct: " + verify_faults(distinct, expected))
        # The audits that checked the faults were the warm-up (files in the page cache).
        alike = audit_and_bare(fleet, args.runs)
        apart = audit_and_bare(distinct, args.runs)
        dump = dump_seconds(distinct, args.dump_sample)
    cpus = os.cpu_count()
    print(f"medians of {args.runs} runs on {cpus} CPUs:")
    for name, pair in (("", alike), ("every file distinct: ", apart)):
        print(f"  {name}audit {args.nodes} nodes {pair.audit:.2f} s ({pair.audit_cpu:.1f} s "
              f"CPU), bare parse loop {pair.bare:.2f} s ({pair.bare_cpu:.1f} s CPU), per node "
              f"{pair.audit / args.nodes * 1000:.2f} ms audit")
    if dump is not None:
        print(f"  containerd config dump {dump * 1000:.1f} ms per config (sample of "
              f"{args.dump_sample})")
    print(line("audit / bare parse loop", alike.ratio, "<= 1.0", alike.ratio <= 1.0))
    print(line("  the same, every file distinct", apart.ratio, "<= 1.0", apart.ratio <= 1.0))
    if dump is None:
        print("containerd config dump: containerd is not installed, ratio not measured")
    else:
        speedup = dump / (apart.audit / args.nodes)
        print(line("config dump per config / audit per node (distinct)", speedup, ">= 20",
                   speedup >= 20))
    startup = bench_startup.run_all(args.runs * 7)
    for measured in startup:
        print(bench_startup.row(measured))


if __name__ == "__main__":
    main()
