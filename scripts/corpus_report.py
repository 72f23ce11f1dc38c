"""Print the corpus figures of docs/configure.md: run ``gpuready configure`` on every corpus file.

    python3 scripts/corpus_report.py            # figures, then one line per file

Version 1 and 2 results are loaded by the installed containerd (``config dump``); without one,
"loaded" is not measured. See tests/corpus.py for how each file is judged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from tests.corpus import CORPUS, evaluate, figures  # noqa: E402


def _config_dump():
    binary = shutil.which("containerd")
    if binary is None:
        return None

    def dump(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([binary, "--config", str(path), "config", "dump"],
                              capture_output=True, text=True, timeout=60)

    return dump


def main() -> int:
    """Evaluate the corpus; exit 1 when any file is not registered, loaded and kept."""
    dump = _config_dump()
    outcomes = []
    with tempfile.TemporaryDirectory() as folder:
        for source in CORPUS:
            case = Path(folder) / source.stem
            case.mkdir()
            outcomes.append(evaluate(source, case, config_dump=dump))
    release = subprocess.run(["containerd", "--version"], capture_output=True, text=True,
                             check=False).stdout.strip() if dump else "no containerd"
    print(f"corpus: {len(outcomes)} files; loaded by: {release}")
    print("| figure | count |\n|---|---|")
    for name, count in figures(outcomes).items():
        print(f"| {name} | {count} |")
    print()
    for outcome in outcomes:
        loaded = {True: "loaded", False: "NOT LOADED", None: "static"}[outcome.loaded]
        kept = "lines kept" if outcome.lines_kept else (
            "inline: one line changed" if outcome.inline_exempt else "LINE CHANGED")
        state = "registered" if outcome.registered else f"NOT REGISTERED {outcome.detail}"
        print(f"{outcome.name}: v{outcome.version}, {state}, {loaded}, {kept}")
    return 0 if all(outcome.ok for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
