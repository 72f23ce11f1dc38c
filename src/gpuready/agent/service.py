"""The agent's life: a pass at start, a pass on every change it sees, a pass every interval,
until SIGTERM.

Changes are seen with inotify (``inotify_simple``) on the folders of the files that decide what
containerd runs: the owner's config and inputs, containerd's drop-in folder, the CDI folders and
``/dev`` (the driver's device nodes). A burst of events (an owner rewriting its files, the
agent's own writes) is one pass, after a short quiet. Folders a node lacks are not watched;
the periodic pass covers them, and every input inotify cannot see (``/proc``, ``/sys``).

SIGTERM stops the agent at once and changes nothing more: a transaction it interrupts keeps
its journal (:mod:`gpuready.workflow.journal`), and the next start finishes it with the
settings' restart.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from gpuready.agent.core import Agent, Verdict
from gpuready.agent.reports import Status, write_features
from gpuready.agent.settings import Settings
from gpuready.node import Node

QUIET_S = 0.3  # a burst of events ends after this long without one


class Stopped(BaseException):
    """SIGTERM: unwind whatever runs, changing nothing more (a BaseException, so no handler of
    gpuready's errors takes it for a failure to report)."""


def watched_folders(node: Node) -> list[Path]:
    """The node's folders whose changes start a pass (those it has)."""
    from gpuready.owners.table import OWNERS
    from gpuready.paths import CDI_DIRS, CONTAINERD_DROPIN_DIR

    folders: list[PurePosixPath] = [CONTAINERD_DROPIN_DIR, *CDI_DIRS, PurePosixPath("/dev")]
    for owner in OWNERS:
        folders.append(owner.config.parent)
        folders += [path if not path.suffix else path.parent for path in owner.edit_paths]
    found = []
    for folder in dict.fromkeys(folders):
        path = node.path(folder)
        if node.is_dir(path) and path not in found:
            found.append(path)
    return found


class Watcher:
    """inotify on :func:`watched_folders`; ``wait`` returns after a burst of events or the
    timeout."""

    def __init__(self, node: Node) -> None:
        from inotify_simple import INotify, flags

        self.inotify = INotify()
        mask = (flags.CREATE | flags.DELETE | flags.MODIFY | flags.MOVED_TO | flags.MOVED_FROM
                | flags.CLOSE_WRITE | flags.ATTRIB | flags.DELETE_SELF)
        self.folders = []
        for folder in watched_folders(node):
            try:
                self.inotify.add_watch(str(folder), mask)
                self.folders.append(folder)
            except OSError:
                continue  # gone since, or not watchable: the periodic pass covers it

    def wait(self, timeout: float) -> bool:
        """True when something changed before ``timeout`` seconds passed."""
        if not self.inotify.read(timeout=int(timeout * 1000)):
            return False
        while self.inotify.read(timeout=int(QUIET_S * 1000)):
            pass  # the rest of the burst
        return True

    def close(self) -> None:
        """Stop watching."""
        self.inotify.close()


def run_agent(root: Path, settings: Settings, status: Status, *,
              say: Callable[[str], None]) -> str:
    """Pass, then watch and pass again, until SIGTERM; how it stopped, one line."""
    agent = Agent(root, settings)
    node = Node(root)

    def on_term(signum, frame) -> None:
        raise Stopped(agent.in_transaction)

    def on_not_ready(detail: str) -> None:
        verdict = status.not_ready(detail)
        if verdict is not None:
            write_features(node, verdict, runtime_name=settings.runtime_name)
        say(f"not ready: {detail}")

    agent.on_not_ready = on_not_ready

    previous = signal.signal(signal.SIGTERM, on_term)
    watcher = None
    try:
        watcher = Watcher(node)
        say(f"watching {len(watcher.folders)} folder(s); a pass every "
            f"{settings.interval_seconds:g}s")
        while True:
            _one_pass(agent, node, settings, status, say=say)
            watcher.wait(settings.interval_seconds)
    except Stopped as stop:
        if stop.args and stop.args[0]:
            return ("stopped (SIGTERM) during a transaction: its journal stays, and the next "
                    "start finishes it")
        return "stopped (SIGTERM): nothing changed"
    finally:
        signal.signal(signal.SIGTERM, previous)
        if watcher is not None:
            watcher.close()


def _one_pass(agent: Agent, node: Node, settings: Settings, status: Status, *,
              say: Callable[[str], None]) -> Verdict:
    before = agent.restarts
    started = time.monotonic()
    verdict = agent.run_pass()
    status.record(verdict, restarts=agent.restarts - before)
    write_features(node, verdict, runtime_name=settings.runtime_name)
    for line in verdict.lines:
        if "(no change)" not in line:
            say(line)
    say(f"pass: {verdict.state}: {verdict.detail} ({time.monotonic() - started:.1f}s, "
        f"{agent.restarts} restart(s) so far)")
    return verdict
