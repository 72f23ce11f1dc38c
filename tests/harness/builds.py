"""Which containerd builds the real-daemon tests run against.

Debian's containerd (on PATH) always; and every folder named in ``GPUREADY_CONTAINERD_BUILDS``
(colon-separated, like PATH), each holding a build's ``containerd``, ``containerd-shim-runc-v2``
and ``ctr``. Every test that starts a containerd or asks one to load a config is parametrized over
them (``[system]``, ``[build-NAME]``), with the build's folder first on PATH, so the daemon finds
its own shim and gpuready its ``ctr``; a maintainer with a 2.x build runs the same suite with::

    GPUREADY_CONTAINERD_BUILDS=/opt/containerd-2.3.4/bin python3 -m pytest
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

ENV = "GPUREADY_CONTAINERD_BUILDS"
BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")


@dataclass(frozen=True)
class Build:
    """One containerd build: a folder with its binaries, or None for the one on PATH."""

    folder: Path | None

    @property
    def id(self) -> str:
        """The test id: ``system`` or ``build-<folder name>``."""
        if self.folder is None:
            return "system"
        return f"build-{self.folder.parent.name if self.folder.name == 'bin' else self.folder.name}"

    def path_env(self, current: str) -> str:
        """``PATH`` with this build's folder first."""
        return current if self.folder is None else f"{self.folder}{os.pathsep}{current}"

    def missing(self) -> list[str]:
        """The binaries a build folder lacks (none for the system build: tests require them)."""
        if self.folder is None:
            return []
        return [name for name in BINARIES if not os.access(self.folder / name, os.X_OK)]

    def binary(self, name: str) -> str | None:
        """The path of one of this build's binaries."""
        if self.folder is not None:
            return str(self.folder / name)
        return shutil.which(name)


def builds() -> list[Build]:
    """The system build, then each folder of ``GPUREADY_CONTAINERD_BUILDS``."""
    folders = [Path(part) for part in os.environ.get(ENV, "").split(os.pathsep) if part.strip()]
    return [Build(None), *(Build(folder.resolve()) for folder in folders)]
