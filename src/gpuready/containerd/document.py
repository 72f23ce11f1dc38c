"""Reading a containerd config: bytes to text, text to data, every failure a one-line error.

Two parsers, each for its job: ``tomllib`` (the standard library) for verifying and facts, and
``tomlkit`` (imported only when a file is about to be edited) for edits that keep every comment.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuready.containerd.hints import hint_for
from gpuready.errors import InputError
from gpuready.node import HOST, FileKind, Node
from gpuready.textfile import restyle, without_bom

_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_END_OF_DOCUMENT = re.compile(r"\s*\(at end of document\)\s*$")


@dataclass(frozen=True)
class ConfigFile:
    """A config file as read: its path, its exact text, and the ``tomllib`` parse of it."""

    path: Path
    text: str
    data: dict[str, Any]


def parse_toml(text: str, path: Path | str) -> dict[str, Any]:
    """Parse with ``tomllib``; a syntax error becomes :class:`InputError` with line and column."""
    too_deep = nesting_error(without_bom(text), path)
    if too_deep is not None:
        raise too_deep
    try:
        return tomllib.loads(without_bom(text))
    except tomllib.TOMLDecodeError as error:
        raise toml_error(str(error), text, path) from None


MAX_TOML_DEPTH = 64
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


def loads_bounded(text: str, path: Path | str) -> dict[str, Any]:
    """``tomllib.loads`` that refuses what :func:`nesting_error` refuses, with the same error.

    Raises :class:`InputError` for nesting deeper than :data:`MAX_TOML_DEPTH` and
    ``tomllib.TOMLDecodeError`` for other syntax errors. The text is scanned only when it does
    not parse or when the data nests deeper than the limit: every array and inline table of a
    parsed text is a list or dict in its data, nested at least as deep as its brackets (a table
    header's brackets nest two deep at most), so shallow data proves the brackets shallow.
    """
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
        too_deep = nesting_error(text, path)
        if too_deep is not None:
            raise too_deep
    return data


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
    """A ``tomlkit`` document of an already verified config, ready for a comment-keeping edit."""
    import tomlkit  # lazy: only edits pay for it
    from tomlkit.exceptions import ParseError

    too_deep = nesting_error(without_bom(config.text), config.path)
    if too_deep is not None:
        raise too_deep
    try:
        return tomlkit.parse(without_bom(config.text))
    except ParseError as error:  # tomllib accepted it; tomlkit is stricter in a few corners
        raise InputError(
            config.path, f"cannot edit: {error}", line=error.line, column=error.col
        ) from None


def render_edit(config: ConfigFile, document) -> str:
    """The edited document's text, with the original's byte order mark and line endings."""
    return restyle(config.text, document.as_string())
