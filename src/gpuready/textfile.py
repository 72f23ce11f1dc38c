"""Reading the text files gpuready checks: every failure a one-line error naming the file."""

from __future__ import annotations

from pathlib import Path

from gpuready.errors import InputError


def read_text(path: Path) -> str:
    """The file's text; missing, unreadable, or binary files raise :class:`InputError`."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a file") from None
    except PermissionError:
        raise InputError(path, "permission denied") from None
    except OSError as error:
        raise InputError(path, error.strerror or str(error)) from None
    return decode(raw, path)


def decode(raw: bytes, path: Path | str) -> str:
    """UTF-8 text, refusing NUL bytes (a binary file) and invalid UTF-8 with the byte's place."""
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise InputError(path, "binary file (contains a NUL byte), not text", line=line)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(path, "not UTF-8 text", line=line, column=column) from None
