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


VALIDATE_TIMEOUT_S = 15.0


def dockerd_binary() -> str | None:
    """The dockerd on PATH (or in /usr/sbin), or None when there is none."""
    import shutil

    return shutil.which(DAEMON_BINARY) or shutil.which(f"/usr/sbin/{DAEMON_BINARY}")


@functools.cache
def supports_validate() -> bool:
    """True when the installed dockerd has ``--validate`` (Docker 23.0 and later; Debian's
    20.10 has not): its ``--help`` lists the option."""
    import subprocess

    binary = dockerd_binary()
    if binary is None:
        return False
    try:
        result = subprocess.run([binary, "--help"], capture_output=True, text=True,
                                timeout=VERSION_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--validate" in result.stdout + result.stderr


def validate(text: str, shown: str) -> str | None:
    """Ask the installed dockerd whether it accepts ``text`` as its daemon.json
    (``dockerd --validate --config-file``): None when it does, else its reason, with the
    temporary file's name replaced by ``shown``. The caller checked :func:`supports_validate`."""
    import subprocess
    import tempfile
    from pathlib import Path

    binary = dockerd_binary()
    with tempfile.TemporaryDirectory(prefix="gpuready-validate-") as folder:
        candidate = Path(folder) / "daemon.json"
        candidate.write_text(text, encoding="utf-8")
        try:
            result = subprocess.run([binary, "--validate", "--config-file", str(candidate)],
                                    capture_output=True, text=True, timeout=VALIDATE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"dockerd --validate did not answer within {VALIDATE_TIMEOUT_S:g}s"
        except OSError as error:
            return f"dockerd --validate could not run: {error.strerror or error}"
    if result.returncode == 0:
        return None
    lines = [line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    reason = lines[-1] if lines else f"dockerd --validate exited {result.returncode}"
    return reason.replace(str(candidate), shown)
