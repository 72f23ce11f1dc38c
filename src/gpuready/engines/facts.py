"""Where each container engine keeps things on a node: the shape of each engine's facts table.

Node facts, below everything that plans or judges: :mod:`gpuready.node` reads Docker's table
(:mod:`gpuready.engines.docker.facts`) to say why a missing ``daemon.json`` matters, and engine
detection reads the tables alone, not the engines' code.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuready.records import Record


class EngineFacts(Record):
    """Where an engine keeps things on a node, and how to recognise it (with the sources)."""

    name: str
    title: str
    config: PurePosixPath  # the file gpuready edits
    sockets: tuple[PurePosixPath, ...]  # where the daemon listens, first is the default
    marks: tuple[PurePosixPath, ...]  # files or folders whose presence means "this engine"
    live: bool  # whether gpuready can ask a running daemon (verify --live)
    source: str
