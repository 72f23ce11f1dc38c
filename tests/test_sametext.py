"""Texts shared between nodes of an audit: one parse per distinct text, never changed by a rule.

``gpuready audit`` keeps what a config text parses to and hands the same objects to every node
with that text (:mod:`gpuready.sametext`); a rule that changed them would change the verdict of
every later node. These tests run doctor with sharing on over every config in tests/data and
check that what is kept still equals a fresh parse afterwards.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuready import sametext
from gpuready.compat import tomllib
from gpuready.containerd.files import Options
from gpuready.rules.engine import doctor
from gpuready.rules.registry import selection
from gpuready.textfile import without_bom
from tests.helpers import REPO

CONFIGS = sorted((REPO / "tests" / "data").rglob("*.toml"))


def test_no_rule_changes_a_parse_that_other_nodes_share(tmp_path: Path) -> None:
    everything = selection(select=None, ignore=None)
    kept = 0
    with sametext.shared():
        for index, config in enumerate(CONFIGS):
            root = tmp_path / f"node{index}"
            (root / "etc" / "containerd").mkdir(parents=True)
            shutil.copyfile(config, root / "etc" / "containerd" / "config.toml")
            for _ in range(2):  # the second run takes the kept parse
                doctor(options=Options(root=root), selected=everything, probe=False)
        for config in CONFIGS:
            text = without_bom(config.read_bytes().decode("utf-8", "replace"))
            parsed = sametext.get("toml", text)
            if parsed is not None:
                kept += 1
                assert parsed.data == tomllib.loads(text), config
    assert kept > len(CONFIGS) // 2


def test_nothing_is_kept_outside_an_audit(tmp_path: Path) -> None:
    root = tmp_path / "node"
    (root / "etc" / "containerd").mkdir(parents=True)
    shutil.copyfile(CONFIGS[0], root / "etc" / "containerd" / "config.toml")
    doctor(options=Options(root=root), selected=selection(select=None, ignore=None), probe=False)
    assert sametext.get("toml", without_bom(CONFIGS[0].read_text())) is None


def _fresh_node(root: Path) -> Path:
    (root / "etc" / "containerd").mkdir(parents=True)
    default = REPO / "tests" / "data" / "containerd" / "containerd-1.7.34-default.toml"
    shutil.copyfile(default, root / "etc" / "containerd" / "config.toml")
    return root


def test_a_first_edit_parses_each_config_text_once(tmp_path: Path, capsys, monkeypatch) -> None:
    """Planning, verifying, recording and judging an edit all read the same two texts (the
    file, the file as it would be): each is parsed once, whoever asks."""
    from gpuready.cli import main
    from gpuready.containerd import document

    monkeypatch.setattr(document, "_RECENT_PARSES", sametext.Recent())  # nothing from before
    parsed: list[str] = []
    real_loads = tomllib.loads

    def counting_loads(text: str, **options):
        parsed.append(text)
        return real_loads(text, **options)

    monkeypatch.setattr(document.tomllib, "loads", counting_loads)
    root = _fresh_node(tmp_path / "node")
    code = main.run(["configure", "--dry-run", "--root", str(root), "--containerd-version", "1.7"])
    assert code == 0, capsys.readouterr()
    assert "runtimes.nvidia]" in capsys.readouterr().out  # an edit was planned and shown
    repeated = [text[:60] for text in set(parsed) if parsed.count(text) > 1]
    assert repeated == [], f"{len(parsed)} parses of {len(set(parsed))} texts"
    # what the readers shared is still what the texts say: none of them changed it
    for text, data in document._RECENT_PARSES._kept.items():
        assert data == real_loads(text)


def test_setup_leaves_every_shared_parse_as_its_text_says(tmp_path: Path, capsys,
                                                          monkeypatch) -> None:
    """setup plans, writes, records and checks the config: the parses it shared along the way
    are never changed by a reader."""
    from gpuready.cli import main
    from gpuready.containerd import document

    kept = sametext.Recent(limit=64)
    monkeypatch.setattr(document, "_RECENT_PARSES", kept)
    root = _fresh_node(tmp_path / "node")
    code = main.run(["setup", "--root", str(root), "--containerd-version", "1.7"])
    assert code == 0, capsys.readouterr()
    assert len(kept._kept) >= 2
    for text, data in kept._kept.items():
        assert data == tomllib.loads(text)
