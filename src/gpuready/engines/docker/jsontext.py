"""daemon.json as text: parse with positions, and edit by inserting into the text itself.

JSON has no comments, but an operator's ``daemon.json`` still has a key order and an indentation
that a ``json.dumps`` round trip would lose. So gpuready never re-serialises the file: it finds
where each member is written (:func:`parse_spans`, run only on text ``json`` already accepted),
splices the new member or value into the text, copying the indentation of the members beside it,
and then re-parses the result to prove that the file now means exactly the old data plus the
change (:func:`checked_edit`). An edit that would mean anything else is never written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpuready.errors import InputError
from gpuready.records import Factory, MutableRecord
from gpuready.textfile import without_bom

MAX_DEPTH = 64  # dockerd's config is a few levels deep; deeper input is refused, not recursed
_WHITESPACE = " \t\r\n"


class Node(MutableRecord):
    """A JSON value as written: its span ``[start, end)`` and, for an object, its members."""

    start: int
    end: int
    members: list[Member] = Factory(list)
    is_object: bool = False


class Member(MutableRecord):
    """One ``"key": value`` of an object: where the key starts, and the value's node."""

    key: str
    key_start: int
    value: Node


def load_json(text: str, path: Path | str) -> Any:
    """The data of ``text`` as Go's ``encoding/json`` reads it, or one positioned InputError.

    Python's ``json`` accepts ``NaN`` and ``Infinity``, which dockerd rejects: they are refused
    here too. An integer too long to read (CPython refuses more than 4300 digits) is a bad value
    at its line and column, not Python's advice on ``sys.set_int_max_str_digits``.
    """
    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    body = without_bom(text)
    try:
        return json.loads(body, parse_constant=refuse_constant, parse_int=_checked_int)
    except json.JSONDecodeError as error:
        raise InputError(path, f"invalid JSON: {error.msg}", line=error.lineno,
                         column=error.colno) from None
    except _TooLong as error:
        line, column = position(body, _number_offset(body, error.digits))
        raise InputError(path, f"bad value: an integer of {len(error.digits)} digits, more than "
                         f"the {MAX_INT_DIGITS} gpuready reads", line=line, column=column) from None
    except ValueError as error:
        raise InputError(path, f"invalid JSON: {error}") from None
    except RecursionError:
        raise InputError(path, "invalid JSON: nested too deeply") from None


# CPython's default limit on the digits of an integer read from text (sys.int_info
# .default_max_str_digits, 3.11 and the 3.9/3.10 security releases): fixed here so every
# interpreter refuses the same files.
MAX_INT_DIGITS = 4300
# A JSON string or number token: in valid JSON, a digit inside a string is consumed by the string.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+')


class _TooLong(ValueError):
    """An integer of more digits than :data:`MAX_INT_DIGITS`."""

    def __init__(self, digits: str) -> None:
        super().__init__(digits[:20])
        self.digits = digits


def _checked_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _TooLong(digits.lstrip("-"))
    return int(digits)


def _number_offset(text: str, digits: str) -> int:
    """Where the integer written ``digits`` starts in ``text`` (0 if not found)."""
    for token in _TOKEN.finditer(text):
        if token.group().lstrip("-") == digits:
            return token.start()
    return 0


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def parse_spans(text: str) -> Node:
    """Where every value of ``text`` (already valid JSON) is written."""
    node, end = _value(text, _skip(text, 0), 0)
    return node


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _value(text: str, index: int, depth: int) -> tuple[Node, int]:
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    char = text[index]
    if char == "{":
        return _object(text, index, depth)
    if char == "[":
        return _array(text, index, depth)
    if char == '"':
        end = _string_end(text, index)
        return Node(index, end), end
    end = index
    while end < len(text) and text[end] not in _WHITESPACE + ",]}":
        end += 1
    return Node(index, end), end


def _string_end(text: str, index: int) -> int:
    index += 1
    while text[index] != '"':
        index += 2 if text[index] == "\\" else 1
    return index + 1


def _object(text: str, start: int, depth: int) -> tuple[Node, int]:
    node = Node(start, start, is_object=True)
    index = _skip(text, start + 1)
    while text[index] != "}":
        key_end = _string_end(text, index)
        key = json.loads(text[index:key_end])
        colon = _skip(text, key_end)
        value, after = _value(text, _skip(text, colon + 1), depth + 1)
        node.members.append(Member(key, index, value))
        index = _skip(text, after)
        if text[index] == ",":
            index = _skip(text, index + 1)
    node.end = index + 1
    return node, node.end


