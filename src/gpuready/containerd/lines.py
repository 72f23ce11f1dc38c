"""The containerd release lines gpuready models, and which one a node runs: decided here only.

| line | recorded | versions read | a file's map (CRI ``runtimes``) | an import's plugin table |
|---|---|---|---|---|
| 1.6 | 1.6.20 (live) | 1, 2 | replaces the default map | replaces the whole table |
| 1.7 | 1.7.34 | 1, 2 | replaces the default map | replaces the whole table |
| 2.1 | 2.1.9 | 1, 2, 3 | merges key by key | merges key by key |
| 2.3 | 2.3.4 | 1 to 4 | merges key by key | merges key by key |

Releases without a line of their own are read as the nearest recorded one, and every message
says so: 1.5 and older as 1.6, 2.0 and 2.2 as 2.1, 2.4 and later as 2.3.

Which line a node runs:

- the machine's own node (no ``--root``): ``--containerd-version``, else the installed
  ``containerd --version``, else the config's ``version``;
- a node under ``--root`` (a copy, a mounted image): ``--containerd-version``, else what the
  root's package database says (read as text, nothing under the root is run), else the config's
  ``version``. The host's containerd says nothing about a node in a folder.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from gpuready.errors import UsageError
from gpuready.records import Record


class Line(Record):
    """One containerd release line and the facts that decide what it loads."""

    name: str
    release: tuple[int, int]
    recorded: str

    @property
    def max_config_version(self) -> int:
        """The newest config version the line reads (the table in
        :mod:`gpuready.containerd.versions`)."""
        from gpuready.containerd.versions import max_version_for

        return max_version_for(self.release)

    @property
    def major(self) -> int:
        """1 or 2."""
        return self.release[0]

    @property
    def maps_replace_defaults(self) -> bool:
        """1.x: a map written in a file (the CRI ``runtimes``) replaces the default map whole,
        so a file naming only ``nvidia`` loses ``runc`` (recorded on 1.6.20 and 1.7.34)."""
        return self.major == 1

    @property
    def imports_replace_plugins(self) -> bool:
        """1.x: a plugin table in an imported file replaces the earlier one whole."""
        return self.major == 1

    @property
    def reads_cdi(self) -> bool:
        """containerd 1.7 brought CDI (off by default); 1.6 has no such setting."""
        return self.release >= (1, 7)

    def defaults(self) -> dict[str, Any]:
        """The line's recorded ``containerd config default``, parsed (a fresh copy)."""
        import copy

        return copy.deepcopy(_defaults(self.recorded))

    def shared_defaults(self) -> dict[str, Any]:
        """:meth:`defaults` parsed once per process and shared by every caller: read it, never
        change it (:func:`gpuready.containerd.model.decode_over_defaults` builds on it)."""
        return _defaults(self.recorded)

    def __str__(self) -> str:
        return f"containerd {self.name}"


LINES: dict[str, Line] = {
    "1.6": Line("1.6", (1, 6), "1.6.20"),
    "1.7": Line("1.7", (1, 7), "1.7.34"),
    "2.1": Line("2.1", (2, 1), "2.1.9"),
    "2.3": Line("2.3", (2, 3), "2.3.4"),
}

# The line a config version implies when nothing else tells: the newest line of its major that
# reads it (1.7 is what most 1.x GPU nodes run today).
LINE_OF_CONFIG_VERSION = {1: "1.7", 2: "1.7", 3: "2.1", 4: "2.3"}


DATA = Path(__file__).resolve().parent.parent / "data"


def recorded_default_text(recorded: str) -> str:
    """The text of the recorded ``containerd config default`` of release ``recorded``."""
    # a plain path: importlib.resources imports more on first use, which a process that has
    # dropped its privileges may no longer be allowed to read
    return (DATA / f"containerd-{recorded}-default.toml").read_text(encoding="utf-8")


@functools.cache
def _defaults(recorded: str) -> dict[str, Any]:
    # The JSON beside each recorded TOML is its parse (scripts/generate_default_data.py; a test
    # keeps them equal): decoded in C, a thirtieth of the time tomllib takes on every run.
    import json

    path = DATA / f"containerd-{recorded}-default.json"
    return json.loads(path.read_text(encoding="utf-8"))


def line_for_release(release: tuple[int, int]) -> tuple[Line, str | None]:
    """The line that models ``release`` and, when it is not the release's own, why.

    Raises :class:`UsageError` for a release no line stands for (0.x, 3.x).
    """
    major, minor = release
    shown = f"{major}.{minor}"
    if shown in LINES:
        return LINES[shown], None
    if major == 1:
        line = LINES["1.6"] if minor < 6 else LINES["1.7"]
    elif major == 2:
        line = LINES["2.1"] if minor < 3 else LINES["2.3"]
    else:
        known = ", ".join(LINES)
        raise UsageError(f"containerd {shown}: gpuready models the lines {known} (and reads "
                         "other 1.x and 2.x releases as the nearest of them)")
    return line, f"containerd {shown} is read as {line.name}, the nearest line gpuready models"


