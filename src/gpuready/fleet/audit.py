"""``gpuready audit``: doctor over many nodes in parallel processes, then one fleet summary."""

from __future__ import annotations

import functools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from gpuready.fleet.nodes import NodeResult, NodeSource, Verdict, check_node
from gpuready.problems import Severity

# Nodes per task handed to a worker: large enough that inter-process traffic stays small against
# the work, small enough that the progress bar moves and both cores finish together.
CHUNK = 32
# Below this many nodes, starting worker processes costs more than it saves.
PARALLEL_FROM = 64


@dataclass
class FleetSummary:
    """Every node's result, and the counts a dashboard shows."""

    results: list[NodeResult] = field(default_factory=list)

    @property
    def verdicts(self) -> Counter:
        """How many nodes have each verdict."""
        return Counter(result.verdict for result in self.results)

    def rules(self) -> list[tuple[str, str, int]]:
        """``(rule, severity, nodes)`` for each rule found, errors first, then most nodes."""
        nodes_per_rule: Counter = Counter()
        severity: dict[str, str] = {}
        for result in self.results:
            for rule in {problem.rule for problem in result.problems}:
                nodes_per_rule[rule] += 1
            for problem in result.problems:
                severity.setdefault(problem.rule, problem.severity.value)
        order = {s.value: i for i, s in enumerate(Severity)}
        return sorted(
            ((rule, severity[rule], count) for rule, count in nodes_per_rule.items()),
            key=lambda item: (order[item[1]], -item[2], item[0]),
        )

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
    for done, result in enumerate(_map(check, sources, workers=workers), start=1):
        summary.results.append(result)
        if progress:
            progress(done, len(sources))
    return summary


def _map(check, sources: list[NodeSource], *, workers: int) -> Iterator[NodeResult]:
    if workers <= 1 or len(sources) < PARALLEL_FROM:
        yield from map(check, sources)
        return
    import multiprocessing

    # fork: the workers start with every rule module already imported by this process.
    context = multiprocessing.get_context("fork")
    with context.Pool(processes=workers) as pool:
        yield from pool.imap(check, sources, chunksize=CHUNK)


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
    if rules:
        yield "rules (nodes affected):"
        width = max(len(rule) for rule, _, _ in rules)
        for rule, severity, count in rules:
            yield f"  {rule:<{width}}  {severity:<7}  {count}"
    bad = summary.worst()
    if bad:
        yield f"worst nodes ({min(worst, len(bad))} of {len(bad)}):"
        for result in bad[:worst]:
            yield f"  {result.name}: {_node_line(result)}"


def _node_line(result: NodeResult) -> str:
    if result.verdict is Verdict.UNREADABLE:
        return f"unreadable: {result.error}"
    errors, warnings = result.count(Severity.ERROR), result.count(Severity.WARNING)
    rules = ", ".join(dict.fromkeys(problem.rule for problem in result.problems))
    return f"{errors} error(s), {warnings} warning(s): {rules}"


def document(summary: FleetSummary) -> dict:
    """The JSON document: status, verdict counts, nodes per rule, and every node worst first."""
    counts = summary.verdicts
    return {
        "command": "audit",
        "status": "failed" if summary.failed else "ok",
        "summary": {"nodes": len(summary.results),
                    **{verdict.value: counts[verdict] for verdict in Verdict}},
        "rules": [{"rule": rule, "severity": severity, "nodes": count}
                  for rule, severity, count in summary.rules()],
        "nodes": [result.to_dict() for result in sorted(
            summary.results, key=lambda r: (r.badness(), r.name))],
    }
