"""Results that follow from a file's text alone, shared by files with the same text in one run.

A fleet's nodes are mostly configured alike: ``gpuready audit`` reads the same config and the
same CDI spec on hundreds of nodes. Inside :func:`shared` (only ``audit`` turns it on), whatever
is computed from a text alone -- its parse, where its keys are, which keys containerd ignores,
whether a CDI spec is accepted and which devices it has -- is computed once per distinct text and
reused. The key is the whole text (with whatever else the result depends on, such as whether the
file is read as JSON); a result that names the file (a syntax error, a problem) is never kept,
and kept results are only read, never changed. Outside :func:`shared` nothing is kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from typing import Any

# A table is emptied when the texts it keeps pass this many characters: memory stays bounded
# whatever the fleet holds (a fleet has a few variants of each file, not thousands).
MAX_CHARS = 64 * 1024 * 1024

_tables: dict[str, tuple[dict[Hashable, Any], list[int]]] | None = None


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Keep text-only results for files with the same text until the block ends.

    Processes forked inside the block start with what is kept so far, then keep their own.
    """
    global _tables
    outer = _tables
    if outer is None:
        _tables = {}
    try:
        yield
    finally:
        if outer is None:
            _tables = None


def get(table: str, key: Hashable) -> Any:
    """The result kept in ``table`` for ``key`` (a text, or a tuple with the text), else None."""
    if _tables is None or table not in _tables:
        return None
    return _tables[table][0].get(key)


def put(table: str, key: Hashable, result: Any, *, size: int) -> None:
    """Keep ``result`` for ``key`` while sharing is on; ``size`` is the text's length."""
    if _tables is None:
        return
    kept, used = _tables.setdefault(table, ({}, [0]))
    if used[0] + size > MAX_CHARS:
        kept.clear()
        used[0] = 0
    kept[key] = result
    used[0] += size


class Recent:
    """The last few results computed from texts, kept whether or not sharing is on: one command
    reads the same file several times (a config for its plan, the gate's before and after, the
    verdict; a CDI spec for its problems and its staleness), and each text is worked on once.
    A handful (``limit``), the oldest forgotten first, so a fleet of distinct texts keeps next
    to nothing alive. Kept results are only read, never changed."""

    def __init__(self, limit: int = 4) -> None:
        self._kept: dict[Hashable, Any] = {}
        self._limit = limit

    def get(self, key: Hashable) -> Any:
        """The result kept for ``key`` (a text, or a tuple with the text), else None."""
        return self._kept.get(key)

    def put(self, key: Hashable, result: Any) -> None:
        """Keep ``result`` for ``key``, forgetting the oldest at the limit."""
        if len(self._kept) >= self._limit:
            del self._kept[next(iter(self._kept))]
        self._kept[key] = result

