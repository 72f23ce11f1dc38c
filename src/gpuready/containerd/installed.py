"""The containerd installed on this machine, asked with ``containerd --version``."""

from __future__ import annotations

import functools
import shutil
import subprocess

from gpuready.containerd.versions import parse_release

VERSION_TIMEOUT_S = 3.0


@functools.cache
def installed_release() -> tuple[int, int] | None:
    """``(major, minor)`` of the containerd on PATH, or None when there is none."""
    binary = shutil.which("containerd")
    if binary is None:
        return None
    try:
        result = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
    return parse_release(result.stdout) if result.returncode == 0 else None
