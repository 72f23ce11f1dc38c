"""Writing the journal of a ``--restart`` transaction (:mod:`gpuready.workflow.journal`) as the
transaction goes: before the first file, at the restart and the roll-back, and away at the verdict.
"""

from __future__ import annotations

from pathlib import Path

from gpuready import fsio
from gpuready.node import Node
from gpuready.workflow.journal import Journal, journal_path

# -- writing: the caller holds the lock of the config's folder -----------------------------------


def write(node: Node, config: Path, journal: Journal) -> None:
    """Write ``journal`` beside ``config`` atomically, readable by its owner only (it holds the
    files' texts, and a config may hold credentials)."""
    target = node.writable(journal_path(config))
    fsio.remove_stale_temporaries(target, node=node)
    fsio.write_atomic(target, journal.to_json(node.root).encode("utf-8"), mode=0o600, node=node)


def advance(node: Node, config: Path, journal: Journal, phase: str) -> Journal:
    """The journal moved on to ``phase``, written."""
    moved = journal._replace(phase=phase)
    write(node, config, moved)
    return moved


def clear(node: Node, config: Path) -> None:
    """Remove the journal: the transaction has its verdict."""
    target = node.writable(journal_path(config))
    if fsio.remove_file(target, node=node):  # WriteError: "<journal>: cannot remove: ..."
        fsio.remove_stale_temporaries(target, node=node)


class Keeper:
    """The journal of one transaction as it goes (``enabled`` False: none is kept, as when the
    node is driven from elsewhere). The caller holds the lock of the config's folder."""

    def __init__(self, node: Node, config: Path, *, enabled: bool = True) -> None:
        self.node = node
        self.config = config
        self.enabled = enabled
        self.journal: Journal | None = None

    def begin(self, journal: Journal) -> None:
        """Write the intent, before the first file."""
        if self.enabled:
            self.journal = journal
            write(self.node, self.config, journal)

    def adopt(self, journal: Journal) -> None:
        """Go on with a journal a killed run left (it is already on disk)."""
        self.journal = journal

    def advance(self, phase: str) -> None:
        """Say the transaction has reached ``phase`` (``restart``, ``roll back``)."""
        if self.enabled and self.journal is not None and self.journal.phase != phase:
            self.journal = advance(self.node, self.config, self.journal, phase)

    def clear(self) -> None:
        """The verdict is in: remove the journal."""
        if self.enabled and self.journal is not None:
            clear(self.node, self.config)
            self.journal = None
