"""Fuzzing the commands with TOML and YAML inputs: exit 0, 1 or 2 with a message, never a crash.

hypothesis mutates the real defaults (containerd's own ``config default`` of three releases, a
generated CDI spec, a RuntimeClass) and builds nested documents, then runs ``lint``,
``configure --dry-run``, ``doctor``, ``cdi validate`` and ``cdi list`` on them in this process.
Every run must end with exit 0, 1 or 2, never an "internal error", and a file a command refuses
stays byte for byte as it was. Inputs that once failed are kept under
``tests/data/fuzz-regressions/`` and run every time. A longer run is marked slow.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuready.cli import main
from tests.helpers import CONTAINERD_DATA, DATA

REGRESSIONS = DATA / "fuzz-regressions"
TOML_BASES = sorted(CONTAINERD_DATA.glob("*.toml"))
YAML_BASES = [REGRESSIONS / "generated-spec.yaml", DATA / "runtimeclass" / "nvidia.yaml",
              DATA / "cdi/specs/min-0.5.0-host-path.yaml"]
FRAGMENTS = ["[", "]", "{", "}", '"', "'", "'''", '"""', "=", "\n", ".", "#", "&a ", "*a",
             "- ", ": ", "true", "5", "[[", "]]", "\\", "\ufeff", "\x00", "\r\n", "runtimes",
             "plugins", "default_runtime_name", "SystemdCgroup", "version = 4", "!!python/name:x"]


def run(*argv: str) -> tuple[int, str, str]:
    """``gpuready ARGV`` in this process: exit code, standard output, standard error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main.run(list(argv))
        except SystemExit as exit_:  # argparse's own exit for a bad option value
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def mutated(base: str, data) -> str:
    """``base`` with a few random cuts, duplications and fragments inserted."""
    text = base
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(text)), label="at")
        kind = data.draw(st.sampled_from(["insert", "delete", "repeat"]), label="kind")
        if kind == "insert":
            text = text[:at] + data.draw(st.sampled_from(FRAGMENTS), label="fragment") + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 40), label="cut"):]
        else:
            piece = text[at:at + data.draw(st.integers(1, 200), label="piece")]
            text = text[:at] + piece * data.draw(st.integers(2, 50), label="times") + text[at:]
    return text


def nested(opening: str, closing: str, depth: int) -> str:
    return opening * depth + closing * depth


def check_toml_commands(tmp: Path, text: str) -> None:
    config = tmp / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(text.encode("utf-8", "surrogatepass"))
    before = config.read_bytes()
    for argv in (("lint", str(config)), ("configure", "--config", str(config), "--dry-run"),
                 ("doctor", "--root", str(tmp), "--containerd-version", "2.1.9")):
        code, out, err = run(*argv)
        assert code in (0, 1, 2), (argv, code, err)
        assert "internal error" not in err, (argv, err)
        assert config.read_bytes() == before, argv
    assert [p.name for p in config.parent.iterdir()] == ["config.toml"]


def check_yaml_commands(tmp: Path, text: str) -> None:
    spec = tmp / "etc/cdi/nvidia.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_bytes(text.encode("utf-8", "surrogatepass"))
    for argv in (("cdi", "validate", str(spec)), ("cdi", "list", "--root", str(tmp)),
                 ("doctor", "--root", str(tmp), "--runtimeclass", str(spec))):
        code, out, err = run(*argv)
        assert code in (0, 1, 2), (argv, code, err)
        assert "internal error" not in err, (argv, err)


FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FUZZ_LONG = settings(FUZZ, max_examples=600)


def _toml_case(tmp_path_factory, data) -> None:
    base = data.draw(st.sampled_from(TOML_BASES), label="base").read_text()
    if data.draw(st.booleans(), label="nest"):
        opening, closing = data.draw(st.sampled_from([("[", "]"), ("{a = ", "}")]))
        base += f"\nx = {nested(opening, closing, data.draw(st.integers(1, 3000)))}\n"
    check_toml_commands(tmp_path_factory.mktemp("toml"), mutated(base, data))


def _yaml_case(tmp_path_factory, data) -> None:
    base = data.draw(st.sampled_from(YAML_BASES), label="base").read_text()
    if data.draw(st.booleans(), label="nest"):
        opening, closing = data.draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        base = f"x: {nested(opening, closing, data.draw(st.integers(1, 3000)))}\n" + base
    check_yaml_commands(tmp_path_factory.mktemp("yaml"), mutated(base, data))


@FUZZ
@given(data=st.data())
def test_mutated_containerd_configs_never_crash(tmp_path_factory, data):
    _toml_case(tmp_path_factory, data)


@FUZZ
@given(data=st.data())
def test_mutated_yaml_never_crashes(tmp_path_factory, data):
    _yaml_case(tmp_path_factory, data)


@pytest.mark.slow
@FUZZ_LONG
@given(data=st.data())
def test_mutated_containerd_configs_never_crash_long(tmp_path_factory, data):
    _toml_case(tmp_path_factory, data)


@pytest.mark.slow
@FUZZ_LONG
@given(data=st.data())
def test_mutated_yaml_never_crashes_long(tmp_path_factory, data):
    _yaml_case(tmp_path_factory, data)


@pytest.mark.parametrize("case", sorted(p.name for p in REGRESSIONS.iterdir()))
def test_once_failing_inputs_stay_fixed(tmp_path, case):
    path = REGRESSIONS / case
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    if path.suffix == ".toml":
        check_toml_commands(tmp_path, text)
    else:
        check_yaml_commands(tmp_path, text)


def test_the_regression_corpus_is_there():
    assert len(list(REGRESSIONS.iterdir())) >= 8
    shutil.disk_usage(REGRESSIONS)  # a folder, kept in the repository
