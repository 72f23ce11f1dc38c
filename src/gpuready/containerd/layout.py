"""Where each table and key of a TOML text is written: the statements, in file order, with spans.

TOML lets one table be written in many ways: a ``[header]``, dotted keys inside another table's
body (``runtimes.runc.runtime_type = …``), an inline table (``runc = { … }``), or not at all when
only deeper headers create it; its headers may come in any order and be spread across the file.
The editor (:mod:`gpuready.containerd.edit`) needs to know which of these a file uses, and the
exact character spans of headers, key lines and values, to add lines next to what is there.

This is a scanner of text that ``tomllib`` has already accepted, not a validating parser: it
knows where strings, arrays and inline tables end, and nothing more.
"""

from __future__ import annotations

import re

from gpuready.containerd.versions import KeyPath
from gpuready.records import Factory, MutableRecord, Record

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_BLANK = " \t"


class Header(Record):
    """A ``[table]`` or ``[[array]]`` header: its path, the span of its line, its look."""

    path: KeyPath
    raw: tuple[str, ...]
    start: int
    end: int
    indent: str
    array: bool


class Entry(Record):
    """A ``key = value`` statement (or a key inside an inline table).

    ``table`` is the path of the table whose body holds it (for a key inside an inline table,
    the path of that inline table); ``start``/``end`` span its whole line(s);
    ``value_start``/``value_end`` span the value alone. ``nested`` is True inside an inline
    table, ``in_array`` True in the body of an ``[[array]]`` element, ``inline`` True when the
    value is an inline table.
    """

    table: KeyPath
    key: KeyPath
    raw: tuple[str, ...]
    start: int
    end: int
    indent: str
    value_start: int
    value_end: int
    nested: bool = False
    in_array: bool = False
    inline: bool = False

    @property
    def path(self) -> KeyPath:
        """The full path of the key."""
        return (*self.table, *self.key)



class InlineTable(Record):
    """An inline table ``{ … }``: its path and the offsets of its braces."""

    path: KeyPath
    open: int
    close: int
    empty: bool


class Layout(MutableRecord):
    """Every header, key and inline table of a text, in file order."""

    text: str
    headers: list[Header] = Factory(list)
    entries: list[Entry] = Factory(list)
    inline_values: list[Entry] = Factory(list)
    inline_tables: list[InlineTable] = Factory(list)

    @property
    def statements(self) -> list[Header | Entry]:
        """Headers and top-level entries, in file order."""
        return sorted([*self.headers, *self.entries], key=lambda item: item.start)

    def header(self, path: KeyPath) -> Header | None:
        """The ``[header]`` that defines ``path`` explicitly, if any."""
        return next((h for h in self.headers if h.path == path and not h.array), None)

    def headers_under(self, path: KeyPath) -> list[Header]:
        """Headers of ``path`` and of every table below it, in file order."""
        size = len(path)
        return [h for h in self.headers if h.path[:size] == path and not h.array]

    def inline(self, path: KeyPath) -> InlineTable | None:
        """The inline table that is ``path`` or holds it (the innermost), if any."""
        found = [t for t in self.inline_tables if path[: len(t.path)] == t.path]
        return max(found, key=lambda t: len(t.path)) if found else None

    def dotted(self, path: KeyPath) -> list[Entry]:
        """Top-level entries that define ``path`` (or a key inside it) through dotted keys."""
        size = len(path)
        return [
            e for e in self.entries
            if not e.in_array and len(e.table) < size and e.path[:size] == path
        ]

    def value(self, path: KeyPath) -> Entry | None:
        """The entry (top-level or inside an inline table) whose key is ``path``."""
        for entry in (*self.entries, *self.inline_values):
            if entry.path == path and not entry.in_array:
                return entry
        return None


def scan(text: str) -> Layout:
    """The layout of ``text`` (already accepted by ``tomllib``)."""
    layout = Layout(text)
    _Scanner(text, layout).run()
    return layout


