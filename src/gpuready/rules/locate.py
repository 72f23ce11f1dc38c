"""Where a TOML key or table is written: one regular-expression pass over the text.

``tomllib`` gives data without positions, and ``tomlkit`` (which keeps them) is about ten times
slower than ``tomllib`` on containerd's default config. Linting is on a fleet audit's hot path, so
positions come from a light scan, built once per file and only when a problem needs a position:
every table header and every ``key =`` line is mapped to its full key path.

This is a locator, not a parser: the text has already been accepted by ``tomllib``.
"""

from __future__ import annotations

import re

from gpuready.containerd.versions import KeyPath
from gpuready.records import Record

_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_KEY_PATH = rf"{_KEY_PART}(?:[ \t]*\.[ \t]*{_KEY_PART})*"
_HEADER = re.compile(rf"^([ \t]*)(\[\[?)[ \t]*({_KEY_PATH})[ \t]*\]")
_KEY_LINE = re.compile(rf"^([ \t]*)({_KEY_PATH})[ \t]*=")
_PART = re.compile(_KEY_PART)
_MULTILINE_QUOTES = re.compile(r'"""|\'\'\'')

Position = tuple[int, int]


class Header(Record):
    """A table header as written: its 1-based line, the columns of its key path, and the path.

    ``start``/``end`` are 0-based offsets of the key path inside the line (for rewriting it);
    ``bare`` says, for each part, whether it was written without quotes.
    """

    line: int
    column: int
    start: int
    end: int
    path: KeyPath
    bare: tuple[bool, ...]
    quote: str


def split_key_path(text: str) -> tuple[KeyPath, tuple[bool, ...]]:
    """The parts of a dotted key as TOML reads them, and which were bare (unquoted)."""
    parts: list[str] = []
    bare: list[bool] = []
    for match in _PART.finditer(text):
        part = match.group(0)
        if part[0] == '"':
            parts.append(_basic_string(part))
            bare.append(False)
        elif part[0] == "'":
            parts.append(part[1:-1])
            bare.append(False)
        else:
            parts.append(part)
            bare.append(True)
    return tuple(parts), tuple(bare)


def _basic_string(quoted: str) -> str:
    if "\\" not in quoted:
        return quoted[1:-1]
    from gpuready.compat import tomllib  # escapes in keys are rare; let the real parser decode them

    return tomllib.loads(f"k = {quoted}")["k"]


class Locator:
    """Positions of the tables and keys of one TOML text, by key path."""

    def __init__(self, text: str) -> None:
        self.headers: list[Header] = []
        self._positions: dict[KeyPath, Position] = {}
        self._scan(text)

    def _scan(self, text: str) -> None:
        table: KeyPath = ()
        in_multiline = False
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                in_multiline = len(_MULTILINE_QUOTES.findall(line)) % 2 == 0
                continue
            first = line.lstrip()[:1]
            if not first or first == "#":
                continue
            if first == "[":
                header = _HEADER.match(line)
                if header:
                    table = self._add_header(number, header)
                continue
            key = _KEY_LINE.match(line)
            if key:
                parts, _ = split_key_path(key.group(2))
                self._remember((*table, *parts), (number, len(key.group(1)) + 1))
                rest = line[key.end() :]
                if '"""' in rest or "'''" in rest:
                    in_multiline = len(_MULTILINE_QUOTES.findall(rest)) % 2 == 1

    def _add_header(self, number: int, match: re.Match) -> KeyPath:
        raw = match.group(3)
        path, bare = split_key_path(raw)
        quote = "'" if "'" in raw and '"' not in raw else '"'
        column = len(match.group(1)) + 1
        self.headers.append(Header(number, column, match.start(3), match.end(3), path, bare, quote))
        self._remember(path, (number, column))
        return path

    def _remember(self, path: KeyPath, position: Position) -> None:
        self._positions.setdefault(path, position)

    def exact(self, path: KeyPath) -> Position | None:
        """Where ``path`` is written as a header or a key, or None."""
        return self._positions.get(tuple(path))

    def locate(self, path: KeyPath) -> Position | None:
        """The best position for ``path``.

        The key or header itself; else the first header or key below it (a table defined only
        through a deeper header); else the nearest written table above it (a key that is
        missing is reported where it belongs); None for an empty document.
        """
        path = tuple(path)
        found = self._positions.get(path)
        if found:
            return found
        size = len(path)
        for known, position in self._positions.items():
            if known[:size] == path:
                return position
        for cut in range(size - 1, 0, -1):
            found = self._positions.get(path[:cut])
            if found:
                return found
        return None

    def headers_under(self, prefix: KeyPath) -> list[Header]:
        """Every header whose path starts with ``prefix``, in file order."""
        size = len(prefix)
        return [header for header in self.headers if header.path[:size] == tuple(prefix)]
