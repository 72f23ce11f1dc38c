"""What every container engine offers gpuready: one interface, one table of facts per engine.

An engine plans changes to its own config file (add or remove a runtime, the default runtime,
CDI), reads the default runtime back, lints its files, and (where a daemon runs) asks it what it
loaded. Planning never writes: the command line applies a plan through the one safe writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol, runtime_checkable

from gpuready.node import Node
from gpuready.plan import Plan


@dataclass(frozen=True)
class EngineFacts:
    """Where an engine keeps things on a node, and how to recognise it (with the sources)."""

    name: str
    title: str
    config: PurePosixPath  # the file gpuready edits
    sockets: tuple[PurePosixPath, ...]  # where the daemon listens, first is the default
    marks: tuple[PurePosixPath, ...]  # files or folders whose presence means "this engine"
    live: bool  # whether gpuready can ask a running daemon (verify --live)
    source: str


@dataclass(frozen=True)
class RuntimeChange:
    """What ``configure`` asks of any engine."""

    name: str
    binary: str
    systemd_cgroup: str = "true"  # containerd only: true, false or inherit
    enable_cdi: bool = False
    set_as_default: bool = False


def removing_created(plan: Plan, *, node: Node, empty: tuple[str, ...]) -> Plan:
    """``plan``, or the removal of its file when the edit leaves it ``empty`` and gpuready
    created it (no backup exists: gpuready keeps one of every file that was there before)."""
    from gpuready.fsio import backup_path

    if not plan.changes or (plan.after or "").strip() not in empty:
        return plan
    if node.exists(backup_path(plan.path)):
        return plan
    return Plan(plan.path, plan.before, None, f"{plan.summary}; remove the file gpuready created",
                plan.notes)


@runtime_checkable
class Engine(Protocol):
    """The operations ``configure``, ``unconfigure``, ``lint``, ``doctor`` and ``verify`` use."""

    facts: EngineFacts

    def config_path(self, node: Node) -> Path:
        """The config file this engine edits, on ``node``."""
        ...

    def plan_add_runtime(self, path: Path, change: RuntimeChange, *, node: Node) -> Plan:
        """The plan registering the runtime (and CDI / default runtime when asked)."""
        ...

    def plan_remove_runtime(self, path: Path, name: str, *, node: Node) -> list[Plan]:
        """The plans removing what ``configure`` added for runtime ``name`` (a plan whose
        ``after`` is None removes a file gpuready created)."""
        ...

    def default_runtime(self, path: Path, *, node: Node) -> str | None:
        """The runtime the engine uses when none is asked for, as the file says."""
        ...

    def runtimes(self, path: Path, *, node: Node) -> dict[str, dict]:
        """The runtimes the file registers, by name."""
        ...
