"""One pass of the agent over the node: read it as ``doctor`` does, plan as ``configure`` does,
write and restart through the ``--restart`` transaction, verify over the CRI.

A pass restarts containerd only when the config it would run changed (the transaction compares
the effective config before and after the write); a pass with nothing to change restarts
nothing. Owners gpuready must not fight (the GPU Operator's toolkit, which also marks an
NRI-mode node, since the Operator installs its toolkit there too; kubespray without ``force``)
are reported, never edited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from gpuready.agent.host import AgentHost
from gpuready.agent.paths import DBUS_SOCKET
from gpuready.agent.restart import Restarter, owner_unit
from gpuready.agent.settings import Settings
from gpuready.errors import GpureadyError
from gpuready.node import Node
from gpuready.owners.table import EditKind
from gpuready.records import Record
from gpuready.workflow.daytwo import NodeConfig
from gpuready.workflow.transaction import Outcome, RestartOptions

READY, NOT_READY, REPORTED, ERROR = "ready", "not-ready", "reported", "error"
VERDICTS = (READY, NOT_READY, REPORTED, ERROR)
RESTART_TIMEOUT_S = 60.0


class Verdict(Record):
    """What one pass found and did."""

    state: str  # one of VERDICTS
    detail: str
    owner: str
    line: str | None  # the containerd line, "1.6"
    cdi: str  # fresh, stale or absent
    findings: dict[str, int]  # by severity
    lines: tuple[str, ...] = ()  # the transaction's report

    @property
    def ready(self) -> bool:
        """Verified over the CRI."""
        return self.state == READY


class Agent:
    """The agent on one node: ``run_pass`` as often as the node changes."""

    def __init__(self, root: Path, settings: Settings) -> None:
        self.root, self.settings = Path(root), settings
        self.restarts = 0
        self.in_transaction = False
        # told when a pass finds the running containerd not serving the files before it acts
        # (the reports say "not ready" while the repair runs)
        self.on_not_ready: Callable[[str], None] = lambda detail: None

    def run_pass(self) -> Verdict:
        """Read, plan, write, restart when needed, verify; the verdict (never raises a
        GpureadyError: a problem is the verdict ``error``)."""
        from gpuready.owners.detect import detect

        node = Node(self.root)
        detection = detect(node)
        owner = detection.owner
        try:
            line = self._line(node)
            host = self._host(node, owner, line)
            nodeconfig = NodeConfig(node.path(owner.config), node.root, major=line.major,
                                    line=line)
            options = self._options(node, owner, host)
            lines = tuple(self._finish_pending(nodeconfig, options, host))
            reported = self._not_ours(owner)
            if reported:
                outcome = Outcome([])
            else:
                ready, why = self._verified(nodeconfig, options, host, Outcome([]))
                if not ready:
                    self.on_not_ready(why)
                outcome = self._transact(node, detection, nodeconfig, options, host)
                lines += tuple(outcome.lines())
            self.restarts += host.restarts
            ready, why = self._verified(nodeconfig, options, host, outcome)
        except GpureadyError as error:
            return self._verdict(node, detection, None, ERROR, error.message(), ())
        if reported:
            state, detail = REPORTED, f"{reported}; live: {why}"
        else:
            state, detail = (READY, why) if ready else (NOT_READY, why)
        return self._verdict(node, detection, line, state, detail, lines)

    # -- the steps ---------------------------------------------------------------------------

    @staticmethod
    def _line(node: Node):
        from gpuready.containerd.lines import node_line
        from gpuready.containerd.model import file_version
        from gpuready.owners.detect import detect

        owner = detect(node).owner
        text = node.read_text_or_none(node.path(owner.config), kind=_config_kind())
        return node_line(root=node.root, flag=None, config_version=file_version(text),
                         ask_installed=False)

    def _host(self, node: Node, owner, line) -> AgentHost:
        restarter = Restarter(self.settings.restart, bus_socket=node.path(DBUS_SOCKET),
                              unit=owner_unit(owner.name, node))
        in_place = owner.edit is EditKind.IN_PLACE or self.settings.force
        return AgentHost(line, restarter, owner=None if in_place else owner)

    def _options(self, node: Node, owner, host: AgentHost) -> RestartOptions:
        socket = self.settings.socket or str(owner.socket)
        return RestartOptions(
            address="unix://" + node.named(socket, option="socket"),
            command=host.restarter.describe(), timeout=RESTART_TIMEOUT_S,
            runtime_name=self.settings.runtime_name, expect_runtime=self.settings.runtime_name)

    def _not_ours(self, owner) -> str:
        """Why the agent reports this node and edits nothing ("" when it edits)."""
        if owner.edit is EditKind.OPERATOR:
            return (f"{owner.title} configures this node's runtime: reported, not edited "
                    "(its toolkit, or its NRI plugin, would be fought)")
        if owner.edit is EditKind.INVENTORY and not self.settings.force:
            return (f"{owner.title} rewrites {owner.config} {owner.regenerated}: reported, not "
                    "edited (force: true edits it anyway)")
        return ""

    def _finish_pending(self, nodeconfig: NodeConfig, options: RestartOptions,
                        host: AgentHost) -> list[str]:
        """A transaction a stopped agent (or command) left: finished with this run's restart."""
        from gpuready.workflow import journal
        from gpuready.workflow.transaction import finish_pending

        if not journal.pending(nodeconfig.node, nodeconfig.config):
            return []
        self.in_transaction = True
        try:
            finished = finish_pending(nodeconfig.root, nodeconfig.config, override=options,
                                      host=host)
        finally:
            self.in_transaction = False
        return [] if finished is None else finished.lines()

    def _transact(self, node: Node, detection, nodeconfig: NodeConfig,
                  options: RestartOptions, host: AgentHost) -> Outcome:
        from gpuready.workflow.transaction import run_transaction

        plan = self._planner(node, detection, nodeconfig, host)
        self.in_transaction = True
        try:
            return run_transaction(nodeconfig, plan, options=options, host=host, journaled=True)
        finally:
            self.in_transaction = False

    def _planner(self, node: Node, detection, nodeconfig: NodeConfig, host: AgentHost):
        """The plans ``configure`` makes with the settings' options: ``drop_in`` on a node whose
        containerd reads its own config (as ``configure --drop-in``), else where the owner
        reads (as ``configure``)."""
        change = self.change()
        if self.settings.drop_in and host.owner is None:
            from gpuready.containerd.dropin import drop_in_target
            from gpuready.workflow.daytwo import plan_configure_node

            drop_in = drop_in_target(None, root=node.root, main=nodeconfig.config)
            return lambda: plan_configure_node(nodeconfig, change, drop_in=drop_in)
        from gpuready.workflow.owner_change import plan_owner_change

        def plan():
            planned = plan_owner_change(detection, node=node, change=change,
                                        force=self.settings.force, config=None,
                                        containerd_version=None)
            host.owned = planned.owned
            return planned.plans

        return plan

    def change(self):
        """The :class:`ConfigureRequest` the settings describe (as configure's options)."""
        from gpuready.containerd.configure import ConfigureRequest
        from gpuready.containerd.register import CgroupMode, RuntimeRequest
        from gpuready.paths import NVIDIA_RUNTIME_BINARY

        runtime = RuntimeRequest(name=self.settings.runtime_name,
                                 binary=str(NVIDIA_RUNTIME_BINARY),
                                 systemd_cgroup=CgroupMode(self.settings.systemd_cgroup),
                                 default_confirmed=False)
        return ConfigureRequest(runtime=runtime, enable_cdi=self.settings.enable_cdi,
                                set_as_default=False, enable_cri=False)

    @staticmethod
    def _verified(nodeconfig: NodeConfig, options: RestartOptions, host: AgentHost,
                  outcome: Outcome) -> tuple[bool, str]:
        """Whether the running containerd serves the runtime as the files say (this pass's
        transaction's proof when it restarted, else a fresh ``verify --live``)."""
        from gpuready.workflow.transaction import verify

        if outcome.restarted or not outcome.ok:
            return outcome.ok, outcome.error or "restarted and verified over the CRI"
        check = Outcome([])
        ok = verify(nodeconfig, options, check, host=host)
        return ok, check.steps[-1].detail if check.steps else "not verified"

    def _verdict(self, node: Node, detection, line, state: str, detail: str,
                 lines: tuple[str, ...]) -> Verdict:
        findings, cdi = self._findings(node, detection)
        return Verdict(state, detail, detection.owner.name,
                       None if line is None else line.line.name, cdi, findings, lines)

    def _findings(self, node: Node, detection) -> tuple[dict[str, int], str]:
        """``doctor``'s findings by severity, and whether the CDI spec is fresh."""
        from gpuready.rules import selection
        from gpuready.rules.context import Options
        from gpuready.rules.engine import doctor

        try:
            report = doctor(options=Options(runtime_name=self.settings.runtime_name,
                                            root=node.root),
                            selected=selection(select=None, ignore=None), detection=detection,
                            probe=False)
        except GpureadyError:
            return {}, "absent"
        counts = Counter(problem.severity.value for problem in report.problems)
        rules = {problem.rule for problem in report.problems}
        if "cdi-spec-stale" in rules:
            cdi = "stale"
        elif "cdi-spec-missing" in rules or not _has_cdi_spec(node):
            cdi = "absent"
        else:
            cdi = "fresh"
        return dict(counts), cdi


def _has_cdi_spec(node: Node) -> bool:
    from gpuready.paths import CDI_DIRS

    return any(node.glob(node.path(folder) / pattern) for folder in CDI_DIRS
               for pattern in ("*.yaml", "*.json"))


def _config_kind():
    from gpuready.node import FileKind

    return FileKind.CONFIG
