"""CRI-O behind the engine interface (files only: gpuready does not claim live verification)."""

from __future__ import annotations

from pathlib import Path

from gpuready.engines.base import RuntimeChange, removing_created
from gpuready.engines.crio import config as crio_config
from gpuready.engines.crio import facts
from gpuready.engines.crio.facts import FACTS
from gpuready.errors import UsageError
from gpuready.node import Node
from gpuready.plan import Plan


class CrioEngine:
    """CRI-O: the runtime goes into a drop-in, read after crio.conf."""

    facts = FACTS

    def config_path(self, node: Node) -> Path:
        """``/etc/crio/crio.conf.d/99-nvidia.toml`` on ``node``."""
        return node.path(facts.DROPIN)

    def plan_add_runtime(self, path: Path, change: RuntimeChange, *, node: Node) -> Plan:
        """Register the runtime in the drop-in (and make it the default when confirmed)."""
        crio_config.refuse_reserved(change.name)
        if change.enable_cdi:
            raise UsageError("--enable-cdi has no CRI-O setting to write: CRI-O reads CDI specs "
                             "from its cdi_spec_dirs without a switch")
        dropin = crio_config.read_crio_file(path, missing_ok=True, node=node)
        others = crio_config.node_files(*self._node_paths(path), node=node, skip=path)
        plan = crio_config.plan_add_runtime(
            dropin, crio_config.CrioRuntime(change.name, change.binary),
            base=crio_config.base_entry(others))
        if not change.set_as_default:
            return plan
        updated = crio_config.CrioFile(path, plan.after, crio_config.read_text_data(plan.after))
        second = crio_config.plan_default_runtime(updated, change.name)
        return Plan(path, dropin.text, second.after, f"{plan.summary}; {second.summary}")

    def plan_remove_runtime(self, path: Path, name: str, *, node: Node) -> list[Plan]:
        """Remove the runtime's table from the drop-in; a drop-in gpuready created and left
        empty is removed."""
        dropin = crio_config.read_crio_file(path, missing_ok=True, node=node)
        plan = crio_config.plan_remove_runtime(dropin, name)
        return [removing_created(plan, node=node, empty=("",))]

    def default_runtime(self, path: Path, *, node: Node) -> str | None:
        """``crio.runtime.default_runtime`` of crio.conf and its drop-ins merged."""
        merged = crio_config.merge(crio_config.node_files(*self._node_paths(path), node=node))
        value = crio_config.lookup(merged, facts.DEFAULT_RUNTIME_PATH)
        return value if isinstance(value, str) else facts.DEFAULT_RUNTIME

    def runtimes(self, path: Path, *, node: Node) -> dict[str, dict]:
        """The runtime handlers of crio.conf and its drop-ins merged (and of ``path``)."""
        files = crio_config.node_files(*self._node_paths(path), node=node, skip=path)
        files.append(crio_config.read_crio_file(path, missing_ok=True, node=node))
        return {name: value for name, value in crio_config.runtimes(crio_config.merge(files))
                .items() if isinstance(value, dict)}

    @staticmethod
    def _node_paths(path: Path) -> tuple[Path, Path]:
        """crio.conf and the drop-in folder beside the drop-in ``path``."""
        folder = path.parent
        return folder.parent / facts.MAIN_CONFIG.name, folder


ENGINE = CrioEngine()
