"""The corpus: every real-world layout is configured, loaded where a real containerd can tell,
and keeps every line (see tests/corpus.py for how each file is judged).

Version 1 and 2 results are loaded by Debian's real containerd (``config dump``). Version 3 and 4
results are checked statically (table path, types) and are not loaded by a real containerd 2.x,
which does not run here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus import CORPUS, evaluate


@pytest.mark.containerd
@pytest.mark.parametrize("source", CORPUS, ids=[path.name for path in CORPUS])
def test_each_corpus_file_is_registered_loaded_and_keeps_its_lines(
    source: Path, tmp_path: Path, config_dump
) -> None:
    outcome = evaluate(source, tmp_path, config_dump=config_dump)
    assert outcome.registered, outcome.detail or "runtime missing or wrong in the result"
    if outcome.version <= 2:
        assert outcome.loaded, "containerd's config dump does not load the runtime"
    assert outcome.lines_kept or outcome.inline_exempt, "an existing line changed"
    assert outcome.inline_exempt == (source.name == "serializer-inline-runtimes.toml")
    assert outcome.cri_was_disabled == (source.name == "docker-containerd-io.toml")