class _Scanner:
    def __init__(self, text: str, layout: Layout) -> None:
        self.text = text
        self.layout = layout
        self.pos = 0
        self.table: KeyPath = ()
        self.in_array = False

    def run(self) -> None:
        text = self.text
        while True:
            self._skip_blank_and_comments()
            if self.pos >= len(text):
                return
            start = text.rfind("\n", 0, self.pos) + 1
            indent = text[start : self.pos]
            if text[self.pos] == "[":
                self._header(start, indent)
            else:
                self._entry(start, indent)

    def _skip_blank_and_comments(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n":
                self.pos += 1
            elif char == "#":
                self._to_line_end()
            else:
                return

    def _to_line_end(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end

    def _finish_line(self) -> int:
        """Skip what follows a statement on its line (blanks, a comment); the offset after it."""
        self._to_line_end()
        self.pos = min(self.pos + 1, len(self.text))
        return self.pos

    def _header(self, start: int, indent: str) -> None:
        array = self.text.startswith("[[", self.pos)
        self.pos += 2 if array else 1
        path, raw = self._key()
        self.pos += 2 if array else 1
        end = self._finish_line()
        self.layout.headers.append(Header(path, raw, start, end, indent, array))
        self.table, self.in_array = path, array

    def _entry(self, start: int, indent: str) -> None:
        key, raw = self._key()
        self.pos += 1  # the "="
        value_start, value_end = self._value((*self.table, *key))
        end = self._finish_line()
        self.layout.entries.append(
            Entry(self.table, key, raw, start, end, indent, value_start, value_end,
                  in_array=self.in_array, inline=self.text[value_start] == "{")
        )

    def _key(self) -> tuple[KeyPath, tuple[str, ...]]:
        """A dotted key (with blanks around the dots); stops before ``=`` or ``]``."""
        parts: list[str] = []
        raw: list[str] = []
        while True:
            self._skip(_BLANK)
            begin = self.pos
            parts.append(self._key_part())
            raw.append(self.text[begin : self.pos])
            self._skip(_BLANK)
            if self.pos < len(self.text) and self.text[self.pos] == ".":
                self.pos += 1
                continue
            return tuple(parts), tuple(raw)

    def _key_part(self) -> str:
        text = self.text
        char = text[self.pos]
        if char == '"':
            end = _basic_end(text, self.pos + 1)
            quoted = text[self.pos : end]
            self.pos = end
            return _decode_basic(quoted)
        if char == "'":
            end = text.index("'", self.pos + 1)
            part = text[self.pos + 1 : end]
            self.pos = end + 1
            return part
        match = _BARE.match(text, self.pos)
        self.pos = match.end()
        return match.group(0)

    def _skip(self, chars: str) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in chars:
            self.pos += 1

    def _value(self, path: KeyPath) -> tuple[int, int]:
        """Skip one value; its span. Inline tables record their keys and braces."""
        self._skip(_BLANK)
        text = self.text
        start = self.pos
        if text.startswith('"""', start) or text.startswith("'''", start):
            self.pos = _multiline_end(text, start)
        elif text[start] == '"':
            self.pos = _basic_end(text, start + 1)
        elif text[start] == "'":
            self.pos = text.index("'", start + 1) + 1
        elif text[start] == "[":
            self._array()
        elif text[start] == "{":
            self._inline_table(path)
        else:
            end = start
            while end < len(text) and text[end] not in ",]}#\r\n":
                end += 1
            self.pos = end
            while self.pos > start and text[self.pos - 1] in _BLANK:
                self.pos -= 1
        return start, self.pos

    def _array(self) -> None:
        self.pos += 1
        while True:
            self._skip_blank_and_comments()
            if self.text[self.pos] == "]":
                self.pos += 1
                return
            if self.text[self.pos] == ",":
                self.pos += 1
                continue
            self._value(())

    def _inline_table(self, path: KeyPath) -> None:
        open_at = self.pos
        self.pos += 1
        empty = True
        while True:
            self._skip(_BLANK + "\r\n")
            char = self.text[self.pos]
            if char == "}":
                break
            if char == ",":
                self.pos += 1
                continue
            empty = False
            key_start = self.pos
            key, raw = self._key()
            self.pos += 1
            value_start, value_end = self._value((*path, *key))
            if path:
                self.layout.inline_values.append(
                    Entry(path, key, raw, key_start, value_end, "", value_start, value_end,
                          nested=True, in_array=self.in_array,
                          inline=self.text[value_start] == "{")
                )
        self.pos += 1
        if path:
            self.layout.inline_tables.append(InlineTable(path, open_at, self.pos - 1, empty))


def array_items(text: str, start: int) -> list[tuple[int, int]]:
    """The spans of the items of the array whose ``[`` is at ``start``."""
    scanner = _Scanner(text, Layout(text))
    scanner.pos = start + 1
    items = []
    while True:
        scanner._skip_blank_and_comments()
        char = text[scanner.pos]
        if char == "]":
            return items
        if char == ",":
            scanner.pos += 1
            continue
        items.append(scanner._value(()))


def _basic_end(text: str, pos: int) -> int:
    """The offset after the closing quote of a one-line basic string whose content starts at pos."""
    while text[pos] != '"':
        pos += 2 if text[pos] == "\\" else 1
    return pos + 1


def _multiline_end(text: str, start: int) -> int:
    """The offset after a multi-line string (up to two quotes may end its content)."""
    quote = text[start]
    pos = start + 3
    while True:
        if quote == '"' and text[pos] == "\\":
            pos += 2
            continue
        if text.startswith(quote * 3, pos):
            end = pos + 3
            while end < len(text) and text[end] == quote and end < pos + 5:
                end += 1
            return end
        pos += 1


def _decode_basic(quoted: str) -> str:
    if "\\" not in quoted:
        return quoted[1:-1]
    from gpuready.compat import tomllib  # escapes in keys are rare; let the real parser decode them

    return tomllib.loads(f"k = {quoted}")["k"]
