"""``--restart``: write a change, restart containerd, prove it, or put everything back.

The steps, each one a line of the report:

1. pre-flight: the node's own ``containerd config dump`` reads the candidate files at their final
   import paths (copies in a temporary folder, imports rewritten) before anything is written. The
   runtime must be in the dump (configure) or gone from it (unconfigure): containerd 1.6.20 exits
   0 on files it half ignores, so the exit code alone proves nothing. A file whose ``version`` is
   above what the node's containerd reads is refused.
2. write every file (all or nothing, :mod:`gpuready.changeset`).
3. restart only when the effective config (the dump) changed: ``systemctl restart containerd``,
   or the operator's ``--restart-command``, under a timeout.
4. wait until the CRI answers again, then ``verify --live`` against the effective config (and the
   sandbox probe with ``--probe``).
5. on any failure after the write: put every file back as it was, restart again, wait for the
   CRI, and say so; the exit code is 1.

Everything the transaction does to the node goes through a host (:class:`LocalHost`: this
machine, as the command line runs it). Another host can drive the same steps on a node from
elsewhere (the Ansible collection does it from its controller).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gpuready.changeset import locked_all, new_backups, put_back
from gpuready.containerd import facts
from gpuready.containerd.effective import load_effective
from gpuready.containerd.installed import installed_release
from gpuready.containerd.versions import max_version_for, spec_of
from gpuready.errors import GpureadyError
from gpuready.plan import Plan
from gpuready.workflow.daytwo import NodeConfig, is_bookkeeping, write

SYSTEMD_RESTART = "systemctl restart containerd"
POLL_S = 0.2


@dataclass(frozen=True)
class RestartOptions:
    """How to restart and what to prove afterwards.

    ``expect_runtime``: the runtime that must be loaded afterwards (configure); ``gone_runtime``:
    one that must not be (unconfigure).
    """

    address: str
    command: str | None = None
    timeout: float = 60.0
    probe: bool = False
    runtime_name: str = "nvidia"
    expect_runtime: str | None = None
    gone_runtime: str | None = None
    containerd: str = "containerd"


@dataclass
class Step:
    """One step of the transaction and how it went."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        """``[ok] name: detail``."""
        return f"[{'ok' if self.ok else 'FAILED'}] {self.name}: {self.detail}"


@dataclass
class Outcome:
    """Everything the transaction did, in order."""

    plans: list[Plan]
    steps: list[Step] = field(default_factory=list)
    written: bool = False
    restarted: bool = False
    rolled_back: bool = False

    @property
    def ok(self) -> bool:
        """Every step passed."""
        return all(step.ok for step in self.steps)

    @property
    def diff(self) -> str:
        """The diff of every file (the record left out)."""
        return "".join(plan.diff() for plan in self.plans if not is_bookkeeping(plan))

    def add(self, name: str, ok: bool, detail: str) -> bool:
        """Record a step; return ``ok``."""
        self.steps.append(Step(name, ok, detail))
        return ok

    def lines(self) -> list[str]:
        """The report, one line per file and step, then the verdict."""
        lines = [f"{plan.path}: {plan.summary}" + ("" if plan.changes else " (no change)")
                 for plan in self.plans if not is_bookkeeping(plan)]
        lines += [step.line() for step in self.steps]
        if self.rolled_back:
            lines.append("every file was put back as it was and containerd restarted on it: "
                         "the node is back where it was")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``status`` is ``ok`` or ``failed``."""
        return {
            "status": "ok" if self.ok else "failed",
            "files": [{"file": str(p.path), "changed": p.changes, "summary": p.summary,
                       "diff": p.diff()} for p in self.plans if not is_bookkeeping(p)],
            "steps": [vars(step) for step in self.steps],
            "written": self.written,
            "restarted": self.restarted,
            "rolled_back": self.rolled_back,
        }


class Host(Protocol):
    """What the transaction does to the node: lock, read its containerd, write files, run the
    restart command, reach the CRI."""

    def locked(self, node: NodeConfig, paths: list[Path]) -> AbstractContextManager:
        """Hold the files' locks while the change is planned and written."""

    def release(self) -> tuple[int, int] | None:
        """The node's containerd release, or None when unknown."""

    def dump(self, node: NodeConfig, candidates: dict[Path, str | None], *,
             options: RestartOptions) -> dict:
        """``containerd config dump`` of the node's files with ``candidates`` in place."""

    def new_backups(self, node: NodeConfig, plans: list[Plan]) -> list[Path]:
        """The backups writing ``plans`` would create."""

    def write(self, node: NodeConfig, plans: list[Plan]) -> list[Plan]:
        """Write the plans, all or nothing; those written."""

    def put_back(self, node: NodeConfig, written: list[Plan], backups: Iterable[Path]) -> None:
        """Give the written files their ``before`` again and remove ``backups``."""

    def shell(self, command: str, *, timeout: float) -> tuple[int, str] | None:
        """Run ``command`` through the shell: exit code and standard error; None on timeout."""

    def connect(self, address: str, *, timeout: float):
        """A CRI client (a context manager, as :class:`gpuready.cri.client.CriClient`)."""


