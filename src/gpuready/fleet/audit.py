"""``gpuready audit``: doctor over many nodes in parallel processes, then one fleet summary."""

from __future__ import annotations

import functools
import gc
import itertools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from gpuready import sametext
from gpuready.fleet.nodes import NodeResult, NodeSource, Verdict, check_node
from gpuready.problems import Severity

# Nodes per task handed to a worker: large enough that inter-process traffic stays small against
# the work, small enough that the progress bar moves and both cores finish together.
CHUNK = 32
# Below this many nodes, starting worker processes costs more than it saves.
PARALLEL_FROM = 64
_RANK = {severity: rank for rank, severity in enumerate(Severity)}  # error first


@dataclass
class FleetSummary:
    """Every node's result, and the counts a dashboard shows."""

    results: list[NodeResult] = field(default_factory=list)

    @property
    def verdicts(self) -> Counter:
        """How many nodes have each verdict."""
        return Counter(result.verdict for result in self.results)

    def rules(self) -> list[tuple[str, str, int]]:
        """``(rule, severity, nodes)`` for each rule found, errors first, then most nodes.

        A rule whose severity depends on the node (``cdi-spec-missing`` is an error where the
        config enables CDI, a warning elsewhere) is listed with the worst one it has on a node;
        :meth:`nodes_by_severity` has the split.
        """
        rows = [(rule, min(split, key=_RANK.__getitem__).value, sum(split.values()))
                for rule, split in self.nodes_by_severity().items()]
        return sorted(rows, key=lambda item: (_RANK[Severity(item[1])], -item[2], item[0]))

    def nodes_by_severity(self) -> dict[str, Counter]:
        """For each rule, how many nodes have it as an error, a warning, an info (a node counts
        once per rule, with the worst severity the rule has there)."""
        found: dict[str, Counter] = {}
        for result in self.results:
            worst: dict[str, Severity] = {}
            for problem in result.problems:
                known = worst.get(problem.rule)
                if known is None or _RANK[problem.severity] < _RANK[known]:
                    worst[problem.rule] = problem.severity
            for rule, severity in worst.items():
                found.setdefault(rule, Counter())[severity] += 1
        return found

    def worst(self) -> list[NodeResult]:
        """Nodes that are not clean, the worst first."""
        return sorted(
            (r for r in self.results if r.verdict is not Verdict.CLEAN),
            key=lambda r: (r.badness(), r.name),
        )

    @property
    def failed(self) -> bool:
        """True when a node has an error or could not be read."""
        return any(r.verdict in (Verdict.ERRORS, Verdict.UNREADABLE) for r in self.results)


