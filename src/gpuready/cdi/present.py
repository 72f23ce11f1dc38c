"""Whether a node has any CDI spec file at all, asked without loading the CDI modules.

A check of a node without a spec (the usual containerd node) reads no YAML and plans nothing:
the CDI rules return at once, and the spec reader, the generator and YAML are not imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpuready.node import Node

SPEC_SUFFIXES = (".json", ".yaml")  # the files the CDI loader reads in a directory


def spec_files_exist(node: Node, folders: Iterable[Path | str]) -> bool:
    """True when any of ``folders`` (host paths) holds a ``*.json`` or ``*.yaml`` file, or is
    something the full scan must look at and report (not a folder, unreadable)."""
    for folder in folders:
        if not node.lexists(folder):
            continue
        if not node.is_dir(folder):
            return True
        try:
            names = node.listdir(folder)
        except OSError:
            return True
        if any(name.endswith(SPEC_SUFFIXES) for name in names):
            return True
    return False
