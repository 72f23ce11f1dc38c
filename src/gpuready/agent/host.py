"""The restart transaction's host for the agent: a node under ``--root`` (the host's ``/`` at
``/host``), as :class:`~gpuready.workflow.transaction.TreeHost` reads and writes it, restarted
only by the settings' own method (:mod:`gpuready.agent.restart`).

Where the runtime goes into an owner's input (a k3s/RKE2 template, a k0s drop-in, MicroK8s's
template), what containerd would run is the config the owner renders from it, not the input's
text: the before and after compared for the restart are those renderings
(:mod:`gpuready.owners.effective`).
"""

from __future__ import annotations

from pathlib import Path

from gpuready.agent.restart import Restarter
from gpuready.compat import tomllib
from gpuready.workflow.daytwo import NodeConfig
from gpuready.workflow.transaction import RestartOptions, TreeHost


class AgentHost(TreeHost):
    """A :class:`TreeHost` whose restart is the agent's :class:`Restarter`; with ``owner`` (an
    owner whose input gpuready writes), the effective config is the owner's rendering of it."""

    def __init__(self, line, restarter: Restarter, *, owner=None) -> None:
        super().__init__(line)
        self.restarter = restarter
        self.owner = owner
        self.owned = None  # the latest OwnerPlan, set by the agent's planner
        self.restarts = 0

    def release(self) -> tuple[int, int] | None:
        """The node line's release; none for an owner's input (it is not containerd's own
        TOML, and its version is the one the owner renders)."""
        return None if self.owner is not None else super().release()

    def dump(self, node: NodeConfig, candidates: dict[Path, str | None], *,
             options: RestartOptions) -> dict:
        """The model's load of the node's files, or the owner's rendering with and without the
        planned input."""
        if self.owner is None:
            return super().dump(node, candidates, options=options)
        from gpuready.owners.effective import current_effective_config, effective_config

        text = effective_config(self.owned, node.node) if candidates and self.owned \
            else current_effective_config(self.owner, node.node)
        return tomllib.loads(text)

    def shell(self, command: str, *, timeout: float) -> tuple[int, str] | None:
        """The settings' restart (``command`` is its description, never run by a shell)."""
        self.restarts += 1
        return self.restarter.run(timeout=timeout)
