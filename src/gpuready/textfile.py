"""Turning the bytes gpuready reads into text: every failure a one-line error naming the file.

Files are read through :class:`gpuready.node.Node`, which bounds and checks them first.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from gpuready.errors import InputError


def sha256(content: str | bytes | None) -> str | None:
    """The SHA-256 of a file's text or bytes, in hex (None for a file that does not exist)."""
    if content is None:
        return None
    data = content.encode("utf-8") if isinstance(content, str) else content
    return _sha256()(data).hexdigest()


@functools.cache
def _sha256():
    """CPython's built-in SHA-256 (the same digest as hashlib's): ``hashlib`` loads OpenSSL
    first, about 2 ms of an 80 ms ``doctor``, for one digest of a few kilobytes. hashlib's where
    the built-in module is left out of the build."""
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.9 to 3.11
        except ImportError:
            from hashlib import sha256
    return sha256


def decode(raw: bytes, path: Path | str) -> str:
    """UTF-8 text, refusing NUL bytes (a binary file) and invalid UTF-8 with the byte's place."""
    encoding = _other_unicode(raw)
    if encoding:
        raise InputError(path, f"{encoding} text, not UTF-8: convert it (iconv -f {encoding} -t "
                         "UTF-8)", line=1)
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise InputError(path, "binary file (contains a NUL byte), not text", line=line)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(path, "not UTF-8 text", line=line, column=column) from None


_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
               (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE"))


def _other_unicode(raw: bytes) -> str | None:
    """UTF-16 or UTF-32 by its byte order mark, or by a NUL after each ASCII character."""
    for mark, name in _OTHER_BOMS:
        if raw.startswith(mark):
            return name
    if len(raw) >= 4 and raw[1:8:2] == b"\x00" * len(raw[1:8:2]) and b"\x00" not in raw[0:8:2]:
        return "UTF-16LE"
    return None


BOM = "\ufeff"
_LONE_LF = re.compile(r"(?<!\r)\n")


def without_bom(text: str) -> str:
    """The text a parser should see: a UTF-8 byte order mark is not part of the document.

    containerd (Go's TOML decoder) accepts a config that starts with one; ``tomllib`` does not.
    """
    return text.removeprefix(BOM)


def restyle(original: str, edited: str) -> str:
    """``edited`` with the original's byte order mark and, for a CRLF file, CRLF line endings.

    Parsers and serializers work on BOM-less, LF text; what gpuready adds must not leave the
    operator's file with a lost BOM or mixed line endings. A file that already mixes endings is
    left as it is.
    """
    if original.startswith(BOM) and not edited.startswith(BOM):
        edited = BOM + edited
    if "\r\n" in original and not _LONE_LF.search(original):
        edited = _LONE_LF.sub("\r\n", edited)
    return edited
