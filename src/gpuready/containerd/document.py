"""Reading a containerd config: bytes to text, text to data, every failure a one-line error.

Two parsers, each for its job: ``tomllib`` (the standard library) for verifying and facts, and
``tomlkit`` (imported only when a file is about to be edited) for edits that keep every comment.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpuready import sametext
from gpuready.compat import tomllib
from gpuready.errors import InputError
from gpuready.node import HOST, FileKind, Node
from gpuready.records import Record
from gpuready.textfile import restyle, without_bom

_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_END_OF_DOCUMENT = re.compile(r"\s*\(at end of document\)\s*$")


class ConfigFile(Record):
    """A config file as read: its path, its exact text, and the ``tomllib`` parse of it."""

    path: Path
    text: str
    data: dict[str, Any]


def parse_toml(text: str, path: Path | str) -> dict[str, Any]:
    """Parse with ``tomllib``; a syntax error becomes :class:`InputError` with line and column.

    The bounds of :func:`loads_bounded` apply: nesting, key paths and the number of keys.
    """
    try:
        return loads_bounded(without_bom(text), path)
    except tomllib.TOMLDecodeError as error:
        raise toml_error(str(error), text, path) from None


MAX_TOML_DEPTH = 64
MAX_KEY_PARTS = 64  # parts of one table header or dotted key (``a.b.c`` has 3)
# Keys and table headers in one file: containerd's own default config has about 200, and
# gpuready's edits of the largest file allowed stay within seconds.
MAX_TOML_KEYS = 4096
# What opens or closes strings, comments and nested values, and the escape character.
_TOML_TOKEN = re.compile("\"\"\"|'''|[\"'#\\[\\]{}\\n\\\\]")
_CLOSER = {'"""': '"""', "'''": "'''", '"': '"', "'": "'", "#": "\n"}


def nesting_error(text: str, path: Path | str) -> InputError | None:
    """An error when arrays and inline tables nest deeper than :data:`MAX_TOML_DEPTH` levels.

    ``tomllib`` and ``tomlkit`` recurse once per level, so a few thousand ``[`` end in a
    RecursionError; the text is scanned first (strings and comments skipped) and refused at
    the place where the limit is passed.
    """
    depth, closer, skip_to = 0, None, 0
    for match in _TOML_TOKEN.finditer(text):
        token, start = match.group(), match.start()
        if start < skip_to:
            continue
        if closer is None:
            if token in _CLOSER:
                closer = _CLOSER[token]
            elif token in "[{":
                depth += 1
                if depth > MAX_TOML_DEPTH:
                    return _too_deep(text, start, path)
            elif token in "]}":
                depth = max(depth - 1, 0)
        elif token == "\\" and closer in ('"', '"""'):
            skip_to = start + 2  # an escape: the next character belongs to the string
        elif token == closer or token[0] == closer or (token == "\n" and closer in "\"'"):
            closer = None  # closed ('"""' in a '"' string: closed, then an empty string)
    return None


# The texts parsed a moment ago, within the bounds, and their data: one command meets the same
# text several times (a plan's before and after, its verification, the gate's verdict, the
# record of what changed) and parses it once. Only read, never changed: whoever edits data
# copies it first. A text that failed is not kept: its error names the file it was read from.
_RECENT_PARSES = sametext.Recent()


def loads_bounded(text: str, path: Path | str) -> dict[str, Any]:
    """``tomllib.loads`` that refuses what :func:`nesting_error` and :func:`bounds_error`
    refuse, with the same errors.

    Raises :class:`InputError` for nesting deeper than :data:`MAX_TOML_DEPTH` (brackets, table
    headers and dotted keys together), for key paths and key counts past the bounds, and
    ``tomllib.TOMLDecodeError`` for other syntax errors. The brackets are scanned only when the
    text does not parse or when the data nests deeper than the limit: every array and inline
    table of a parsed text is a list or dict in its data, nested at least as deep as its
    brackets (a table header's brackets nest two deep at most), so shallow data proves the
    brackets shallow.
    """
    kept = _RECENT_PARSES.get(text)
    if kept is not None:
        return kept
    too_large = bounds_error(text, path)
    if too_large is not None:
        raise too_large
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        too_deep = nesting_error(text, path)
        if too_deep is not None:
            raise too_deep from None
        if isinstance(error, RecursionError):  # deep beyond the scan's notion: still refused
            raise InputError(path, f"invalid TOML: nested deeper than {MAX_TOML_DEPTH} "
                             "levels; refused") from None
        raise
    if _deeper_than(data, MAX_TOML_DEPTH):
        raise nesting_error(text, path) or InputError(
            path, f"invalid TOML: tables and keys nested deeper than {MAX_TOML_DEPTH} levels; "
            "refused")
    _RECENT_PARSES.put(text, data)
    return data


# What opens or closes strings, comments, nested values and statements, and the escape.
_KEY_TOKEN = re.compile("\"\"\"|'''|[\"'#\\[\\]{}\\n\\\\.=,]")


def bounds_error(text: str, path: Path | str) -> InputError | None:
    """An error when a key path has more than :data:`MAX_KEY_PARTS` parts or the text holds
    more than :data:`MAX_TOML_KEYS` keys and table headers; None when it keeps both bounds.

    Checked before parsing, in linear time: ``tomllib`` takes time and memory quadratic in the
    parts of one dotted key (200,000 parts exhaust any machine), and every later pass over the
    data grows with its keys. Only a text that could pass a bound (enough dots on one line,
    enough ``=`` and ``[``) is scanned; the error names the line where the bound is passed.
    """
    if not _may_pass_bounds(text):
        return None
    return _KeyScan(text, path).run()


def _may_pass_bounds(text: str) -> bool:
    if text.count("=") + text.count("[") > MAX_TOML_KEYS:
        return True
    return text.count(".") >= MAX_KEY_PARTS and any(
        line.count(".") >= MAX_KEY_PARTS for line in text.split("\n"))


class _KeyScan:
    """One pass over a text's tokens, strings and comments skipped, counting key parts and
    statements (a ``key =`` inside an inline table counts as one) and, as
    :func:`nesting_error` does, arrays and inline tables."""

    def __init__(self, text: str, path: Path | str) -> None:
        self.text, self.path = text, path
        self.open: list[str] = []  # the arrays and inline tables the scan is inside
        self.in_key, self.in_header = True, False
        self.parts, self.keys = 1, 0

    def run(self) -> InputError | None:
        """The first bound passed, in text order; None when none is."""
        closer, skip_to = None, 0
        for match in _KEY_TOKEN.finditer(self.text):
            token, start = match.group(), match.start()
            if start < skip_to:
                continue
            if closer is not None:
                if token == "\\" and closer in ('"', '"""'):
                    skip_to = start + 2  # an escape: the next character belongs to the string
                    continue
                if not (token == closer or token[0] == closer
                        or (token == "\n" and closer in "\"'")):
                    continue
                closer = None
                if token != "\n":
                    continue
            elif token in _CLOSER:
                closer = _CLOSER[token]
                continue
            refused = self._token(token, start)
            if refused is not None:
                return refused
        return None

    def _token(self, token: str, start: int) -> InputError | None:
        if token == "\n":
            if not self.open:
                self._statement()
        elif token == "." and self.in_key:
            self.parts += 1
            if self.parts > MAX_KEY_PARTS:
                return self._error(start, f"invalid TOML: a key or table header of more than "
                                   f"{MAX_KEY_PARTS} parts; refused")
        elif token == "=" and self.in_key:
            return self._key_ends(start)
        elif token == "[":
            return self._bracket(start)
        elif token == "]" and self.in_header:
            self.in_header = self.in_key = False
        elif token == "{":
            self._statement()
            return self._push(token, start)
        elif token == "," and self.open and self.open[-1] == "{":
            self._statement()
        elif token in "]}" and self.open:
            self.open.pop()
            self.in_key = False
        return None

    def _statement(self) -> None:
        self.in_key, self.parts = True, 1

    def _bracket(self, start: int) -> InputError | None:
        if self.in_header:
            return None  # the second bracket of ``[[``
        if self.in_key and not self.open:
            self.in_header = True
            return self._key_ends(start, header=True)
        return self._push(token="[", start=start)

    def _push(self, token: str, start: int) -> InputError | None:
        self.open.append(token)
        return _too_deep(self.text, start, self.path) if len(self.open) > MAX_TOML_DEPTH else None

    def _key_ends(self, start: int, *, header: bool = False) -> InputError | None:
        self.keys += 1
        self.in_key = header
        if self.keys > MAX_TOML_KEYS:
            return self._error(start, f"more than {MAX_TOML_KEYS} keys and tables, more than "
                               "gpuready reads in one containerd config; refused")
        return None

    def _error(self, start: int, reason: str) -> InputError:
        return InputError(self.path, reason, line=self.text.count("\n", 0, start) + 1)


def _deeper_than(data: dict[str, Any], limit: int) -> bool:
    """True when lists and dicts nest more than ``limit`` levels below the document."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        for child in value.values() if isinstance(value, dict) else value:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _too_deep(text: str, start: int, path: Path | str) -> InputError:
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return InputError(path, f"invalid TOML: arrays and inline tables nested deeper than "
                      f"{MAX_TOML_DEPTH} levels; refused", line=line, column=column)


def toml_error(message: str, text: str, path: Path | str) -> InputError:
    """Turn a ``tomllib`` message, whose position is inside parentheses, into an InputError.

    A known mistake on the line the parser stopped at (doubled quotes, an unquoted dotted ID, a
    template placeholder) adds a hint beside the parser's message.
    """
    match = _POSITION.search(message)
    end = _END_OF_DOCUMENT.search(message)
    if match:
        reason, line, column = message[: match.start()], int(match.group(1)), int(match.group(2))
    elif end:
        reason = message[: end.start()]
        line = text.count("\n") + 1
        column = len(text) - (text.rfind("\n") + 1) + 1
    else:
        return InputError(path, f"invalid TOML: {message}")
    lines = text.splitlines()
    from gpuready.containerd.hints import hint_for  # a syntax error's hints: only then

    hint = hint_for(lines[line - 1]) if 0 < line <= len(lines) else None
    reason += f"; hint: {hint}" if hint else ""
    return InputError(path, f"invalid TOML: {reason}", line=line, column=column)


def load_config(path: Path, *, node: Node = HOST) -> ConfigFile:
    """Read (through ``node``) and parse a containerd config file."""
    text = node.read_text(path, kind=FileKind.CONFIG)
    return ConfigFile(path=path, text=text, data=parse_toml(text, path))


def load_config_text(text: str, path: Path | str = "<string>") -> ConfigFile:
    """Parse config text that did not come from disk (a base, ``containerd config default``)."""
    return ConfigFile(path=Path(path), text=text, data=parse_toml(text, path))


def parse_for_edit(config: ConfigFile):
    """A ``tomlkit`` document of an already verified config's top-level keys, ready for a
    comment-keeping edit of them; its ``as_string()`` is the whole text, edited.

    Only the part before the first table header is parsed (every top-level key is written
    there): ``tomlkit`` takes time quadratic in a file's tables, the rest is kept verbatim.
    """
    import tomlkit  # lazy: only edits pay for it
    from tomlkit.exceptions import ParseError

    text = without_bom(config.text)
    too_deep = bounds_error(text, config.path) or nesting_error(text, config.path)
    if too_deep is not None:
        raise too_deep
    cut = _first_header(text)
    try:
        return _TopLevel(tomlkit.parse(text[:cut]), text[cut:])
    except ParseError as error:  # tomllib accepted it; tomlkit is stricter in a few corners
        raise InputError(
            config.path, f"cannot edit: {error}", line=error.line, column=error.col
        ) from None


def _first_header(text: str) -> int:
    """The offset of the line of the text's first table header (its length when none)."""
    from gpuready.containerd.layout import scan

    headers = scan(text).headers
    return headers[0].start if headers else len(text)


_ENDS_BLANK = re.compile(r"\n[ \t\r]*\n\Z")


class _TopLevel:
    """A ``tomlkit`` document of a text's top-level part, the tables after it kept as text."""

    def __init__(self, document, rest: str) -> None:
        self._document, self._rest = document, rest
        self._head = document.as_string()

    def __getattr__(self, name: str):
        return getattr(self._document, name)

    def as_string(self) -> str:
        """The edited top-level part followed by the rest of the text, unchanged; an edited
        part ends in a blank line before a table, as ``tomlkit`` writes a whole document."""
        head = self._document.as_string()
        added = head.count("\n") > self._head.count("\n")  # a new key, not a longer value
        if self._rest and added and not _ENDS_BLANK.search(head):
            head += "\n"
        return head + self._rest


def render_edit(config: ConfigFile, document) -> str:
    """The edited document's text, with the original's byte order mark and line endings."""
    return restyle(config.text, document.as_string())
