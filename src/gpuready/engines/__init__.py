"""The container engines gpuready configures: containerd, Docker and CRI-O.

``get(name)`` returns an engine (:class:`gpuready.engines.base.Engine`); ``detect(root)`` (from
:mod:`gpuready.engines.detection`, which reads the facts tables alone) says
which one a node runs, from the files and sockets under ``root``. Each engine module owns its
facts table; the command line only names an engine.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from gpuready.engines.detection import NAMES, detect
from gpuready.errors import UsageError

_MODULES = {
    "containerd": "gpuready.engines.containerd",
    "docker": "gpuready.engines.docker.engine",
    "crio": "gpuready.engines.crio.engine",
}


def get(name: str):
    """The engine called ``name`` (one of :data:`NAMES`)."""
    if name not in _MODULES:
        from gpuready.suggest import hint

        raise UsageError(f"unknown engine {name!r}{hint(name, NAMES)} (choose one of "
                         f"{', '.join(NAMES)})")
    return importlib.import_module(_MODULES[name]).ENGINE


def chosen(name: str | None, root: Path | str):
    """The engine ``--engine`` names, else the one detected on the node under ``root``."""
    return get(name or detect(Path(root)).name)
