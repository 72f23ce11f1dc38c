"""Which containerd release line reads the config: it decides merge rules and option matching.

containerd 1.x and 2.x read the same file differently: 1.x replaces a plugin table from a later
imported file whole, 2.x merges it key by key; 2.x matches runc option keys case-insensitively,
1.x by exact field name. Which line a node runs is decided in one place,
:func:`gpuready.containerd.lines.node_line`; this module gives the rules its answer.
"""

from __future__ import annotations

from pathlib import Path

from gpuready.containerd.lines import NodeLine, node_line
from gpuready.containerd.lines import from_config_version as _line_of_version
from gpuready.containerd.versions import max_version_for
from gpuready.records import Record


class Semantics(Record):
    """The containerd release line whose rules apply, and where that knowledge came from.

    ``release`` is ``(major, minor)`` when a real release is known; only then is the highest
    loadable config version known. ``line`` is the modelled line (:mod:`gpuready.containerd.lines`).
    """

    major: int
    release: tuple[int, int] | None
    source: str
    line: NodeLine | None = None

    @property
    def max_config_version(self) -> int | None:
        """The highest config version this containerd loads, when the release is known."""
        return max_version_for(self.release) if self.release else None

    @property
    def label(self) -> str:
        """``containerd 1.6`` or ``containerd 2.x``, for messages."""
        if self.release:
            return f"containerd {self.release[0]}.{self.release[1]}"
        return f"containerd {self.major}.x"


def of_line(line: NodeLine) -> Semantics:
    """The semantics of a decided node line."""
    return Semantics(line.major, line.release, line.source, line)


def from_flag(text: str) -> Semantics:
    """The semantics of a ``--containerd-version`` value such as ``1.6.20`` or ``2.1``."""
    return of_line(node_line(root=None, flag=text, config_version=None))


def from_config_version(version: object) -> Semantics:
    """The semantics implied by a config ``version``: 1 and 2 are 1.x files, 3 and 4 are 2.x."""
    return of_line(_line_of_version(version))


def choose(
    *, flag: str | None, probe: bool, config_version: object, root: Path | str | None = None
) -> Semantics:
    """The semantics to apply: ``--containerd-version``, else (``probe``) what the node says
    (the installed containerd for this machine, the package database under a ``root``), else
    the config's version."""
    if not probe:
        root = None
    return of_line(node_line(root=root, flag=flag, config_version=config_version,
                             ask_installed=probe))
