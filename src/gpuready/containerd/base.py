"""Where ``gpuready setup`` takes the base config from, in a fixed order of preference."""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpuready import data
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.paths import FIXTURE_BASE
from gpuready.textfile import decode

CONTAINERD_DEFAULT_TIMEOUT_S = 20


@dataclass(frozen=True)
class BaseSource:
    """The base config's text and a phrase saying where it came from."""

    text: str
    origin: str
    keeps_existing: bool = False


def choose_base(
    *, node: Node, config_path: Path, base: Path | None, release: tuple[int, int] | None = None
) -> BaseSource:
    """The base: ``--base``; else the existing config; else the air-gap fixture on the node;
    else the node's ``containerd config default``; else the base shipped with gpuready.

    The node's ``config default`` is this machine's ``containerd config default`` only when the
    node is this machine; a node under ``--root`` whose containerd release is known (``release``:
    ``--containerd-version`` or its package database) gets its line's recorded one. The host's
    containerd says nothing about a node in a folder."""
    if base is not None:
        return BaseSource(node.read_text(base, kind=FileKind.CONFIG), f"--base {base}")
    if node.exists(config_path):
        text = node.read_text(config_path, kind=FileKind.CONFIG)
        return BaseSource(text, f"existing {config_path}", keeps_existing=True)
    fixture = node.path(FIXTURE_BASE)
    if node.is_file(fixture):
        return BaseSource(node.read_text(fixture, kind=FileKind.CONFIG), f"fixture {fixture}")
    if release is not None and not node.is_host:
        return recorded_default(release)
    default = containerd_config_default() if node.is_host else None
    if default is not None:
        return BaseSource(default, "`containerd config default`")
    return BaseSource(shipped_base(), "gpuready's built-in base (config version 2)")


def recorded_default(release: tuple[int, int]) -> BaseSource:
    """The recorded ``containerd config default`` of the line that models ``release``."""
    from gpuready.containerd.lines import line_for_release, recorded_default_text

    line, _ = line_for_release(release)
    return BaseSource(recorded_default_text(line.recorded),
                      f"the recorded `config default` of containerd {line.recorded}")


@functools.cache
def containerd_config_default() -> str | None:
    """The output of ``containerd config default``, or None when containerd is not installed.

    Asked once per process: ``setup`` checks its steps in a dry run before it writes.
    """
    binary = shutil.which("containerd")
    if binary is None:
        return None
    try:
        result = subprocess.run(
            [binary, "config", "default"],
            capture_output=True,
            timeout=CONTAINERD_DEFAULT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        reason = f"'containerd config default' failed: {_first_line(result.stderr)}"
        raise InputError(binary, reason)
    return decode(result.stdout, "containerd config default")


def shipped_base() -> str:
    """The version 2 base config shipped inside the package."""
    return data.read_text("base-config.toml")


def _first_line(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else "no output"
