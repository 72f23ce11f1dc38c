"""Start-up cost of the command line: each command beside its floor, in one run.

Each command is timed in turns with two programs that do nothing of gpuready's: the bare
baseline (``python -c pass``, or for ``lint`` a ``python -c`` that loads FILE with tomllib) and
the command's floor, a program that imports only the libraries the command cannot run without
(argparse for its command line, pathlib, the TOML parser, PyYAML where it reads YAML, tomlkit
where it edits) and does the baseline's own work. The row's verdict is the median, over the
turns, of the command's time over its floor's, against 1.3: what is left above the floor is
gpuready's own code. The ratio to the bare baseline is printed beside it.

1. ``gpuready lint FILE``; floor: argparse, pathlib, tomllib loading FILE
2. ``gpuready --help``; floor: argparse
3. ``gpuready check --root R`` and ``gpuready doctor --root R``; floor: argparse, pathlib,
   tomllib, yaml
4. ``gpuready configure --dry-run --root R --containerd-version 1.7``; floor: argparse, pathlib,
   tomllib; on R (configured already: the re-run a playbook makes on every node) and on a node
   with containerd's default config alone (the first run, which plans an edit: plus tomlkit)

FILE and R start from containerd 1.7.34's own ``config default``; R is the node ``gpuready setup
--root R`` made. The code is byte-compiled first, as pip leaves an installed package. Not a
test: the numbers depend on the machine. ``benchmarks/bench_fleet.py`` measures ``audit``.

With ``--against REV`` each row is also measured for gpuready as it was at git revision REV
(its ``src/`` exported to a temporary folder), in the same turns (this tree, baseline, REV), and
the row prints both ratios and their quotient: a change that slows a command by more than
``--within`` (default 1.10) of REV's ratio says "SLOWER". Both trees start through the same
``python -c`` entry, so the console script's own cost is left out of both.

    python3 benchmarks/bench_startup.py [--runs 21] [--against REV [--within 1.10]]
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


# The most a command's time may be over its floor's.
FLOOR_LIMIT = 1.3


@dataclass(frozen=True)
class Target:
    """One command, its bare baseline, and its floor: a program importing only the libraries
    the command needs and doing the baseline's work."""

    name: str
    command: list[str]
    baseline: list[str]
    floor: list[str]
    limit: float = FLOOR_LIMIT


@dataclass(frozen=True)
class Measured:
    """Median wall seconds of a target's command, baseline and floor, and the median ratios of
    the command to each over the same turns."""

    target: Target
    command: float
    baseline: float
    floor: float
    ratio: float  # the command over its floor: the verdict
    over_baseline: float

    @property
    def met(self) -> bool:
        """True when the command is within its limit over its floor."""
        return self.ratio <= self.target.limit


def _seconds(command: list[str], env: dict[str, str] = ENV) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): "
                         f"{result.stderr.decode(errors='replace').strip()[:300]}")
    return elapsed


def measure(target: Target, runs: int) -> Measured:
    """Time ``target``'s command, baseline and floor in turns, ``runs`` times each, after a
    warm-up."""
    def turn():
        return _seconds(target.command), _seconds(target.baseline), _seconds(target.floor)

    turn()
    turns = [turn() for _ in range(runs)]
    return Measured(target, statistics.median(c for c, _, _ in turns),
                    statistics.median(b for _, b, _ in turns),
                    statistics.median(f for _, _, f in turns),
                    statistics.median(c / f for c, _, f in turns),
                    statistics.median(c / b for c, b, _ in turns))


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


def targets(config: Path, set_up: Path, bare_node: Path,
            gpuready: list[str] | None = None) -> list[Target]:
    """The start-up targets, each with its floor; ``gpuready`` starts the program measured
    (default: as an operator starts it)."""
    gpuready, bare = gpuready or gpuready_command(), [sys.executable, "-c", "pass"]
    load = "tomllib.load(open(sys.argv[1], 'rb'))"
    node_reader = importing("argparse", "pathlib", "tomllib", "yaml")
    return [
        Target("lint FILE", [*gpuready, "lint", str(config)],
               [sys.executable, "-c", TOML_LOAD, str(config)],
               [*importing("argparse", "pathlib", "tomllib", then=load), str(config)]),
        Target("--help", [*gpuready, "--help"], bare, importing("argparse")),
        Target("check --root R", [*gpuready, "check", "--root", str(set_up)], bare, node_reader),
        Target("doctor --root R", [*gpuready, "doctor", "--root", str(set_up)], bare,
               node_reader),
        Target("configure --dry-run --root R",
               [*gpuready, "configure", "--dry-run", "--root", str(set_up),
                "--containerd-version", "1.7"], bare, importing("argparse", "pathlib", "tomllib")),
        Target("  the same on a node not yet configured",
               [*gpuready, "configure", "--dry-run", "--root", str(bare_node),
                "--containerd-version", "1.7"], bare,
               importing("argparse", "pathlib", "tomllib", "tomlkit")),
    ]


