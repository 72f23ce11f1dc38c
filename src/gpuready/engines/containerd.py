"""containerd as one engine among three: the existing containerd modules behind the interface.

Nothing moves: configuring, linting and verifying containerd stay in :mod:`gpuready.containerd`,
:mod:`gpuready.rules` and :mod:`gpuready.cri`; this adapter only calls them.
"""

from __future__ import annotations

from pathlib import Path

from gpuready.engines.base import RuntimeChange
from gpuready.engines.containerd_facts import FACTS
from gpuready.node import Node
from gpuready.paths import CONTAINERD_CONFIG
from gpuready.plan import Plan


class ContainerdEngine:
    """containerd's ``config.toml``: the registration of :mod:`gpuready.containerd`."""

    facts = FACTS

    def config_path(self, node: Node) -> Path:
        """``/etc/containerd/config.toml`` on ``node``."""
        return node.path(CONTAINERD_CONFIG)

    def plan_add_runtime(self, path: Path, change: RuntimeChange, *, node: Node) -> Plan:
        """The plan of ``gpuready configure`` for containerd."""
        from gpuready.containerd.configure import ConfigureRequest, plan_configure
        from gpuready.containerd.document import load_config
        from gpuready.containerd.register import CgroupMode, RuntimeRequest

        request = ConfigureRequest(
            runtime=RuntimeRequest(name=change.name, binary=change.binary,
                                   systemd_cgroup=CgroupMode(change.systemd_cgroup)),
            enable_cdi=change.enable_cdi,
            set_as_default=change.set_as_default,
        )
        return plan_configure(load_config(path, node=node), request)

    def plan_remove_runtime(self, path: Path, name: str, *, node: Node) -> list[Plan]:
        """What ``gpuready unconfigure`` takes back: everything gpuready's record beside
        ``path`` says it added (runtime ``name`` among it); nothing without a record."""
        from gpuready.containerd.unconfigure import plan_unconfigure

        return plan_unconfigure(path, node=node)

    def default_runtime(self, path: Path, *, node: Node) -> str | None:
        """``default_runtime_name`` at the table the file's version reads."""
        from gpuready.containerd import facts
        from gpuready.containerd.document import load_config
        from gpuready.containerd.versions import spec_of

        config = load_config(path, node=node)
        return facts.default_runtime_name(config.data, spec_of(config.data, path=path))

    def runtimes(self, path: Path, *, node: Node) -> dict[str, dict]:
        """The runtimes at the table the file's version reads."""
        from gpuready.containerd import facts
        from gpuready.containerd.document import load_config
        from gpuready.containerd.versions import spec_of

        config = load_config(path, node=node)
        return {name: dict(value) for name, value in
                facts.runtimes(config.data, spec_of(config.data, path=path)).items()}


ENGINE = ContainerdEngine()
