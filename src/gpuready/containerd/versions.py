"""The one table that knows where each containerd config ``version`` keeps the CRI settings.

Every other module asks this one for a path; none spells a plugin ID itself.

| version | first containerd | CRI plugin holding ``containerd.runtimes`` |
|---|---|---|
| 1 (or no ``version`` key) | 1.0 | ``cri`` |
| 2 | 1.3 | ``io.containerd.grpc.v1.cri`` |
| 3 | 2.0 | ``io.containerd.cri.v1.runtime`` |
| 4 | 2.3 | ``io.containerd.cri.v1.runtime`` |
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gpuready.errors import UnsupportedVersionError
from gpuready.records import Record

KeyPath = tuple[str, ...]

CRI_V1 = "cri"
CRI_GRPC = "io.containerd.grpc.v1.cri"
CRI_RUNTIME = "io.containerd.cri.v1.runtime"
CRI_IMAGES = "io.containerd.cri.v1.images"

# Any of these in top-level ``disabled_plugins`` turns the CRI off: no runtime entry has effect.
CRI_PLUGIN_IDS = frozenset({CRI_V1, CRI_GRPC, CRI_RUNTIME, "io.containerd.cri.v1", "cri"})


class ConfigVersion(Record):
    """Where one config version keeps the settings gpuready reads and writes."""

    number: int
    cri_plugin: str
    first_containerd: str

    @property
    def cri_path(self) -> KeyPath:
        """The CRI plugin table: ``enable_cdi`` and ``cdi_spec_dirs`` live here."""
        return ("plugins", self.cri_plugin)

    @property
    def containerd_path(self) -> KeyPath:
        """The table holding ``default_runtime_name`` and ``runtimes``."""
        return (*self.cri_path, "containerd")

    @property
    def runtimes_path(self) -> KeyPath:
        """The table of runtime handlers, one sub-table per name."""
        return (*self.containerd_path, "runtimes")

    def runtime_path(self, name: str) -> KeyPath:
        """The table of the runtime called ``name``."""
        return (*self.runtimes_path, name)

    def options_path(self, name: str) -> KeyPath:
        """The runc ``options`` table of the runtime called ``name``."""
        return (*self.runtime_path(name), "options")

    @property
    def default_runtime_path(self) -> KeyPath:
        """The key path of ``default_runtime_name``."""
        return (*self.containerd_path, "default_runtime_name")


VERSIONS: Mapping[int, ConfigVersion] = {
    1: ConfigVersion(1, CRI_V1, "1.0"),
    2: ConfigVersion(2, CRI_GRPC, "1.3"),
    3: ConfigVersion(3, CRI_RUNTIME, "2.0"),
    4: ConfigVersion(4, CRI_RUNTIME, "2.3"),
}

NEWEST = max(VERSIONS)

# The highest config version each containerd release line loads (anything above is refused at
# start: "containerd config version `3` is not supported, the max version is `2`").
MAX_VERSION_BY_RELEASE: tuple[tuple[tuple[int, int], int], ...] = (
    ((1, 0), 2),
    ((2, 0), 3),
    ((2, 3), 4),
)


def spec_for(number: int, *, path: Path | str = "<config>") -> ConfigVersion:
    """The table entry for config version ``number``, or an error naming the file."""
    try:
        return VERSIONS[number]
    except KeyError:
        known = ", ".join(str(n) for n in VERSIONS)
        raise UnsupportedVersionError(
            path, f"config version {number} is not one gpuready knows ({known})"
        ) from None


def version_number(data: Mapping, *, path: Path | str = "<config>") -> int:
    """The file's ``version``; a file without one is version 1, as containerd reads it."""
    value = data.get("version", 1)
    # bool is an int in Python; ``version = true`` is still not a version.
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnsupportedVersionError(
            path, f"'version' must be an integer, not {type(value).__name__} {value!r}"
        )
    return value


def spec_of(data: Mapping, *, path: Path | str = "<config>") -> ConfigVersion:
    """The table entry for a parsed config."""
    return spec_for(version_number(data, path=path), path=path)


def max_version_for(containerd_release: tuple[int, int]) -> int:
    """The highest config version a containerd ``(major, minor)`` release loads."""
    best = MAX_VERSION_BY_RELEASE[0][1]
    for release, maximum in MAX_VERSION_BY_RELEASE:
        if containerd_release >= release:
            best = maximum
    return best


def parse_release(version_text: str) -> tuple[int, int] | None:
    """``(major, minor)`` from ``containerd --version`` output or a bare ``1.6.20``."""
    match = re.search(r"\bv?(\d+)\.(\d+)(?:\.\d+)?", version_text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_version(version_text: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` from ``containerd --version`` output or a bare ``1.7.30``;
    None when the text names no patch release (``1.7``, ``v2.1``)."""
    match = re.search(r"\bv?(\d+)\.(\d+)(\.\d+)?", version_text)
    if match is None or match.group(3) is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3)[1:])


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def render_key_path(path: KeyPath) -> str:
    """A key path as TOML writes it in a header: ``plugins."io.containerd.grpc.v1.cri".cni``."""
    return ".".join(part if _BARE_KEY.match(part) else f'"{part}"' for part in path)
