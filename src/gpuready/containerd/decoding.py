"""How each containerd line decodes a runc runtime's ``options`` table: one table of facts.

containerd turns the TOML ``options`` table into the runc shim's options message by matching each
key against the message's field names. What a key does therefore depends on how it is spelled,
and on the containerd line when one table spells a field twice. Every fact below was observed,
not read from containerd's source, and carries where it was observed:

- containerd 1.6: measured live on Debian's 1.6.20 with a stand-in runtime that records how the
  shim calls it (``tests/test_option_decoding.py`` measures it again on every run);
- containerd 2.1 and 2.3: recorded from 2.1.9 and 2.3.4 built from their release tags
  (``PodSandboxStatus`` verbose ``runtimeOptions`` and the stand-in's calls, replayed by the
  tests from ``tests/data/cri/observed``).

Surprises the table encodes: every line matches field names case-insensitively (``binaryName``
and ``BINARYNAME`` reach the shim, though containerd's documentation says only 2.x does), a
snake_case spelling (``binary_name``) is dropped by every line without a word, and with two
spellings of one field in one table 1.6 uses the exact field name while 2.1 and 2.3 use the
camelCase one, whatever their order in the file. A combination nobody recorded (an ALL-CAPS key
next to another spelling, or an odd mix of cases) is *unknown*: reported as such, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuready.compat import StrEnum
from gpuready.containerd.runc_options import known_options, normalized
from gpuready.records import Record


class Spelling(StrEnum):
    """How a key spells a runc option field."""

    EXACT = "exact"  # BinaryName: the field name itself
    CAMEL = "camelCase"  # binaryName
    UPPER = "ALL-CAPS"  # BINARYNAME
    OTHER_CASE = "other case"  # binaryNAME: matches case-insensitively, never recorded
    SNAKE = "snake_case"  # binary_name: underscores never match a field


class Verdict(StrEnum):
    """What a containerd line does with a key."""

    USED = "used"
    DROPPED = "dropped"
    UNKNOWN = "unknown"


MEASURED_1_6 = "measured live on containerd 1.6.20 (Debian) with a stand-in runtime"
RECORDED_2_1 = "recorded from containerd 2.1.9 (tests/data/cri/observed)"
RECORDED_2_3 = "recorded from containerd 2.3.4 (tests/data/cri/observed)"


class Line(Record):
    """One containerd release line and what it was observed to do with option spellings.

    ``single``: the verdict on a field spelled once, by spelling. ``pairs``: which spelling wins
    when a table spells one field twice (the key is the pair, in no order).
    """

    name: str
    release: tuple[int, int]
    source: str
    single: Mapping[Spelling, Verdict]
    pairs: Mapping[frozenset[Spelling], Spelling]


_SINGLE = {
    Spelling.EXACT: Verdict.USED,
    Spelling.CAMEL: Verdict.USED,
    Spelling.UPPER: Verdict.USED,
    Spelling.OTHER_CASE: Verdict.UNKNOWN,
    Spelling.SNAKE: Verdict.DROPPED,
}

LINES: tuple[Line, ...] = (
    Line(
        "1.6",
        (1, 6),
        MEASURED_1_6,
        _SINGLE,
        {frozenset({Spelling.EXACT, Spelling.CAMEL}): Spelling.EXACT},
    ),
    Line(
        "2.1",
        (2, 1),
        RECORDED_2_1,
        _SINGLE,
        {frozenset({Spelling.EXACT, Spelling.CAMEL}): Spelling.CAMEL},
    ),
    Line(
        "2.3",
        (2, 3),
        RECORDED_2_3,
        _SINGLE,
        {frozenset({Spelling.EXACT, Spelling.CAMEL}): Spelling.CAMEL},
    ),
)
LINES_BY_NAME: Mapping[str, Line] = {line.name: line for line in LINES}


def lines_for(*, major: int, release: tuple[int, int] | None = None) -> tuple[Line, ...]:
    """The lines whose facts apply: the release's own line, else every recorded line of ``major``.

    A release nobody recorded (1.7, 2.0, 2.2) gets its major's lines, and messages name them, so
    no fact is claimed for a release that was not observed.
    """
    if release is not None:
        for line in LINES:
            if line.release == release:
                return (line,)
    return tuple(line for line in LINES if line.release[0] == major) or LINES


def line_of_version(runtime_version: str) -> Line | None:
    """The recorded line of a CRI ``runtime_version`` such as ``1.6.20~ds1`` or ``v2.3.4``."""
    from gpuready.containerd.versions import parse_release

    release = parse_release(runtime_version or "")
    return next((line for line in LINES if line.release == release), None)


def spelling(key: str, field_name: str) -> Spelling | None:
    """How ``key`` spells ``field_name``, or None when it is not a spelling of it."""
    if key == field_name:
        return Spelling.EXACT
    if "_" in key or "-" in key:
        return Spelling.SNAKE if normalized(key) == normalized(field_name) else None
    if key.lower() != field_name.lower():
        return None
    if key == field_name[0].lower() + field_name[1:]:
        return Spelling.CAMEL
    if key == field_name.upper():
        return Spelling.UPPER
    return Spelling.OTHER_CASE


class FieldReading(Record):
    """How one line reads one runc field from an options table.

    ``keys`` are the spellings present, in file order; ``key`` is the one whose value the line
    uses (None when every spelling is dropped, or when ``verdict`` is unknown).
    """

    field: str
    line: str
    keys: tuple[str, ...]
    verdict: Verdict
    key: str | None
    source: str

    def value(self, options: Mapping[str, Any]) -> Any:
        """The value the line uses (None when no key is used)."""
        return options.get(self.key) if self.key is not None else None


def spellings_of(options: Mapping[str, Any], field_name: str) -> dict[str, Spelling]:
    """Every key of ``options`` that spells ``field_name``, with how, in file order."""
    found = {}
    lowered = field_name.lower()
    for key in options:
        # only these can spell it (see spelling); the rest are passed over without a call
        if key == field_name or "_" in key or "-" in key or key.lower() == lowered:
            how = spelling(key, field_name)
            if how is not None:
                found[key] = how
    return found


def read_field(options: Mapping[str, Any], field_name: str, line: Line) -> FieldReading:
    """How ``line`` reads ``field_name`` from ``options``."""
    found = spellings_of(options, field_name)
    live = {key: how for key, how in found.items() if line.single[how] is not Verdict.DROPPED}
    keys = tuple(found)
    if not live:
        verdict = Verdict.DROPPED if found else Verdict.USED
        return FieldReading(field_name, line.name, keys, verdict, None, line.source)
    if len(live) == 1:
        key, how = next(iter(live.items()))
        verdict = line.single[how]
        used = key if verdict is Verdict.USED else None
        return FieldReading(field_name, line.name, keys, verdict, used, line.source)
    winner = line.pairs.get(frozenset(live.values())) if len(live) == 2 else None
    if winner is None:
        return FieldReading(field_name, line.name, keys, Verdict.UNKNOWN, None, line.source)
    key = next(key for key, how in live.items() if how is winner)
    return FieldReading(field_name, line.name, keys, Verdict.USED, key, line.source)


def read_options(
    options: Mapping[str, Any], line: Line, *, fields: Iterable[str] | None = None
) -> dict[str, FieldReading]:
    """How ``line`` reads each runc field (every one of its major by default) from ``options``."""
    names = fields if fields is not None else known_options(major=line.release[0])
    return {name: read_field(options, name, line) for name in names}


def decoded_value(options: Mapping[str, Any], field_name: str, line: Line) -> tuple[Any, bool]:
    """``(value, known)``: the value ``line`` gives ``field_name``; known is False if unrecorded."""
    reading = read_field(options, field_name, line)
    return reading.value(options), reading.verdict is not Verdict.UNKNOWN


def intended_value(options: Mapping[str, Any], field_name: str) -> Any:
    """What the operator meant ``field_name`` to be: the exact field name's value, else the
    first spelling of it in the file (snake_case included), else None."""
    found = spellings_of(options, field_name)
    if field_name in found:
        return options[field_name]
    return options[next(iter(found))] if found else None
