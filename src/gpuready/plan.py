"""A planned change to one file: computed first, shown as a diff, applied by one safe writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuready.records import Record


class Plan(Record):
    """The text a file has (``before``; None when it does not exist) and the text it should have
    (``after``; None when the file is to be removed).

    A plan whose ``after`` equals ``before`` is a no-op; ``summary`` then says why nothing changes
    ("runtime nvidia already registered"). ``notes`` are things the user should know either way.
    ``guard`` (a :class:`gpuready.containerd.gate.Guard`) is the check the one writer runs on the
    whole change before writing any of it: a containerd config change that would break the node
    is refused there, whichever command planned it.
    """

    path: Path
    before: str | None
    after: str | None
    summary: str
    notes: tuple[str, ...] = ()
    guard: Any = None

    # Two plans are the same change whatever guard judges them: the guard is left out of
    # equality, hashing and repr.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and self[:5] == other[:5]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self[:5])

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields[:5], self))
        return f"Plan({shown})"

    @property
    def changes(self) -> bool:
        """True when applying the plan would change the file."""
        return self.before != self.after

    def diff(self, *, label: str | None = None) -> str:
        """A unified diff from ``before`` to ``after`` (empty for a no-op)."""
        if not self.changes:
            return ""
        import difflib  # lazy: only a change that is shown pays for it

        name = label or str(self.path)
        before_lines = (self.before or "").splitlines(keepends=True)
        after_lines = (self.after or "").splitlines(keepends=True)
        fromfile = name if self.before is not None else "/dev/null"
        tofile = name if self.after is not None else "/dev/null"
        return "".join(
            _terminated(line)
            for line in difflib.unified_diff(before_lines, after_lines, fromfile, tofile)
        )


def _terminated(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
