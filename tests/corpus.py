"""Run ``gpuready configure`` over the corpus of real-world layouts and judge each result.

The corpus (``tests/data/corpus``, and the real defaults in ``tests/data/containerd``) holds
layouts written here, modelled on what kind, k3s, RKE2, GKE, EKS, AKS, kubespray, Docker's
containerd.io package, distributions and people produce. Each file is copied, configured as a
user would (``gpuready configure --config``; a file whose CRI plugin is disabled is reported
with exit 2, nothing written, and then configured again with ``--enable-cri``), and judged:

- registered: exit 0, and the runtime parses back at the table its version reads, with
  ``runtime_type`` and the options as booleans and strings;
- loaded (version 1 and 2): the real containerd's ``config dump`` of the result shows the
  runtime and does not disable the CRI plugin; version 3 and 4 files are checked statically
  only (no containerd 2.x runs here) and counted as such;
- lines kept: every original line is still in the file after the first run (files whose
  runtimes are an inline table are exempt: that edit changes one line, and says so).

Used by ``tests/test_corpus.py`` and ``scripts/corpus_report.py``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.layout import scan
from gpuready.containerd.versions import CRI_PLUGIN_IDS, spec_of
from gpuready.textfile import without_bom
from tests.helpers import DATA, added_lines_only, run_cli

CORPUS = sorted((DATA / "corpus").glob("*.toml")) + sorted((DATA / "containerd").glob("*.toml"))
BINARY = "/usr/bin/nvidia-container-runtime"

Dump = Callable[[Path], subprocess.CompletedProcess]


@dataclass
class Outcome:
    """What configure did with one corpus file."""

    name: str
    version: int
    registered: bool = False
    loaded: bool | None = None  # None: version 3/4, checked statically only
    lines_kept: bool = False
    inline_exempt: bool = False
    cri_was_disabled: bool = False
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Registered, loaded where a real containerd can tell, and every line kept."""
        return self.registered and self.loaded is not False and (
            self.lines_kept or self.inline_exempt)


def evaluate(source: Path, folder: Path, *, config_dump: Dump | None) -> Outcome:
    """Configure a copy of ``source`` in ``folder`` and judge the result."""
    path = folder / source.name
    shutil.copyfile(source, path)
    original = path.read_text()
    data = tomllib.loads(without_bom(original))
    outcome = Outcome(source.name, data.get("version", 1))
    # this machine's containerd is 1.6, which reads no version 3 or 4 file: those are
    # configured for the line that reads them (gpuready refuses them for 1.6)
    line = {3: ["--containerd-version", "2.1"], 4: ["--containerd-version", "2.3"]}.get(
        outcome.version, [])
    first = run_cli("configure", "--config", str(path), *line)
    outcome.inline_exempt = scan(without_bom(original)).inline(spec_of(data).runtimes_path) \
        is not None
    outcome.lines_kept = added_lines_only(original, path.read_text())
    result = first
    if first.code == 2 and "disabled_plugins turns it off" in first.err:
        outcome.cri_was_disabled = True  # refused, nothing written: --enable-cri says so
        result = run_cli("configure", "--config", str(path), "--enable-cri", *line)
    if result.code != 0:
        outcome.detail = f"exit {result.code}: {result.err.strip()}"
        return outcome
    after = tomllib.loads(without_bom(path.read_text()))
    outcome.registered = _registered(after)
    if outcome.version <= 2 and config_dump is not None:
        outcome.loaded = _loaded(config_dump, path)
    return outcome


def _registered(data: dict) -> bool:
    entry = facts.runtime(data, spec_of(data), "nvidia")
    options = facts.runtime_options(entry)
    return bool(entry) and entry.get("runtime_type") == "io.containerd.runc.v2" and \
        options.get("BinaryName") == BINARY and options.get("SystemdCgroup") is True


def _loaded(config_dump: Dump, path: Path) -> bool:
    result = config_dump(path)
    if result.returncode != 0:
        return False
    dumped = tomllib.loads(result.stdout)
    if set(dumped.get("disabled_plugins", [])) & CRI_PLUGIN_IDS:
        return False
    return _registered(dumped)


def figures(outcomes: list[Outcome]) -> dict[str, int]:
    """The corpus figures docs/configure.md shows."""
    old = [o for o in outcomes if o.version <= 2]
    return {
        "files": len(outcomes),
        "registered": sum(o.registered for o in outcomes),
        "version 1/2 files": len(old),
        "loaded by the real containerd (version 1/2)": sum(o.loaded is True for o in old),
        "version 3/4 files (checked statically)": len(outcomes) - len(old),
        "every line kept": sum(o.lines_kept for o in outcomes),
        "inline runtimes (one line changed, said why)": sum(o.inline_exempt for o in outcomes),
        "CRI disabled (reported, fixed with --enable-cri)": sum(
            o.cri_was_disabled for o in outcomes),
    }
