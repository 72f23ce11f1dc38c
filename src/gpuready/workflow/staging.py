"""Files as the workflow sees them: on disk, or, in a dry run, as they would be written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuready.fsio import apply_plan, locked
from gpuready.node import FileKind, Node
from gpuready.plan import Plan


class Staging:
    """Reads and writes for one workflow run.

    For real, every write goes through the safe writer at once and later reads see the file on
    disk, so each step parses what the previous one really wrote. In a dry run, writes are kept
    in memory (and their plans collected for diffs), and later reads see those texts instead.
    """

    def __init__(self, *, node: Node, kind_of: Callable[[Path], FileKind], dry_run: bool,
                 preview: bool | None = None) -> None:
        self.node = node
        self.kind_of = kind_of
        self.dry_run = dry_run
        # What the step lines say: "would be created" only when the user asked for a dry run,
        # not when a real run stages every file in memory before writing them as one transaction.
        self.preview = dry_run if preview is None else preview
        self.plans: list[Plan] = []
        self._pending: dict[Path, str] = {}

    def exists(self, path: Path) -> bool:
        """True when the file exists on the node or is pending in this dry run."""
        return path in self._pending or self.node.exists(path)

    def read(self, path: Path) -> str:
        """The file's text as the workflow currently has it."""
        if path in self._pending:
            return self._pending[path]
        return self.node.read_text(path, kind=self.kind_of(path))

    def overlay(self, path: Path, text: str) -> None:
        """Read ``text`` for ``path`` from now on without writing it: the config a node's owner
        will generate from what this run wrote (a k3s template rendered, a k0s drop-in merged).
        """
        self._pending[path] = text

    def read_or_none(self, path: Path) -> str | None:
        """The file's text, or None when it does not exist yet."""
        return self.read(path) if self.exists(path) else None

    def write(self, path: Path, text: str, summary: str) -> Plan:
        """Make ``path`` hold ``text``; the returned plan says whether anything changed."""
        if self.dry_run:
            plan = Plan(path, self.read_or_none(path), text, summary)
            self._pending[path] = text
        else:
            with locked(path, node=self.node):
                plan = Plan(path, self.read_or_none(path), text, summary)
                apply_plan(plan, node=self.node)
        self.plans.append(plan)
        return plan

    def edit(self, path: Path, compute: Callable[[str | None], Plan]) -> Plan:
        """Read ``path``, compute a plan from its text, and apply it, all under the file's lock."""
        if self.dry_run:
            plan = compute(self.read_or_none(path))
            self._pending[path] = plan.after
        else:
            with locked(path, node=self.node):
                plan = compute(self.read_or_none(path))
                apply_plan(plan, node=self.node)
        self.plans.append(plan)
        return plan
