"""Which container engine a node runs, from the files and sockets under its root.

Node facts: detection reads each engine's facts table alone (:mod:`gpuready.engines.facts`), not
the engines' code, so a rule that asks which engines a node has imports no planner.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from gpuready.errors import UsageError
from gpuready.records import Record

NAMES = ("containerd", "docker", "crio")
# Where each engine's facts are: detection reads these alone, not the engines' code.
_FACTS_MODULES = {
    "containerd": "gpuready.engines.containerd_facts",
    "docker": "gpuready.engines.docker.facts",
    "crio": "gpuready.engines.crio.facts",
}


class Detection(Record):
    """Which engine was chosen, and what on the node said so."""

    name: str
    evidence: tuple[str, ...]


def detect(root: Path) -> Detection:
    """The engine whose config, socket or daemon is on the node under ``root``.

    containerd wins whenever it shows (it is also what Docker runs on, and gpuready's default);
    Docker or CRI-O is chosen only when it is the only engine found. Nothing found: containerd.
    """
    found = engines_found(root, stop_at="containerd")
    if "containerd" in found or not found:
        return Detection("containerd", tuple(found.get("containerd", ())))
    if len(found) > 1:
        raise UsageError(f"both Docker and CRI-O are on this node ({'; '.join(found['docker'])}; "
                         f"{'; '.join(found['crio'])}): choose one with --engine")
    name, evidence = next(iter(found.items()))
    return Detection(name, tuple(evidence))


def engines_found(root: Path, *, stop_at: str | None = None) -> dict[str, list[str]]:
    """``{engine: [what on the node shows it]}`` for each engine whose config, socket or daemon
    is on the node under ``root``; once engine ``stop_at`` is found, the others are not looked
    for (nor their facts imported)."""
    from gpuready.node import Node

    node = Node(root)
    found: dict[str, list[str]] = {}
    for name in NAMES:
        facts = importlib.import_module(_FACTS_MODULES[name]).FACTS
        for mark in (facts.config, *facts.sockets, *facts.marks):
            path = node.path(mark)
            if node.exists(path):
                found.setdefault(name, []).append(str(path))
        if name == stop_at and name in found:
            break
    return found