class LocalHost:
    """The node is this machine (the command line): gpuready's safe writer, processes, and the
    CRI over its socket."""

    def locked(self, node: NodeConfig, paths: list[Path]) -> AbstractContextManager:
        """:func:`gpuready.changeset.locked_all`."""
        return locked_all(paths, node=node.node)

    def release(self) -> tuple[int, int] | None:
        """``containerd --version`` of the containerd on PATH."""
        return installed_release()

    def dump(self, node: NodeConfig, candidates: dict[Path, str | None], *,
             options: RestartOptions) -> dict:
        """:func:`config_dump`."""
        return config_dump(node, candidates, options=options)

    def new_backups(self, node: NodeConfig, plans: list[Plan]) -> list[Path]:
        """:func:`gpuready.changeset.new_backups`."""
        return new_backups(plans, node=node.node)

    def write(self, node: NodeConfig, plans: list[Plan]) -> list[Plan]:
        """:func:`gpuready.workflow.daytwo.write`."""
        return write(plans, node=node)

    def put_back(self, node: NodeConfig, written: list[Plan], backups: Iterable[Path]) -> None:
        """:func:`gpuready.changeset.put_back`."""
        put_back(written, node=node.node, backups=backups)

    def shell(self, command: str, *, timeout: float) -> tuple[int, str] | None:
        """A shell process under the timeout."""
        try:
            result = subprocess.run(command, shell=True, capture_output=True, text=True,
                                    timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return None
        return result.returncode, result.stderr

    def connect(self, address: str, *, timeout: float):
        """A gRPC client on the socket."""
        from gpuready.cri.client import CriClient

        return CriClient(address, timeout=timeout)


def run_transaction(
    node: NodeConfig,
    plan: Callable[[], list[Plan]],
    *,
    options: RestartOptions,
    dry_run: bool = False,
    host: Host | None = None,
) -> Outcome:
    """Plan under the files' locks, pre-flight, write, restart, verify; undo on failure."""
    host = host or LocalHost()
    paths = [p.path for p in plan()]
    with host.locked(node, paths):
        plans = plan()
        outcome = Outcome(plans)
        if not any(p.changes for p in plans):
            outcome.add("change", True, "nothing to change; containerd not restarted")
            return outcome
        before, after = preflight(node, plans, options=options, outcome=outcome, host=host)
        if not outcome.ok or dry_run:
            if not outcome.ok:
                outcome.add("write", False, "refused before writing: no file was changed")
            return outcome
        fresh = host.new_backups(node, plans)
        written = host.write(node, plans)
        outcome.written = True
        outcome.add("write", True, f"{len(written)} file(s) written")
        if before == after:
            outcome.add("restart", True, "the effective config did not change: not restarted")
            return outcome
        if restart_and_verify(node, options, outcome, host=host):
            return outcome
        roll_back(node, written, fresh, options, outcome, host=host)
    return outcome


def preflight(
    node: NodeConfig, plans: list[Plan], *, options: RestartOptions, outcome: Outcome,
    host: Host | None = None,
) -> tuple[dict | None, dict | None]:
    """The dumps of the effective config now and with the candidates; failures go to
    ``outcome``."""
    host = host or LocalHost()
    from gpuready.changeset import check
    from gpuready.containerd.gate import RefusedError

    try:
        check(plans)  # the never-break gate, before containerd is asked or anything written
    except RefusedError as error:
        outcome.add("pre-flight", False, error.message())
        return None, None
    refused = _versions_refused(plans, host.release())
    if refused:
        outcome.add("pre-flight", False, refused)
        return None, None
    candidates = {p.path: p.after for p in plans if p.changes and not is_bookkeeping(p)}
    try:
        before = host.dump(node, {}, options=options)
        after = host.dump(node, candidates, options=options)
    except GpureadyError as error:
        outcome.add("pre-flight", False, error.message())
        return None, None
    spec = spec_of(after)
    loaded = set(facts.runtimes(after, spec))
    lost = set(facts.runtimes(before, spec_of(before))) - loaded - {options.gone_runtime}
    if lost:
        outcome.add("pre-flight", False,
                    f"containerd's config dump of the new files loses runtime(s) "
                    f"{', '.join(sorted(lost))}")
    elif options.expect_runtime and options.expect_runtime not in loaded:
        outcome.add("pre-flight", False,
                    f"containerd's config dump of the new files has no runtime "
                    f"{options.expect_runtime} (it loads: {', '.join(sorted(loaded)) or 'none'})")
    elif options.gone_runtime and options.gone_runtime in loaded:
        outcome.add("pre-flight", False,
                    f"containerd's config dump of the new files still has runtime "
                    f"{options.gone_runtime}")
    else:
        outcome.add("pre-flight", True, f"containerd's config dump of the new files loads "
                    f"{', '.join(sorted(loaded)) or 'no runtime'}")
    return before, after


def _versions_refused(plans: list[Plan], release: tuple[int, int] | None) -> str | None:
    if release is None:
        return None
    highest = max_version_for(release)
    for plan in plans:
        if not plan.changes or plan.after is None or is_bookkeeping(plan):
            continue
        version = tomllib.loads(plan.after).get("version", 1)
        if isinstance(version, int) and version > highest:
            return (f"{plan.path}: config version {version} is above what the installed "
                    f"containerd {release[0]}.{release[1]} reads ({highest}); nothing written")
    return None


def config_dump(
    node: NodeConfig, candidates: dict[Path, str | None], *, options: RestartOptions
) -> dict:
    """``containerd config dump`` of the node's files with ``candidates`` in place."""
    from gpuready.containerd.dump import config_dump as dump

    return dump(node.config, root=node.root, candidates=candidates,
                containerd=options.containerd)


def restart_and_verify(
    node: NodeConfig, options: RestartOptions, outcome: Outcome, *, host: Host
) -> bool:
    """Restart, wait for the CRI, verify; each step goes to ``outcome``."""
    if not restart(options, outcome, "restart", host=host):
        return False
    outcome.restarted = True
    if not wait_for_cri(options, outcome, host=host):
        return False
    return verify(node, options, outcome, host=host)


def restart(options: RestartOptions, outcome: Outcome, name: str, *, host: Host) -> bool:
    """Run the restart command (through the shell) under the timeout."""
    command = options.command or SYSTEMD_RESTART
    result = host.shell(command, timeout=options.timeout)
    if result is None:
        return outcome.add(name, False, f"{command!r} did not finish in {options.timeout:g}s")
    code, stderr = result
    if code != 0:
        said = (stderr.strip().splitlines() or ["no output"])[-1]
        return outcome.add(name, False, f"{command!r} exited {code}: {said}")
    return outcome.add(name, True, f"ran {command!r}")


def wait_for_cri(options: RestartOptions, outcome: Outcome, *, host: Host) -> bool:
    """Poll the CRI until it answers ``Version`` or the timeout passes."""
    deadline = time.monotonic() + options.timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with host.connect(options.address, timeout=2.0) as client:
                version = client.version()
                client.status(verbose=False)
            return outcome.add("cri", True, f"{version.runtime_name} {version.runtime_version} "
                               f"answers at {options.address}")
        except GpureadyError as error:
            last = error.message()
        time.sleep(POLL_S)
    return outcome.add("cri", False, f"no answer at {options.address} in {options.timeout:g}s "
                       f"({last})")


def verify(node: NodeConfig, options: RestartOptions, outcome: Outcome, *, host: Host) -> bool:
    """``verify --live`` against the effective config (and the probe when asked)."""
    from gpuready.cri.verify import VerifyOptions, verify_live

    if options.expect_runtime is None:
        return _verify_gone(options, outcome, host=host)
    effective = load_effective(node.config, root=node.root, major=node.major)
    import tomlkit

    with tempfile.TemporaryDirectory(prefix="gpuready-verify-") as folder:
        merged = Path(folder) / "effective.toml"
        merged.write_text(tomlkit.dumps(effective.data), encoding="utf-8")
        try:
            report = verify_live(VerifyOptions(
                address=options.address, config_path=merged, root=node.root,
                runtime_name=options.expect_runtime, handler=options.expect_runtime,
                probe=options.probe, timeout=10.0, probe_timeout=options.timeout,
            ), connect=host.connect)
        except GpureadyError as error:
            return outcome.add("verify --live", False, error.message())
    failed = [check.message for check in report.checks if check.outcome.value == "failed"]
    if failed:
        return outcome.add("verify --live", False, "; ".join(failed))
    outcome.add("verify --live", True, f"runtime {options.expect_runtime} is loaded as written")
    if report.probe is None:
        return True
    if report.probe.ok and report.probe.removed:
        return outcome.add("probe", True, f"a pod sandbox ran through {options.expect_runtime}")
    return outcome.add("probe", False, report.probe.message)


def _verify_gone(options: RestartOptions, outcome: Outcome, *, host: Host) -> bool:
    from gpuready.cri.live import parse_live_config

    try:
        with host.connect(options.address, timeout=10.0) as client:
            config = client.status(verbose=True).config() or {}
    except GpureadyError as error:
        return outcome.add("verify --live", False, error.message())
    loaded = set(parse_live_config(config).runtimes)
    if options.gone_runtime and options.gone_runtime in loaded:
        return outcome.add("verify --live", False,
                           f"runtime {options.gone_runtime} is still loaded")
    return outcome.add("verify --live", True,
                       f"containerd serves {', '.join(sorted(loaded)) or 'no runtime'}")


def roll_back(
    node: NodeConfig,
    written: list[Plan], backups: list[Path], options: RestartOptions, outcome: Outcome,
    *, host: Host,
) -> None:
    """Put every written file back, restart again (the first restart may have stopped
    containerd even when it failed) and wait for the CRI."""
    host.put_back(node, written, backups)
    outcome.add("roll back", True, f"{len(written)} file(s) put back as they were")
    if restart(options, outcome, "restart again", host=host) and wait_for_cri(
            options, outcome, host=host):
        outcome.rolled_back = True
    else:
        outcome.add("node", False, "containerd did not come back on the original files: "
                    "look at its log before anything else")
