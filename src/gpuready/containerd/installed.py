"""The containerd installed on this machine, asked with ``containerd --version``."""

from __future__ import annotations

import functools

from gpuready.containerd.versions import parse_release
from gpuready.programs import version_output

VERSION_TIMEOUT_S = 3.0


@functools.cache
def installed_release() -> tuple[int, int] | None:
    """``(major, minor)`` of the containerd on PATH, or None when there is none."""
    output = version_output("containerd", timeout=VERSION_TIMEOUT_S)
    # "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
    return parse_release(output) if output is not None else None