class NodeLine(Record):
    """The line a node runs, the release it was told (None when only a file's version spoke),
    where that came from, and a note when the release is read as another line.

    ``version`` is the patch release ``(major, minor, patch)`` when the source names one
    (``--containerd-version 1.7.30``, the package database, ``containerd --version``); None for
    ``--containerd-version 1.7`` or a file's version alone. Only what differs between patch
    releases asks for it (which NRI and CDI features a release has).
    """

    line: Line
    release: tuple[int, int] | None
    source: str
    note: str | None = None
    version: tuple[int, int, int] | None = None

    @property
    def shown(self) -> str:
        """``containerd 1.7.30`` when the patch release is known, else ``containerd 1.7``
        (the release told), else the line's name."""
        if self.version is not None:
            return "containerd " + ".".join(map(str, self.version))
        if self.release is not None:
            return f"containerd {self.release[0]}.{self.release[1]}"
        return str(self.line)

    @property
    def label(self) -> str:
        """``containerd 1.7 (from --containerd-version)``, for messages."""
        return f"{self.line} ({self.source})"

    @property
    def major(self) -> int:
        """1 or 2."""
        return self.line.major


def from_release_text(text: str, *, source: str) -> NodeLine:
    """The line of a release written as ``1.7.20``, ``v2.1`` or ``containerd --version`` output."""
    from gpuready.containerd.versions import parse_release, parse_version

    release = parse_release(text)
    if release is None:
        raise UsageError(f"{source} {text!r}: expected a release such as 1.7.20 or 2.1")
    line, note = line_for_release(release)
    return NodeLine(line, release, source, note, parse_version(text))


def from_config_version(version: object) -> NodeLine:
    """The line a config ``version`` implies when nothing tells the release."""
    number = version if isinstance(version, int) and not isinstance(version, bool) else 1
    name = LINE_OF_CONFIG_VERSION.get(number, "2.3" if number > 4 else "1.7")
    return NodeLine(LINES[name], None, f"config version {number}; no containerd release known")


def node_line(
    *, root: Path | str | None, flag: str | None, config_version: object,
    ask_installed: bool = True,
) -> NodeLine:
    """The line the node at ``root`` runs (see the module's docstring for the order asked)."""
    if flag:
        return from_release_text(flag, source="--containerd-version")
    sandboxed = root is not None and Path(root).resolve() != Path("/")
    if sandboxed:
        found = from_package_database(Path(root))
        if found is not None:
            return found
    elif ask_installed:
        from gpuready.containerd.installed import installed_release, installed_version

        release = installed_release()
        if release is not None and release[0] in (1, 2):
            line, note = line_for_release(release)
            return NodeLine(line, release, "containerd --version", note, installed_version())
    return from_config_version(config_version)


# Package databases that name the installed containerd, as text (never run under a root).
_DPKG_STATUS = "/var/lib/dpkg/status"
_APK_INSTALLED = "/lib/apk/db/installed"
_CONTAINERD_PACKAGES = ("containerd", "containerd.io")


def from_package_database(root: Path) -> NodeLine | None:
    """The containerd release the root's dpkg or apk database lists as installed; None when
    neither names one."""
    from gpuready.node import FileKind, Node

    node = Node(root)
    for node_path, parse in ((_DPKG_STATUS, _dpkg_version), (_APK_INSTALLED, _apk_version)):
        try:
            text = node.read_text_or_none(node.path(node_path), kind=FileKind.PACKAGE_DATABASE)
        except Exception:  # unreadable, too large, a link out of the root: it tells nothing
            continue
        version = parse(text) if text else None
        if version:
            return from_release_text(version, source=f"package database {node_path}")
    return None


def _dpkg_version(text: str) -> str | None:
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, flags=re.MULTILINE))
        if fields.get("Package") in _CONTAINERD_PACKAGES and fields.get(
                "Status", "").endswith(" installed"):
            return _upstream(fields.get("Version", ""))
    return None


def _apk_version(text: str) -> str | None:
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z]):(.*)$", stanza, flags=re.MULTILINE))
        if fields.get("P") in _CONTAINERD_PACKAGES:
            return _upstream(fields.get("V", ""))
    return None


def _upstream(version: str) -> str | None:
    """``1.6.20`` from a package version such as ``1.6.20~ds1-1+deb12u1`` or ``1:1.7.27-1``."""
    match = re.search(r"(?:^|:)(\d+\.\d+(?:\.\d+)?)", version)
    return match.group(1) if match else None
