"""Which containerd release line reads the config: it decides merge rules and option matching.

containerd 1.x and 2.x read the same file differently: 1.x replaces a plugin table from a later
imported file whole, 2.x merges it key by key; 2.x matches runc option keys case-insensitively,
1.x by exact field name. The release comes from ``containerd --version`` when it can be run, from
the user's ``--containerd-version``, or else from the config ``version`` (1 and 2 are files for
1.x, 3 and 4 files for 2.x).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuready.containerd.installed import installed_release
from gpuready.containerd.versions import max_version_for, parse_release
from gpuready.errors import UsageError


@dataclass(frozen=True)
class Semantics:
    """The containerd release line whose rules apply, and where that knowledge came from.

    ``release`` is ``(major, minor)`` when a real release is known; only then is the highest
    loadable config version known.
    """

    major: int
    release: tuple[int, int] | None
    source: str

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


def from_flag(text: str) -> Semantics:
    """The semantics of a ``--containerd-version`` value such as ``1.6.20`` or ``2.1``."""
    release = parse_release(text)
    if release is None or release[0] not in (1, 2):
        raise UsageError(f"--containerd-version {text!r}: expected a release such as 1.7.20 or 2.1")
    return Semantics(release[0], release, "--containerd-version")


def from_config_version(version: object) -> Semantics:
    """The semantics implied by a config ``version``: 1 and 2 are 1.x files, 3 and 4 are 2.x."""
    major = 2 if isinstance(version, int) and not isinstance(version, bool) and version >= 3 else 1
    return Semantics(major, None, "config version")


def probe_installed() -> Semantics | None:
    """Ask the installed ``containerd --version``; None when it cannot be run or read."""
    release = installed_release()
    if release is None or release[0] not in (1, 2):
        return None
    return Semantics(release[0], release, "containerd --version")


def choose(*, flag: str | None, probe: bool, config_version: object) -> Semantics:
    """The semantics to apply.

    An explicit ``--containerd-version`` wins (the user may be checking a copy of another node's
    files), then the installed containerd when ``probe`` is set, then the config's version.
    """
    if flag:
        return from_flag(flag)
    if probe:
        found = probe_installed()
        if found:
            return found
    return from_config_version(config_version)