def _array(text: str, start: int, depth: int) -> tuple[Node, int]:
    index = _skip(text, start + 1)
    while text[index] != "]":
        _, after = _value(text, index, depth + 1)
        index = _skip(text, after)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return Node(start, index + 1), index + 1


def member(node: Node, key: str) -> Member | None:
    """The last member called ``key`` (the one Go's decoder keeps), or None."""
    found = [m for m in node.members if m.key == key]
    return found[-1] if found else None


def find(root: Node, key_path: tuple[str, ...]) -> Member | None:
    """The member at ``key_path`` below the top-level object, or None."""
    node, found = root, None
    for key in key_path:
        if not node.is_object:
            return None
        found = member(node, key)
        if found is None:
            return None
        node = found.value
    return found


# -- layout: how the file indents, so new members look like their neighbours ------------------


def _line_indent(text: str, offset: int) -> str | None:
    """The whitespace before ``offset`` on its line, or None when text precedes it there."""
    line_start = text.rfind("\n", 0, offset) + 1
    before = text[line_start:offset]
    return before if before.strip(" \t") == "" else None


def indent_unit(text: str, root: Node) -> str:
    """The file's indentation step (two spaces when the file has no indented member); empty
    for a file written on one line, whose additions stay on that line."""
    if root.members and "\n" not in text[root.start : root.end]:
        return ""
    for first in root.members[:1]:
        indent = _line_indent(text, first.key_start)
        if indent:
            return indent
    return "  "


def render_value(value: Any, *, indent: str, unit: str) -> str:
    """``value`` as JSON laid out like the file, its continuation lines at ``indent``."""
    if not isinstance(value, (dict, list)) or not value or not unit:
        return json.dumps(value)
    if unit.startswith("\t"):
        rendered = json.dumps(value, indent="\t")
    else:
        rendered = json.dumps(value, indent=len(unit))
    return rendered.replace("\n", "\n" + indent)


def insert_member(text: str, parent: Node, key: str, value: Any, *, unit: str) -> str:
    """``text`` with ``"key": value`` added as the last member of the object ``parent``."""
    if not parent.members:
        return _fill_empty(text, parent, key, value, unit=unit)
    last = parent.members[-1]
    indent = _line_indent(text, last.key_start)
    if indent is None:  # members written on one line: stay on that line
        addition = f", {json.dumps(key)}: {json.dumps(value)}"
    else:
        rendered = render_value(value, indent=indent, unit=unit)
        addition = f",\n{indent}{json.dumps(key)}: {rendered}"
    return text[: last.value.end] + addition + text[last.value.end :]


def _fill_empty(text: str, parent: Node, key: str, value: Any, *, unit: str) -> str:
    if not unit:
        return f"{text[: parent.start + 1]}{json.dumps(key)}: {json.dumps(value)}" \
            f"{text[parent.end - 1 :]}"
    line_start = text.rfind("\n", 0, parent.start) + 1
    line = text[line_start:parent.start]
    outer = line[: len(line) - len(line.lstrip(" \t"))]
    inner = outer + unit
    rendered = render_value(value, indent=inner, unit=unit)
    body = f"\n{inner}{json.dumps(key)}: {rendered}\n{outer}"
    return text[: parent.start + 1] + body + text[parent.end - 1 :]


def remove_member(text: str, parent: Node, key: str) -> str:
    """``text`` without the member ``key`` of ``parent`` (and the comma that separated it)."""
    index = next(i for i, m in enumerate(parent.members) if m.key == key)
    target = parent.members[index]
    if len(parent.members) == 1:
        return text[: parent.start + 1] + text[parent.end - 1 :]
    if index > 0:  # from the end of the previous value: its comma and our whole member go
        start = parent.members[index - 1].value.end
        return text[:start] + text[target.value.end :]
    following = parent.members[1]
    return text[: target.key_start] + text[following.key_start :]


def replace_value(text: str, node: Node, value: Any, *, indent: str, unit: str) -> str:
    """``text`` with the value written at ``node`` replaced by ``value``."""
    return text[: node.start] + render_value(value, indent=indent, unit=unit) + text[node.end :]


def checked_edit(
    before_text: str, after_text: str, expected: Any, path: Path | str
) -> str:
    """``after_text``, once it parses to exactly ``expected``; else an error, nothing written.

    The proof that a text edit changed the meaning only as intended: the edited file is parsed
    again and compared with the old data plus the change.
    """
    try:
        actual = json.loads(after_text)
    except json.JSONDecodeError as error:
        raise InputError(path, f"gpuready could not edit this layout safely ({error.msg}); "
                         "nothing written") from None
    if actual != expected:
        raise InputError(path, "gpuready could not edit this layout safely (the edit would "
                         "change other values); nothing written")
    return after_text

