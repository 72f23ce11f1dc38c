"""Start-up cost of the command line: four commands beside their bare baselines, in one run.

Each command is timed beside the cheapest program that does the same thing with nothing of
gpuready's, in turns (command, baseline, command, baseline, ...) so both see the same load, and
the median of the ratios of each pair is printed with its target:

1. ``gpuready lint FILE`` / ``python -c`` loading FILE with tomllib (tomli before 3.11): <= 1.5
2. ``gpuready --help`` / ``python -c pass``: <= 2.5
3. ``gpuready check --root R`` / ``python -c pass``: <= 4
4. ``gpuready configure --dry-run --root R --containerd-version 1.7`` / ``python -c pass``: <= 5,
   on R (configured already: the re-run a playbook makes on every node) and on a node with
   containerd's default config alone (the first run, which plans an edit with tomlkit)

FILE and R start from containerd 1.7.34's own ``config default``; R is the node ``gpuready setup
--root R`` made. The code is byte-compiled first, as pip leaves an installed package.

Each row also prints its floor: the same baseline beside a program that only imports the
libraries the command cannot run without (argparse for its command line, pathlib, the TOML
parser, PyYAML where it reads YAML, tomlkit where it edits) and does the baseline's own work.
A target below its floor cannot be met by anything gpuready's own code does. Not a test: the
numbers depend on the machine. ``benchmarks/bench_fleet.py`` measures ``audit`` and prints these
rows as well.

    python3 benchmarks/bench_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
DEFAULT_CONFIG = REPO / "tests" / "data" / "containerd" / "containerd-1.7.34-default.toml"
ENV = dict(os.environ, PYTHONPATH=str(SRC))
ENV.pop("PYTHONDONTWRITEBYTECODE", None)
TOML_LOAD = (
    "import sys\n"
    "try:\n    import tomllib\nexcept ImportError:\n    import tomli as tomllib\n"
    "tomllib.load(open(sys.argv[1], 'rb'))\n"
)


def gpuready_command() -> list[str]:
    """How an operator starts gpuready: the console script beside this Python when there is one
    (what ``pip install`` writes), else the same entry point through ``-c``."""
    script = Path(sys.executable).parent / "gpuready"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from gpuready.cli.main import entrypoint; entrypoint()"]


@dataclass(frozen=True)
class Target:
    """One command, its baseline, the most the ratio of the two may be, and the floor: a program
    importing only the libraries the command needs (None: no floor printed)."""

    name: str
    command: list[str]
    baseline: list[str]
    limit: float
    floor: list[str] | None = None


@dataclass(frozen=True)
class Measured:
    """Median wall seconds of a target's command and baseline, and the median ratio of pairs."""

    target: Target
    command: float
    baseline: float
    ratio: float
    floor: float | None = None

    @property
    def met(self) -> bool:
        """True when the ratio is within the target."""
        return self.ratio <= self.target.limit


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, env=ENV, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): "
                         f"{result.stderr.decode(errors='replace').strip()[:300]}")
    return elapsed


def measure(target: Target, runs: int) -> Measured:
    """Time ``target``'s command, baseline and floor in turns, ``runs`` times each, after a
    warm-up; the floor's ratio is the median of floor / baseline over the same turns."""
    floor = target.floor or target.baseline
    _seconds(target.command), _seconds(target.baseline), _seconds(floor)
    turns = [(_seconds(target.command), _seconds(target.baseline), _seconds(floor))
             for _ in range(runs)]
    return Measured(target, statistics.median(c for c, _, _ in turns),
                    statistics.median(b for _, b, _ in turns),
                    statistics.median(c / b for c, b, _ in turns),
                    statistics.median(f / b for _, b, f in turns) if target.floor else None)


def prepare(folder: Path) -> tuple[Path, Path, Path]:
    """A config file, a node set up by gpuready, and a node with containerd's default alone."""
    config = folder / "config.toml"
    shutil.copyfile(DEFAULT_CONFIG, config)
    set_up, bare_node = folder / "set-up", folder / "fresh"
    for node in (set_up, bare_node):
        (node / "etc" / "containerd").mkdir(parents=True)
        shutil.copyfile(DEFAULT_CONFIG, node / "etc" / "containerd" / "config.toml")
    subprocess.run([*gpuready_command(), "setup", "--root", str(set_up),
                    "--containerd-version", "1.7"], env=ENV, capture_output=True, check=True)
    return config, set_up, bare_node


def importing(*modules: str, then: str = "") -> list[str]:
    """A program importing ``modules`` (the TOML parser as gpuready imports it), then running
    ``then``."""
    names = [name for name in modules if name != "tomllib"]
    code = f"import {', '.join(names)}\n" if names else ""
    if "tomllib" in modules:
        code += TOML_LOAD.split("tomllib.load")[0]
    return [sys.executable, "-c", code + then]


def targets(config: Path, set_up: Path, bare_node: Path) -> list[Target]:
    """The start-up targets, each with its floor."""
    gpuready, bare = gpuready_command(), [sys.executable, "-c", "pass"]
    load = "tomllib.load(open(sys.argv[1], 'rb'))"
    return [
        Target("lint FILE / tomllib load of FILE", [*gpuready, "lint", str(config)],
               [sys.executable, "-c", TOML_LOAD, str(config)], 1.5,
               [*importing("argparse", "pathlib", "tomllib", then=load), str(config)]),
        Target("--help / python -c pass", [*gpuready, "--help"], bare, 2.5,
               importing("argparse")),
        Target("check --root R / python -c pass", [*gpuready, "check", "--root", str(set_up)],
               bare, 4.0, importing("argparse", "pathlib", "tomllib", "yaml")),
        Target("configure --dry-run --root R / python -c pass",
               [*gpuready, "configure", "--dry-run", "--root", str(set_up),
                "--containerd-version", "1.7"], bare, 5.0,
               importing("argparse", "pathlib", "tomllib")),
        Target("  the same on a node not yet configured",
               [*gpuready, "configure", "--dry-run", "--root", str(bare_node),
                "--containerd-version", "1.7"], bare, 5.0,
               importing("argparse", "pathlib", "tomllib", "tomlkit")),
    ]


def row(measured: Measured) -> str:
    """One line of the table: the ratio, its target, met or not, and the two medians."""
    verdict = "met" if measured.met else "NOT met"
    floor = "" if measured.floor is None else f"  floor {measured.floor:4.2f}"
    return (f"{measured.target.name:<48} {measured.ratio:5.2f}  target <= "
            f"{measured.target.limit:<4} {verdict:<7}  ({measured.command * 1000:6.1f} ms vs "
            f"{measured.baseline * 1000:5.1f} ms){floor}")


def run_all(runs: int) -> list[Measured]:
    """Prepare the inputs in a temporary folder and measure every target."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True)
    with tempfile.TemporaryDirectory(prefix="gpuready-startup-") as folder:
        return [measure(target, runs) for target in targets(*prepare(Path(folder)))]


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="pairs per target (default: 21)")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs, medians of {args.runs} "
          "pairs taken in turns:")
    for measured in run_all(args.runs):
        print(row(measured))


if __name__ == "__main__":
    main()
