"""The dockerd installed on this machine, asked with ``dockerd --version``."""

from __future__ import annotations

import functools
import re

from gpuready.engines.docker.facts import DAEMON_BINARY
from gpuready.programs import version_output

VERSION_TIMEOUT_S = 5.0
_RELEASE = re.compile(r"version (\d+)\.(\d+)")


def parse_release(text: str) -> tuple[int, int] | None:
    """``(20, 10)`` from "Docker version 20.10.24+dfsg1, build 5d6db84"."""
    match = _RELEASE.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


@functools.cache
def installed_release() -> tuple[int, int] | None:
    """``(major, minor)`` of the dockerd on PATH, or None when there is none."""
    output = version_output(DAEMON_BINARY, f"/usr/sbin/{DAEMON_BINARY}", timeout=VERSION_TIMEOUT_S)
    return parse_release(output) if output is not None else None
