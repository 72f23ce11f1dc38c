r"""Text from the node or the command line, made safe to show on a terminal line.

A path or value gpuready did not write (a file name in a node tree, an option, an environment
variable) can hold characters that change what a terminal shows: a newline that starts a fake
second line, an escape sequence, or a bidirectional control such as U+202E RIGHT-TO-LEFT
OVERRIDE that makes ``99-nv\u202elmot.json`` read as ``99-nvnosj.toml``. Text output shows each such
character as a Python escape (``\u202e``, ``\n``, ``\x1b``); JSON output is exact, since JSON
escapes what it must itself.
"""

from __future__ import annotations

# Unicode categories never shown raw: controls (C0, DEL, C1), format characters (the bidi
# embeddings, overrides and isolates, zero-width characters), line and paragraph separators, and
# lone surrogates (the bytes of a file name that is not UTF-8, as os.fsdecode gives them).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def is_control(char: str) -> bool:
    """True for a control character (C0, DEL or C1): what no path, name or address holds."""
    code = ord(char)
    return code < 32 or 127 <= code < 160


def has_control(text: str) -> bool:
    """True when ``text`` holds a control character (:func:`is_control`)."""
    return any(is_control(char) for char in text)


def shown(text: object, *, keep_tabs: bool = True) -> str:
    """``text`` for a line of text output: every hidden character escaped, the rest as is.

    A tab stays a tab (``keep_tabs``) so that text copied from a config reads as written.
    """
    value = str(text)
    if value.isascii() and value.isprintable():
        return value  # the common case: nothing to look at character by character
    return "".join(_escaped(char, keep_tabs=keep_tabs) for char in value)


def shown_lines(text: str) -> str:
    """:func:`shown` for several lines (a diff, a report): newlines kept, and a carriage return
    kept where it ends a line (a CRLF file's diff), everything else hidden escaped."""
    return "\n".join(_shown_line(line) for line in text.split("\n"))


def _shown_line(line: str) -> str:
    if line.endswith("\r"):
        return shown(line[:-1]) + "\r"
    return shown(line)


def _escaped(char: str, *, keep_tabs: bool) -> str:
    if char == "\t" and keep_tabs:
        return char
    if char.isascii():
        return char if char.isprintable() else repr(char)[1:-1]
    import unicodedata

    category = unicodedata.category(char)
    if category not in _HIDDEN_CATEGORIES:
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


class EscapedStream:
    """A text stream that writes :func:`shown_lines` of all it is given: the command line's
    text output goes through it, so no path or value from input reaches a terminal raw.

    Everything but :meth:`write` is the wrapped stream's (``fileno``, ``isatty``, ``flush``).
    JSON output passes unchanged: :func:`json.dumps` writes ASCII escapes only.
    """

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` with every hidden character escaped; the length of ``text``."""
        self._stream.write(shown_lines(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
