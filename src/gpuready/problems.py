"""Problems as data: what every checker yields and every reporter renders."""

from __future__ import annotations

from gpuready.compat import StrEnum
from gpuready.records import Record


class Severity(StrEnum):
    """How bad a problem is; only ``error`` makes a command fail."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Problem(Record):
    """One finding about one file.

    ``key_path`` is the TOML key path (or the YAML/JSON field path) the problem is about;
    ``line`` and ``column`` are 1-based positions in ``file`` when they are known.
    """

    rule: str
    severity: Severity
    message: str
    file: str
    key_path: str = ""
    line: int | None = None
    column: int | None = None
    fix: str = ""

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready mapping with the severity as its plain name."""
        data = self._asdict()
        data["severity"] = self.severity.value
        return data


def has_errors(problems: list[Problem]) -> bool:
    """True when at least one problem is error-level."""
    return any(p.severity is Severity.ERROR for p in problems)


class Report:
    """What a run of the rules found, and which files it read.

    A plain class rather than a dataclass: every lint run makes one, and importing
    ``dataclasses`` (with ``inspect``) costs more than the lint of a small file.
    """

    __slots__ = ("files", "importing", "problems")

    def __init__(self, problems: list[Problem] | None = None, files: list[str] | None = None,
                 importing: list[str] | None = None) -> None:
        self.problems = [] if problems is None else problems
        self.files = [] if files is None else files
        self.importing = [] if importing is None else importing  # files read alone that import

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Report) and (self.problems, self.files, self.importing) == (
            other.problems, other.files, other.importing)

    def __repr__(self) -> str:
        return (f"Report(problems={self.problems!r}, files={self.files!r}, "
                f"importing={self.importing!r})")

    @property
    def failed(self) -> bool:
        """True when at least one problem is an error."""
        return has_errors(self.problems)
