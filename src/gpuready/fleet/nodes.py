"""One node of a fleet: where its files are, and its doctor verdict as plain data.

A node is a folder laid out like the node's own file system (what Ansible's ``fetch`` writes:
``DEST/HOST/etc/containerd/config.toml``), checked with ``doctor`` under it as root; or a lone
config file, checked with the ``lint`` rules. Whatever goes wrong while reading one node becomes
that node's verdict (``unreadable``), never an exception that stops the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuready.compat import StrEnum
from gpuready.paths import CONTAINERD_CONFIG
from gpuready.problems import Problem, Severity

CONFIG_IN_NODE = Path(*CONTAINERD_CONFIG.parts[1:])  # etc/containerd/config.toml
CONTAINERD_FOLDER = CONFIG_IN_NODE.parent


class Verdict(StrEnum):
    """A node's overall state, from best to worst."""

    CLEAN = "clean"
    WARNINGS = "warnings"
    ERRORS = "errors"
    UNREADABLE = "unreadable"


RANK = {verdict: index for index, verdict in enumerate(Verdict)}


@dataclass(frozen=True)
class NodeSource:
    """Where one node's files are: a node-shaped folder, or a single config file."""

    name: str
    path: Path
    is_file: bool = False


@dataclass
class NodeResult:
    """A node's verdict, its problems, and the files that were read."""

    name: str
    verdict: Verdict
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    error: str | None = None

    def count(self, severity: Severity) -> int:
        """How many of the node's problems have ``severity``."""
        return sum(1 for problem in self.problems if problem.severity is severity)

    def badness(self) -> tuple[int, int, int]:
        """A key that sorts the worst node first: verdict, then errors, then warnings."""
        return (-RANK[self.verdict], -self.count(Severity.ERROR), -self.count(Severity.WARNING))

    def relocated(self, local: str, remote: str) -> NodeResult:
        """The same result with paths under ``local`` shown under ``remote`` instead.

        For a copy of a node's files checked on another machine: problems then name the files
        where they are on the node.
        """

        def moved(text: str) -> str:
            return text.replace(local, remote.rstrip("/"))

        problems = [p._replace(file=moved(p.file), message=moved(p.message), fix=moved(p.fix))
                    for p in self.problems]
        return NodeResult(self.name, self.verdict, problems, [moved(f) for f in self.files],
                          moved(self.error) if self.error else None)

    def to_dict(self) -> dict:
        """A JSON-ready mapping."""
        return {
            "node": self.name,
            "verdict": self.verdict.value,
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "error": self.error,
            "files": self.files,
            "problems": [problem.to_dict() for problem in self.problems],
        }


def is_node_folder(folder: Path) -> bool:
    """True for a folder laid out like a node: it has ``etc/containerd``, or the folder where an
    owner (k3s, RKE2, ...) keeps containerd's config."""
    from gpuready.owners.table import OWNERS

    if (folder / CONTAINERD_FOLDER).is_dir():
        return True
    return any(folder.joinpath(*owner.config.parent.parts[1:]).is_dir() for owner in OWNERS)


def discover(paths: list[Path]) -> list[NodeSource]:
    """The nodes the given paths hold, in a stable order.

    A file is one node; a node-shaped folder is one node; any other folder holds one node per
    node-shaped sub-folder (a fetch destination with one folder per host).
    """
    found: list[NodeSource] = []
    for path in paths:
        if path.is_file():
            found.append(NodeSource(str(path), path, is_file=True))
        elif is_node_folder(path):
            found.append(NodeSource(str(path), path))
        elif path.is_dir():
            # sorted by name: the order of the paths themselves, for entries of one folder
            found.extend(
                NodeSource(str(child), child)
                for child in sorted(path.iterdir(), key=_name)
                if (child / CONTAINERD_FOLDER).is_dir() or (child.is_dir()
                                                             and is_node_folder(child))
            )
        else:
            found.append(NodeSource(str(path), path))  # missing: reported as unreadable
    return found


def _name(path: Path) -> str:
    return path.name


def check_node(
    source: NodeSource,
    *,
    runtime_name: str,
    selected: frozenset[str],
    containerd_version: str | None,
) -> NodeResult:
    """Doctor (or lint, for a lone file) one node; any failure to read it is its verdict."""
    from gpuready.errors import GpureadyError

    try:
        problems, files = _examine(source, runtime_name, selected, containerd_version)
    except GpureadyError as error:
        return NodeResult(source.name, Verdict.UNREADABLE, error=error.message())
    except (OSError, RecursionError, ValueError) as error:  # hostile trees: still one finding
        return NodeResult(source.name, Verdict.UNREADABLE, error=f"{source.path}: {error}")
    return NodeResult(source.name, verdict_of(problems), problems, files)


def verdict_of(problems: list[Problem]) -> Verdict:
    """The verdict that a node with these problems gets."""
    severities = {problem.severity for problem in problems}
    if Severity.ERROR in severities:
        return Verdict.ERRORS
    return Verdict.WARNINGS if Severity.WARNING in severities else Verdict.CLEAN


def _examine(source, runtime_name, selected, containerd_version):
    from gpuready.rules.context import Options
    from gpuready.rules.engine import doctor, lint_paths

    if source.is_file:
        options = Options(runtime_name=runtime_name)  # as 'gpuready lint FILE' checks it
        report = lint_paths([source.path], options=options, selected=selected,
                            containerd_version=containerd_version)
    else:
        report = doctor(
            options=Options(runtime_name=runtime_name, root=source.path),
            selected=selected,
            containerd_version=containerd_version,
            probe=False,  # these are another machine's files: this one's containerd says nothing
        )
    return report.problems, report.files