def audit(
    sources: list[NodeSource],
    *,
    runtime_name: str,
    selected: frozenset[str],
    containerd_version: str | None,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FleetSummary:
    """Check every node, in parallel processes when there are many; results in input order."""
    check = functools.partial(
        check_node,
        runtime_name=runtime_name,
        selected=selected,
        containerd_version=containerd_version,
    )
    workers = jobs or os.cpu_count() or 1
    summary = FleetSummary()
    # What the imports made lives as long as the run: frozen, the cyclic collector no longer
    # walks it on each full pass, and forked workers leave its pages shared (the use Python's
    # gc.freeze documentation gives: right before fork). About 1% of a distinct-file audit.
    gc.freeze()
    try:
        with sametext.shared():  # nodes configured alike: each distinct text is parsed once
            for done, result in enumerate(_map(check, sources, workers=workers), start=1):
                summary.results.append(result)
                if progress:
                    progress(done, len(sources))
    finally:
        gc.unfreeze()
    return summary


def _map(check, sources: list[NodeSource], *, workers: int) -> Iterator[NodeResult]:
    if workers <= 1 or len(sources) < PARALLEL_FROM:
        yield from map(check, sources)
        return
    yield from _forked(check, sources, workers=workers)


# Chunks each worker has in hand: the one it checks and the next, so that it never waits for
# this process to be scheduled between two chunks.
_AHEAD = 2


def _forked(check, sources: list[NodeSource], *, workers: int) -> Iterator[NodeResult]:
    """``map(check, sources)`` in ``workers`` forked processes; results in input order.

    fork: the workers start with every rule module imported and with ``sources`` in memory, so
    a task is only the index of a chunk, and a reply the chunk's results. This process waits on
    the workers' pipes in one thread: no helper thread polls or copies beside it, and the cores
    are left to the workers.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork")
    chunks = _chunks(sources, workers=workers)
    upcoming = iter(range(len(chunks)))
    links: list = []
    processes: list = []
    in_hand: dict = {}
    finished: dict[int, list[NodeResult]] = {}
    try:
        for _ in range(min(workers, len(chunks))):
            here, there = context.Pipe()
            process = context.Process(target=_serve, args=(there, check, chunks, [*links, here]),
                                      daemon=True)
            process.start()
            there.close()
            links.append(here)
            processes.append(process)
            in_hand[here] = 0
        for link in links:
            for index in itertools.islice(upcoming, _AHEAD):
                link.send(index)
                in_hand[link] += 1
        for wanted in range(len(chunks)):
            while wanted not in finished:
                for link in wait([link for link in links if in_hand[link]]):
                    index, results = _received(link)
                    in_hand[link] -= 1
                    finished[index] = results
                    following = next(upcoming, None)
                    if following is not None:
                        link.send(following)
                        in_hand[link] += 1
            yield from finished.pop(wanted)
        for link in links:
            link.send(None)  # no more chunks: the worker ends
        for process in processes:
            process.join()
    finally:
        for process in processes:
            if process.is_alive():  # stopped early (an error, an interrupt): not waited for
                process.terminate()
                process.join()
        for link in links:
            link.close()


def _chunks(sources: list[NodeSource], *, workers: int) -> list[list[NodeSource]]:
    """``sources`` in chunks of :data:`CHUNK`, the last ones smaller: when one worker takes
    the last chunk, the others are left with little to finish after it."""
    tail = max(len(sources) - workers * _AHEAD * CHUNK, 0) // CHUNK * CHUNK
    size = max(CHUNK // 4, 1)
    return ([sources[start:start + CHUNK] for start in range(0, tail, CHUNK)]
            + [sources[start:start + size] for start in range(tail, len(sources), size)])


def _received(link) -> tuple[int, list[NodeResult]]:
    """A worker's reply: the chunk's index and results; its error raised here."""
    try:
        index, results, error = link.recv()
    except EOFError:
        raise RuntimeError("an audit worker process ended before it sent its results") from None
    if error is not None:
        raise error[0] from _WorkerTraceback(error[1])
    return index, results


class _WorkerTraceback(Exception):
    """Where an error was raised in a worker process (the cause of the error raised here)."""

    def __str__(self) -> str:
        return "\n" + self.args[0]


def _serve(link, check, chunks, parent_ends) -> None:
    """A worker: check each chunk it is told, send back its results, until told to stop."""
    for end in parent_ends:  # inherited: closed, so that the parent's exit reads as an end here
        end.close()
    while True:
        try:
            index = link.recv()
        except EOFError:
            return  # the parent is gone
        if index is None:
            return
        try:
            link.send((index, [check(source) for source in chunks[index]], None))
        except Exception as error:  # a bug, not a finding: raised again in the parent
            import traceback

            link.send((index, None, (_picklable(error), traceback.format_exc())))


def _picklable(error: Exception) -> Exception:
    """``error`` when it survives pickling, else a RuntimeError that names it."""
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(repr(error))
    return error


class ProgressBar:
    """A one-line bar on stderr, redrawn in place; only for a terminal."""

    WIDTH = 30

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.shown = -1

    @staticmethod
    def wanted(stream=None) -> bool:
        """True when ``stream`` (stderr) is a terminal: a pipe or a log gets no bar."""
        stream = stream or sys.stderr
        return hasattr(stream, "isatty") and stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        """Draw the bar for ``done`` of ``total`` nodes (at most once per percent)."""
        percent = done * 100 // max(total, 1)
        if percent == self.shown and done != total:
            return
        self.shown = percent
        filled = self.WIDTH * done // max(total, 1)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        end = "\n" if done == total else ""
        self.stream.write(f"\r[{bar}] {done}/{total} nodes{end}")
        self.stream.flush()


def render_text(summary: FleetSummary, *, worst: int) -> str:
    """The summary a person reads: verdict counts, nodes per rule, the worst nodes."""
    return "\n".join(_text_lines(summary, worst=worst)) + "\n"


def _text_lines(summary: FleetSummary, *, worst: int) -> Iterable[str]:
    counts = summary.verdicts
    yield (
        f"{len(summary.results)} nodes: {counts[Verdict.CLEAN]} clean, "
        f"{counts[Verdict.WARNINGS]} with warnings, {counts[Verdict.ERRORS]} with errors, "
        f"{counts[Verdict.UNREADABLE]} unreadable"
    )
    rules = summary.rules()
    split = summary.nodes_by_severity()
    if rules:
        yield "rules (nodes affected):"
        width = max(len(rule) for rule, _, _ in rules)
        for rule, severity, count in rules:
            yield f"  {rule:<{width}}  {severity:<7}  {count}{_mixed(split[rule])}"
    bad = summary.worst()
    if bad:
        yield f"worst nodes ({min(worst, len(bad))} of {len(bad)}):"
        for result in bad[:worst]:
            yield f"  {result.name}: {_node_line(result)}"


def _mixed(split: Counter) -> str:
    """`` (error on 40, warning on 16)`` for a rule with more than one severity, else nothing."""
    if len(split) < 2:
        return ""
    return " (" + ", ".join(f"{severity.value} on {split[severity]}"
                            for severity in Severity if split[severity]) + ")"


def _node_line(result: NodeResult) -> str:
    if result.verdict is Verdict.UNREADABLE:
        return f"unreadable: {result.error}"
    errors, warnings = result.count(Severity.ERROR), result.count(Severity.WARNING)
    rules = ", ".join(dict.fromkeys(problem.rule for problem in result.problems))
    return f"{errors} error(s), {warnings} warning(s): {rules}"


def document(summary: FleetSummary) -> dict:
    """The JSON document: status, verdict counts, nodes per rule, and every node worst first."""
    counts = summary.verdicts
    split = summary.nodes_by_severity()
    return {
        "command": "audit",
        "status": "failed" if summary.failed else "ok",
        "summary": {"nodes": len(summary.results),
                    **{verdict.value: counts[verdict] for verdict in Verdict}},
        "rules": [{"rule": rule, "severity": severity, "nodes": count,
                   "nodes_by_severity": {s.value: split[rule][s] for s in Severity
                                         if split[rule][s]}}
                  for rule, severity, count in summary.rules()],
        "nodes": [result.to_dict() for result in sorted(
            summary.results, key=lambda r: (r.badness(), r.name))],
    }
