"""What gpuready takes from newer Pythons behaves the same on 3.9 and 3.10 (the suite runs there
too): the TOML parser's values and errors, and string enums printed in messages and JSON."""

from __future__ import annotations

import json
import sys

import pytest

from gpuready.compat import StrEnum, tomllib
from gpuready.problems import Problem, Severity


def test_the_toml_parser_is_the_standard_one_or_its_backport() -> None:
    expected = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    assert tomllib.__name__.split(".")[0] == expected
    assert tomllib.loads('version = 2\n[a."b.c"]\nx = true\n') == {
        "version": 2, "a": {"b.c": {"x": True}}}
    with pytest.raises(tomllib.TOMLDecodeError, match=r"line 2, column"):
        tomllib.loads("a = 1\nb = \n")


def test_a_string_enum_prints_as_its_value_in_messages_and_json() -> None:
    """A severity shows as 'error' in text, f-strings and JSON, never 'Severity.ERROR'."""

    class Colour(StrEnum):
        RED = "red"

    assert str(Colour.RED) == "red" and f"{Colour.RED}" == "red" and Colour.RED == "red"
    assert f"{Severity.ERROR:<7}|" == "error  |"
    problem = Problem("toml-syntax", Severity.ERROR, "bad", "/etc/containerd/config.toml")
    assert json.loads(json.dumps(problem.to_dict()))["severity"] == "error"


def test_the_built_in_sha256_gives_hashlibs_digest() -> None:
    import hashlib

    from gpuready.textfile import sha256

    text = "version = 2\n# h\u00e9\n"
    assert sha256(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert sha256(b"\x00\xff") == hashlib.sha256(b"\x00\xff").hexdigest()
    assert sha256(None) is None
