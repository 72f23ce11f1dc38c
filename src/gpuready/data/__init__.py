"""Files gpuready ships: containerd's recorded defaults, the key schema, the base config."""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def read_text(name: str) -> str:
    """The text of the shipped file ``name``.

    A plain path rather than ``importlib.resources``: that imports zipfile, tempfile and more on
    first use (a cost on every start), and a process that has dropped its privileges may no
    longer be allowed to read what it would import.
    """
    return (FOLDER / name).read_text(encoding="utf-8")
