"""gpuready's records: NamedTuple's and a mutable dataclass's behaviour, made without compiling
source (the start-up cost they replace, README and ``benchmarks/bench_startup.py``)."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from gpuready.records import Factory, MutableRecord, Record
from tests.helpers import REPO


class Reading(Record):
    """A record as gpuready's modules write them."""

    key: str
    line: int = 0
    notes: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        return f"{self.key}:{self.line}"


class Found(MutableRecord):
    """A result filled in as it is found."""

    file: str
    problems: list[str] = Factory(list)
    count: int = 0


def test_a_record_takes_its_fields_in_order_or_by_name_and_fills_in_defaults() -> None:
    assert Reading("a") == ("a", 0, ())
    assert Reading("a", 3) == Reading(key="a", line=3) == Reading("a", notes=(), line=3)
    assert Reading("a", 3).shown == "a:3"
    assert repr(Reading("a", 3)) == "Reading(key='a', line=3, notes=())"
    assert Reading._fields == ("key", "line", "notes")
    assert Reading._field_defaults == {"line": 0, "notes": ()}


@pytest.mark.parametrize(("args", "kwargs", "said"), [
    ((), {}, "missing argument 'key'"),
    (("a", 1, (), 4), {}, "takes 3 arguments, 4 given"),
    (("a",), {"colour": 1}, "unexpected or repeated arguments ['colour']"),
    (("a",), {"key": "b"}, "unexpected or repeated arguments ['key']"),
])
def test_wrong_arguments_are_a_type_error_naming_them(args, kwargs, said) -> None:
    with pytest.raises(TypeError, match=said.replace("[", r"\[").replace("]", r"\]")):
        Reading(*args, **kwargs)


def test_a_record_is_an_immutable_tuple_with_namedtuples_helpers() -> None:
    reading = Reading("a", 3)
    with pytest.raises(AttributeError):
        reading.line = 4  # type: ignore[misc]
    assert not hasattr(reading, "__dict__")
    key, line, notes = reading
    assert (key, line, notes) == ("a", 3, ())
    assert reading._replace(line=5) == Reading("a", 5)
    with pytest.raises(TypeError, match="no field colour"):
        reading._replace(colour=1)
    assert reading._asdict() == {"key": "a", "line": 3, "notes": ()}
    assert Reading._make(["b", 1, ()]) == Reading("b", 1)
    assert pickle.loads(pickle.dumps(reading)) == reading
    assert sorted([Reading("b"), Reading("a", 2)]) == [Reading("a", 2), Reading("b")]
    assert {reading: 1}[Reading("a", 3)] == 1


def test_methods_may_extend_a_record_but_fields_may_not() -> None:
    class Shown(Reading):
        def twice(self) -> str:
            return self.shown * 2

    assert Shown("a", 1).twice() == "a:1a:1"
    with pytest.raises(TypeError, match="cannot be extended"):
        class More(Reading):  # noqa: F841
            extra: int = 0
    with pytest.raises(TypeError, match="without a default follows one with"):
        class Wrong(Record):  # noqa: F841
            first: int = 0
            second: int


def test_a_mutable_record_makes_each_default_anew_and_compares_by_value() -> None:
    one, two = Found("a"), Found("a")
    one.problems.append("x")
    assert two.problems == [] and one != two
    two.problems.append("x")
    assert one == two and one != Found("b")
    one.count += 1
    assert repr(one) == "Found(file='a', problems=['x'], count=1)"
    with pytest.raises(TypeError):
        hash(one)
    with pytest.raises(TypeError, match="missing argument 'file'"):
        Found()


DEFINING = """
import sys
sys.path.insert(0, {src!r})
from gpuready.records import MutableRecord, Record
compiled = []
sys.addaudithook(lambda event, args: compiled.append(event) if event == "compile" else None)
class A(Record):
    a: int
    b: str = ""
class B(MutableRecord):
    a: int
print(len(compiled))
from typing import NamedTuple
class C(NamedTuple):
    a: int
print(len(compiled))
"""


def test_defining_a_record_compiles_no_source_where_namedtuple_does() -> None:
    """The start-up cost avoided: ``typing.NamedTuple`` (and ``dataclass``) compile each class's
    methods from generated source; a record compiles nothing."""
    result = subprocess.run([sys.executable, "-c", DEFINING.format(src=str(REPO / "src"))],
                            capture_output=True, text=True, check=True)
    records, with_namedtuple = result.stdout.split()
    assert records == "0"
    assert int(with_namedtuple) > 0
