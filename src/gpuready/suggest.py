"""Did-you-mean suggestions for misspelled keys, options, commands, rules and engines (difflib,
ignoring case, dashes and underscores)."""

from __future__ import annotations

from collections.abc import Iterable

CUTOFF = 0.75


def _folded(word: str) -> str:
    return word.replace("_", "").replace("-", "").lower()


def did_you_mean(word: str, candidates: Iterable[str], *, cutoff: float = CUTOFF) -> str | None:
    """The candidate closest to ``word`` (``SystemCgroup`` -> ``SystemdCgroup``), or None."""
    by_folded: dict[str, str] = {}
    for candidate in candidates:
        by_folded.setdefault(_folded(candidate), candidate)
    import difflib  # lazy: only a misspelled key pays for it

    close = difflib.get_close_matches(_folded(word), list(by_folded), n=1, cutoff=cutoff)
    return by_folded[close[0]] if close else None


def hint(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'X'?"`` to end a message about the unknown ``word``, or ``""``."""
    guess = did_you_mean(word, candidates)
    return f"; did you mean {guess!r}?" if guess else ""
