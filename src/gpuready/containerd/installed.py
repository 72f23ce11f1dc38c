"""The containerd installed on this machine, asked with ``containerd --version``."""

from __future__ import annotations

import functools

from gpuready.containerd.versions import parse_release, parse_version
from gpuready.programs import version_output

VERSION_TIMEOUT_S = 3.0


@functools.cache
def version_text() -> str | None:
    """What the containerd on PATH prints for ``--version`` (asked once), or None when there is
    none."""
    # "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
    return version_output("containerd", timeout=VERSION_TIMEOUT_S)


def installed_release() -> tuple[int, int] | None:
    """``(major, minor)`` of the containerd on PATH, or None when there is none."""
    output = version_text()
    return parse_release(output) if output is not None else None


def installed_version() -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of the containerd on PATH, or None when there is none."""
    output = version_text()
    return parse_version(output) if output is not None else None
