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

From the write to the verdict a journal lies beside the config (:mod:`gpuready.workflow.journal`):
a run killed in between is finished by the next writing command (:func:`finish_pending`), which
restarts containerd only with its own ``--restart`` options: the journal holds no command.

Everything the transaction does to the node goes through a host (:class:`LocalHost`: this
machine, as the command line runs it; :class:`TreeHost`: a node under ``--root``, where nothing of
this machine's containerd is run or asked). Another host can drive the same steps on a node from
elsewhere (the Ansible collection does it from its controller).
"""

from __future__ import annotations

import math
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gpuready.changeset import locked_all, new_backups, put_back
from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.effective import load_effective
from gpuready.containerd.installed import installed_release
from gpuready.containerd.record import is_bookkeeping
from gpuready.containerd.versions import max_version_for, spec_of
from gpuready.errors import GpureadyError
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.textfile import sha256
from gpuready.workflow import journal as txn
from gpuready.workflow.daytwo import NodeConfig, write
from gpuready.workflow.journal_keeper import Keeper

SYSTEMD_RESTART = "systemctl restart containerd"
POLL_S = 0.2
OUTPUT_KEPT = 64 * 1024  # bytes of the restart command's standard error kept: its last ones


class RestartOptions(Record):
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
    probe_image: str = "node"  # as verify --live --probe-image: "build" imports a stand-in
    probe_binary: str = "/bin/busybox"


def options_problem(options: RestartOptions) -> str | None:
    """Why ``options`` cannot drive a transaction (None: they can); asked before anything is
    written, since a timeout that cannot be waited for would fail only after the write."""
    timeout = options.timeout
    if not math.isfinite(timeout) or not 0 < timeout <= txn.MAX_TIMEOUT:
        return (f"--restart-timeout {timeout:g}: give the seconds to wait for the restart and "
                f"the CRI, above 0 and at most {txn.MAX_TIMEOUT:g}")
    for flag, value in (("--restart-command", options.command), ("--address", options.address)):
        if value is None:
            continue
        if not value.strip():
            return f"{flag} is empty"
        if any(ord(char) < 32 or ord(char) == 127 for char in value):
            return f"{flag} {value!r} holds a control character"
    if not options.address.startswith(("unix://", "/")) and "://" in options.address:
        return f"--address {options.address}: only unix sockets are supported"
    return None


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
    def exit_code(self) -> int:
        """0 when every step passed; 2 when it was refused before a byte was written; else 1
        (written, then a step failed: rolled back, or the node left as the steps say)."""
        if self.ok:
            return 0
        return 1 if self.written else 2

    @property
    def error(self) -> str | None:
        """The first failed step as one line, or None when every step passed."""
        failed = next((step for step in self.steps if not step.ok), None)
        return None if failed is None else f"{failed.name}: {failed.detail}"

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
            "exit_code": self.exit_code,
            "error": self.error,
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

    @staticmethod
    def for_node(node: NodeConfig) -> LocalHost:
        """The host of ``node``: this machine for the root ``/``, else :class:`TreeHost`."""
        return LocalHost() if node.node.is_host else TreeHost(node.line)

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
        """:func:`run_bounded`."""
        return run_bounded(command, timeout=timeout)

    def connect(self, address: str, *, timeout: float):
        """A gRPC client on the socket."""
        from gpuready.cri.client import CriClient

        return CriClient(address, timeout=timeout)


class TreeHost(LocalHost):
    """A node in a folder (``--root``): written by gpuready's writer, restarted only by the
    operator's own ``--restart-command``, verified at a socket inside the root. This machine's
    containerd is neither run nor asked: the release is the node line's (``--containerd-version``
    or the root's package database) and the pre-flight is the model's, not a ``config dump``."""

    def __init__(self, line) -> None:
        self._line = line

    def release(self) -> tuple[int, int] | None:
        """The release the node line names (None: only a config version spoke)."""
        return None if self._line is None else self._line.release

    def dump(self, node: NodeConfig, candidates: dict[Path, str | None], *,
             options: RestartOptions) -> dict:
        """What the model loads from the node's files with ``candidates`` in place, in the
        shape of a ``config dump``."""
        from gpuready.containerd.lines import node_line
        from gpuready.containerd.model import load_node

        line = self._line or node_line(root=node.root, flag=None, config_version=node.major + 1)
        return load_node(node.config, node=node.node, line=line, overrides=candidates).data


def run_bounded(command: str, *, timeout: float) -> tuple[int, str] | None:
    """Run ``command`` through the shell: its exit code and the last :data:`OUTPUT_KEPT` bytes
    of its standard error (standard output is not kept); None when it outlives ``timeout``.

    A command that prints without end cannot exhaust gpuready's memory: only the tail is kept."""
    process = subprocess.Popen(command, shell=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kept = bytearray()
    reader = threading.Thread(target=_keep_tail, args=(process.stderr, kept), daemon=True)
    reader.start()
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None
    # a daemon the command started may hold the pipe open for ever: wait a moment, no more
    reader.join(timeout=1.0)
    return code, bytes(kept[-OUTPUT_KEPT:]).decode("utf-8", errors="replace")


def _keep_tail(stream, kept: bytearray) -> None:
    """Read ``stream`` to its end, keeping only its last :data:`OUTPUT_KEPT` bytes."""
    with stream:
        while chunk := stream.read1(OUTPUT_KEPT):
            kept += chunk
            if len(kept) > 2 * OUTPUT_KEPT:
                del kept[:-OUTPUT_KEPT]


def run_transaction(
    node: NodeConfig,
    plan: Callable[[], list[Plan]],
    *,
    options: RestartOptions,
    dry_run: bool = False,
    host: Host | None = None,
    journaled: bool | None = None,
) -> Outcome:
    """Plan under the files' locks, pre-flight, write, restart, verify; undo on failure.

    ``journaled``: keep the journal beside the config from the write to the verdict (default:
    when the node is this machine, ``host`` None)."""
    problem = options_problem(options)
    if problem is not None:
        from gpuready.errors import UsageError

        raise UsageError(problem)
    keeper = Keeper(node.node, node.config,
                    enabled=host is None if journaled is None else journaled)
    host = host or LocalHost.for_node(node)
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
        keeper.begin(txn.intent(node.node, node.config, major=node.major, plans=plans,
                                backups=fresh, options=options, restart=before != after))
        written = _write(node, plans, keeper, host=host)
        outcome.written = True
        outcome.add("write", True, f"{len(written)} file(s) written")
        if before == after:
            outcome.add("restart", True, "the effective config did not change: not restarted")
            keeper.clear()
            return outcome
        restart_or_roll_back(node, written, fresh, options, outcome, keeper=keeper, host=host)
    return outcome


def _write(node: NodeConfig, plans: list[Plan], keeper: Keeper, *, host: Host) -> list[Plan]:
    """Write the plans; a write that fails has put every file back, and the journal goes."""
    try:
        return host.write(node, plans)
    except BaseException:
        keeper.clear()
        raise


def restart_or_roll_back(
    node: NodeConfig, written: list[Plan], backups: list[Path], options: RestartOptions,
    outcome: Outcome, *, keeper: Keeper, host: Host,
) -> None:
    """Restart and verify the written change; on failure put it back and restart again. The
    journal follows each phase and goes once the node is known: verified, or back as it was."""
    keeper.advance("restart")
    if restart_and_verify(node, options, outcome, host=host):
        keeper.clear()
        return
    keeper.advance("roll back")
    roll_back(node, written, backups, options, outcome, host=host)
    if outcome.rolled_back:
        keeper.clear()


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
                probe=options.probe, probe_image=options.probe_image,
                probe_binary=Path(options.probe_binary), timeout=10.0,
                probe_timeout=options.timeout,
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


# -- a transaction a killed run left ------------------------------------------------------------


@dataclass
class Finished:
    """A transaction a killed run left, as a later command settled it.

    ``verdict``: ``finished`` (the change stands: restarted and verified, or nothing to restart),
    ``rolled back`` (every file as before the transaction, containerd on them), or ``not
    finished`` (the journal stays: the node needs a person)."""

    journal: Path
    outcome: Outcome
    verdict: str
    detail: str

    @property
    def settled(self) -> bool:
        """The node is in a known state: the command may go on."""
        return self.verdict != "not finished"

    def lines(self) -> list[str]:
        """What was found, each step, the verdict."""
        return [
            f"a --restart transaction on this node was killed before its verdict "
            f"(journal {self.journal}): finishing it first",
            *(step.line() for step in self.outcome.steps),
            f"pending transaction {self.verdict}: {self.detail}",
        ]


def finish_pending(
    root: Path, config: Path, *, override: RestartOptions | None = None,
    host: Host | None = None,
) -> Finished | None:
    """Finish the transaction whose journal lies beside ``config`` (None: there is none).

    Every file still holding what the transaction wrote: restart and verify (roll back on
    failure). Some of them not written (killed while writing): put back what was written; a
    restart only when containerd may have read the change. A file that holds neither text is
    someone else's edit: nothing is touched. ``override``: this command's own ``--restart``
    options, the only way a pending restart is carried out (the journal names none); without
    them a transaction that needs a restart is left as it is, and the verdict says so.
    """
    from gpuready.node import Node

    view = Node(root)
    found = txn.load(view, config)  # raises for a journal gpuready must not act on
    if found is None:
        return None
    node = NodeConfig(view.path(found.config), view.root, major=found.major)
    host = host or LocalHost.for_node(node)
    paths = [config, *(view.path(entry.path) for entry in found.files)]
    with host.locked(node, paths):
        found = txn.load(view, config)  # again under the lock: a live run may just have ended
        if found is None:
            return None
        keeper = Keeper(view, config)
        keeper.adopt(found)
        options = _pending_options(found, override)
        outcome = Outcome([])
        verdict, detail = _settle(node, found, options, outcome, keeper=keeper, host=host)
        if verdict != "not finished":
            _remove_killed_temporaries(view, paths)
    return Finished(txn.journal_path(config), outcome, verdict, detail)


def _remove_killed_temporaries(view, paths: list[Path]) -> None:
    """The temporary files the killed run left beside the transaction's files: a run killed
    between swapping a file in and removing the old one leaves the old one under a temporary
    name, and a finish that keeps the written file writes nothing there that would remove it
    (only the writer's next write of that file does: :func:`gpuready.fsio.apply_plan`)."""
    from gpuready.fsio import remove_stale_temporaries

    for path in paths:
        remove_stale_temporaries(path, node=view)


def _pending_options(found: txn.Journal,
                     override: RestartOptions | None) -> RestartOptions | None:
    """This command's own ``--restart`` options, proving what the journal says to prove; None
    without them (no restart is carried out)."""
    if override is None:
        return None
    return override._replace(**{name: found.options[name] for name in txn.PROOF_FIELDS})


RESTART_PENDING = ("restart pending: containerd must be restarted to finish it, and gpuready "
                   "restarts only with this run's own options; run the command again with "
                   "--restart (and --restart-command on a node under --root)")


def _settle(
    node: NodeConfig, found: txn.Journal, options: RestartOptions | None, outcome: Outcome, *,
    keeper: Keeper, host: Host,
) -> tuple[str, str]:
    """Finish or roll back the journal's transaction; the verdict and what it means."""
    view = node.node
    states = {entry: _state(view, entry) for entry in found.files}
    edited = [entry.path for entry, state in states.items() if state == "edited"]
    if edited:
        outcome.add("pending transaction", False,
                    f"{', '.join(edited)} changed since the transaction was killed: "
                    "nothing touched")
        return "not finished", (f"compare the files with {keeper.config.name}"
                                f"{txn.JOURNAL_SUFFIX}, then remove it")
    written = [Plan(view.path(entry.path), entry.before, None, "pending transaction")
               for entry, state in states.items() if state == "after"]
    backups = [view.path(backup) for backup in found.backups]
    if found.phase == "write" and len(written) < len(found.files):
        # killed while writing: containerd was never restarted on any of it
        host.put_back(node, written, backups)
        outcome.add("roll back", True, f"{len(written)} written file(s) put back as they were; "
                    "containerd never read them")
        keeper.clear()
        return "rolled back", ("every file is as it was before it; containerd was not "
                               "restarted" if written else "the killed run had written nothing")
    needs_restart = found.phase == "roll back" or len(written) < len(found.files) or found.restart
    if needs_restart and options is None:
        outcome.add("restart", False, RESTART_PENDING)
        return "not finished", ("nothing touched; its files stay as the killed run left them "
                                f"(journal {keeper.config.name}{txn.JOURNAL_SUFFIX})")
    if found.phase == "roll back" or len(written) < len(found.files):
        # containerd may have read the change: put back what is left and restart on the originals
        keeper.advance("roll back")
        roll_back(node, written, backups, options, outcome, host=host)
        return _rolled_back(outcome, keeper)
    if not found.restart:
        outcome.add("restart", True, "the effective config did not change: not restarted")
        keeper.clear()
        return "finished", "every file is written; containerd reads the same config"
    restart_or_roll_back(node, written, backups, options, outcome, keeper=keeper, host=host)
    if outcome.ok:
        return "finished", "every file is written, containerd restarted on it and verified"
    return _rolled_back(outcome, keeper)


def _rolled_back(outcome: Outcome, keeper: Keeper) -> tuple[str, str]:
    if outcome.rolled_back:
        keeper.clear()
        return "rolled back", "every file was put back as it was and containerd restarted on it"
    return "not finished", "containerd did not come back on the original files: look at its log"


def _state(node, entry: txn.Entry) -> str:
    """``before``, ``after``, or ``edited``: which of the journal's texts the file holds."""
    path = node.path(entry.path)
    data = node.read_bytes(path, kind=txn.JOURNAL_KIND) if node.exists(path) else None
    found = sha256(data)
    if found == entry.after_sha256:
        return "after"
    if found == entry.before_sha256:
        return "before"
    return "edited"