def row(measured: Measured) -> str:
    """One line of the table: the command over its floor, the limit, met or not, the three
    medians, and the command over the bare baseline."""
    verdict = "met" if measured.met else "NOT met"
    return (f"{measured.target.name:<40} {measured.ratio:5.2f}x floor (<= {measured.target.limit}) "
            f"{verdict:<7}  {measured.command * 1000:6.1f} ms, floor "
            f"{measured.floor * 1000:5.1f} ms, bare {measured.baseline * 1000:5.1f} ms "
            f"({measured.over_baseline:4.2f}x)")


def run_all(runs: int) -> list[Measured]:
    """Prepare the inputs in a temporary folder and measure every target."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True)
    with tempfile.TemporaryDirectory(prefix="gpuready-startup-") as folder:
        return [measure(target, runs) for target in targets(*prepare(Path(folder)))]


# Both trees of --against start the same way, through the entry point the console script calls.
ENTRY = [sys.executable, "-c", "from gpuready.cli.main import entrypoint; entrypoint()"]


@dataclass(frozen=True)
class Compared:
    """One target measured for this tree and for REV in the same turns: the median ratio of
    each to the baseline, and the median of this tree's seconds over REV's."""

    target: Target
    ratio: float
    earlier: float
    quotient: float


def export(revision: str, folder: Path) -> Path:
    """``src/`` of git ``revision`` in ``folder``, byte-compiled; the folder to put on
    ``PYTHONPATH``. A revision git does not know stops the benchmark with git's message."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "src"],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--against {revision}: {archive.stderr.decode().strip()}")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder / "src")], check=True)
    return folder / "src"


def _imported_from(env: dict[str, str]) -> Path:
    """Where ``env``'s Python imports gpuready from (the check that each tree runs its own)."""
    out = subprocess.run([sys.executable, "-c", "import gpuready; print(gpuready.__file__)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    return Path(out).parent.parent


def compare(target: Target, earlier_env: dict[str, str], runs: int) -> Compared:
    """Time ``target``'s command on this tree, its baseline, and the command on REV, in turns,
    ``runs`` times after a warm-up."""
    def turn():
        return (_seconds(target.command), _seconds(target.baseline),
                _seconds(target.command, earlier_env))

    turn()
    turns = [turn() for _ in range(runs)]
    return Compared(target, statistics.median(c / b for c, b, _ in turns),
                    statistics.median(e / b for _, b, e in turns),
                    statistics.median(c / e for c, _, e in turns))


def compared_row(compared: Compared, within: float) -> str:
    """One line of ``--against``: both ratios, and this tree's time over REV's with its limit."""
    verdict = "ok" if compared.quotient <= within else "SLOWER"
    return (f"{compared.target.name:<48} {compared.ratio:5.2f}  was {compared.earlier:5.2f}  "
            f"now/was {compared.quotient:4.2f} (<= {within}) {verdict}")


def run_against(revision: str, runs: int, within: float) -> list[Compared]:
    """Measure every target for this tree and ``revision`` side by side."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True)
    with tempfile.TemporaryDirectory(prefix="gpuready-startup-") as folder:
        earlier_src = export(revision, Path(folder) / "earlier")
        earlier_env = dict(ENV, PYTHONPATH=str(earlier_src))
        for env, tree in ((ENV, SRC), (earlier_env, earlier_src)):
            if _imported_from(env) != tree:
                raise SystemExit(f"gpuready imports from {_imported_from(env)}, not {tree}")
        inputs = prepare(Path(folder))
        return [compare(target, earlier_env, runs)
                for target in targets(*inputs, gpuready=ENTRY)]


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="pairs per target (default: 21)")
    parser.add_argument("--against", metavar="REV",
                        help="also measure git revision REV's gpuready in the same turns")
    parser.add_argument("--within", type=float, default=1.10, metavar="X",
                        help="with --against: the most this tree's time may be over REV's "
                        "(default: 1.10)")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs, medians of {args.runs} "
          "pairs taken in turns:")
    if args.against:
        print(f"this tree against {args.against} (its ratio to the baseline 'was'):")
        for compared in run_against(args.against, args.runs, args.within):
            print(compared_row(compared, args.within))
        return
    for measured in run_all(args.runs):
        print(row(measured))


if __name__ == "__main__":
    main()
