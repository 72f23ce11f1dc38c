"""Equivalent layouts give equal results (hypothesis).

Real defaults (containerd 1.6.20, 2.1.9 and 2.3.4's ``config default``, the lab base) are
rewritten into equivalent layouts -- tables reordered or only implied, dotted keys, inline
tables, tabs, trailing blanks, comments, either quote -- and registered. The parsed result must
equal the parsed result of registering the canonical file, every original line must still be
there (unless the runtimes sit in an inline table, the one edit that changes a line), and for
version 2 files Debian's real containerd must show the runtime in ``config dump``. Its exit code
alone proves nothing (1.6.20 exits 0 on version 3 and 4 files and drops what it cannot place),
so the dump's runtime table is compared.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.document import load_config_text
from gpuready.containerd.layout import scan
from gpuready.containerd.register import RuntimeRequest, plan_registration
from gpuready.containerd.versions import spec_of
from tests.helpers import CONTAINERD_DATA, added_lines_only
from tests.layouts import layouts

BASES = {path.name: path.read_text() for path in sorted(CONTAINERD_DATA.glob("*.toml"))}
LOADED_BY_1X = sorted(name for name, text in BASES.items()
                      if tomllib.loads(text).get("version", 1) <= 2)
REQUEST = RuntimeRequest()


def _registered(text: str) -> str:
    return plan_registration(load_config_text(text, "config.toml"), REQUEST).after


CANONICAL = {name: tomllib.loads(_registered(text)) for name, text in BASES.items()}


@st.composite
def rewritten(draw, names=tuple(BASES)):
    name = draw(st.sampled_from(names))
    return name, draw(layouts(tomllib.loads(BASES[name])))


def _runtimes_inline(text: str) -> bool:
    spec = spec_of(tomllib.loads(text))
    return scan(text).inline(spec.runtimes_path) is not None


def check_equivalent(name: str, text: str) -> str:
    """Register in ``text``; assert the result equals the canonical one, lines kept."""
    after = _registered(text)
    assert tomllib.loads(after) == CANONICAL[name]
    if not _runtimes_inline(text):
        assert added_lines_only(text, after)
    again = plan_registration(load_config_text(after, "config.toml"), REQUEST)
    assert not again.changes
    return after


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rewritten())
def test_every_equivalent_layout_gives_the_canonical_result(case) -> None:
    check_equivalent(*case)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rewritten())
def test_every_equivalent_layout_gives_the_canonical_result_long_run(case) -> None:
    check_equivalent(*case)


def _loaded_runtime(config_dump, path: Path, text: str) -> dict | None:
    path.write_text(text)
    result = config_dump(path)
    assert result.returncode == 0, result.stderr
    dumped = tomllib.loads(result.stdout)
    spec = spec_of(dumped)
    return facts.runtime(dumped, spec, REQUEST.name)


def check_loaded(config_dump, folder: Path, name: str, text: str) -> None:
    """containerd loads the layout as it is, and loads the runtime registered in it."""
    before = folder / "before.toml"
    before.write_text(text)
    assume(config_dump(before).returncode == 0)  # a layout this containerd accepts
    loaded = _loaded_runtime(config_dump, folder / "after.toml", check_equivalent(name, text))
    assert loaded is not None, "containerd's config dump has no nvidia runtime"
    assert loaded["runtime_type"] == "io.containerd.runc.v2"
    assert loaded["options"]["BinaryName"] == REQUEST.binary
    assert loaded["options"]["SystemdCgroup"] is True


@pytest.mark.containerd
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=rewritten(tuple(LOADED_BY_1X)))
def test_containerd_loads_the_runtime_from_equivalent_layouts(case, config_dump, tmp_path) -> None:
    check_loaded(config_dump, tmp_path, *case)


@pytest.mark.slow
@pytest.mark.containerd
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=rewritten(tuple(LOADED_BY_1X)))
def test_containerd_loads_the_runtime_from_equivalent_layouts_long_run(
    case, config_dump, tmp_path
) -> None:
    check_loaded(config_dump, tmp_path, *case)
