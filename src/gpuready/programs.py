"""Programs installed on this machine, asked for their version."""

from __future__ import annotations

import shutil
import subprocess


def version_output(*candidates: str, timeout: float) -> str | None:
    """What the first of ``candidates`` found (on PATH, or as a path) prints for ``--version``;
    None when none is installed, it fails, or it does not answer within ``timeout`` seconds."""
    binary = next(filter(None, map(shutil.which, candidates)), None)
    if binary is None:
        return None
    try:
        result = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None
