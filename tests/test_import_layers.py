"""gpuready is a house of floors, and every import goes down a floor or stays on its own.

Lowest first: values that know no node; the node's facts and files; the effective model that
says what containerd loads from them (with where each value came from); the rules and their
verdicts; the plans and the one writer; the workflows; the reports; the command line. A rule
reads the model, the model never asks a rule; the gate judges plans, no workflow judges for it.

Every module under ``src/gpuready`` is read with :mod:`ast`. An import edge is any of:

- ``import gpuready.x`` / ``from gpuready.x import y`` / ``from . import y`` / ``from ..x import
  y`` at any depth (an import inside a function counts: it closes a circle just the same, it
  only closes it later);
- a string that is exactly the dotted name of a gpuready module (``importlib.import_module``'s
  argument, the rule catalogue of :mod:`gpuready.rules.registry`, the command table of
  :mod:`gpuready.cli.commands`, the engine tables of :mod:`gpuready.engines`): whatever is loaded
  by name is imported by the module that names it.

The test asserts that the graph has no circle, and that each edge goes to a module of the same
layer or a lower one, by the table :data:`LAYERS` below.

Not counted: the ``__init__`` of a package that Python runs on the way to one of its modules.
Their own imports are checked like any module's, and are light: ``gpuready.rules`` loads
``rules.base`` (the Rule type) on the way to ``rules.locate``, ``gpuready.engines`` loads
``engines.detection``; what they name as strings they load only when asked.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# The floors, lowest first. A module belongs to the layer of the longest prefix in LAYERS that
# names it or a package above it (``gpuready.rules.locate`` before ``gpuready.rules``).
FOUNDATION, NODE, MODEL, RULES, PLANS, WORKFLOWS, REPORTING, CLI = range(8)
LAYER_NAMES = ("foundation", "node facts and files", "effective model", "rules and verdicts",
               "plans and the one writer", "workflows", "reporting", "command line")

LAYERS: dict[str, int] = {
    # -- 0 foundation: values and helpers that know no node and no engine
    "gpuready": FOUNDATION,  # the package itself: its version
    "gpuready.errors": FOUNDATION,
    "gpuready.records": FOUNDATION,
    "gpuready.compat": FOUNDATION,
    "gpuready.paths": FOUNDATION,
    "gpuready.problems": FOUNDATION,
    "gpuready.sametext": FOUNDATION,
    "gpuready.suggest": FOUNDATION,
    "gpuready.textfile": FOUNDATION,
    "gpuready.yamlfile": FOUNDATION,
    "gpuready.data": FOUNDATION,
    "gpuready.programs": FOUNDATION,
    "gpuready.plan": FOUNDATION,  # a planned change is a value: computing one writes nothing
    "gpuready.containerd.versions": FOUNDATION,
    "gpuready.containerd.runc_options": FOUNDATION,
    "gpuready.containerd.hints": FOUNDATION,
    "gpuready.cdi.versions": FOUNDATION,
    "gpuready.kubernetes.labels": FOUNDATION,
    "gpuready.owners.table": FOUNDATION,
    "gpuready.owners.template": FOUNDATION,
    "gpuready.cri.generated": FOUNDATION,
    # -- 1 the node's facts and files, read as they are
    "gpuready.node": NODE,
    "gpuready.init_system": NODE,
    "gpuready.kubernetes": NODE,
    "gpuready.engines.facts": NODE,
    "gpuready.engines.detection": NODE,  # which engine a node runs: the facts tables alone
    "gpuready.engines.containerd_facts": NODE,
    "gpuready.engines.docker.facts": NODE,
    "gpuready.engines.crio.facts": NODE,
    "gpuready.containerd.facts": NODE,
    "gpuready.containerd.installed": NODE,
    "gpuready.containerd.lines": NODE,
    "gpuready.containerd.layout": NODE,
    "gpuready.containerd.document": NODE,
    "gpuready.containerd.semantics": NODE,
    "gpuready.containerd.decoding": NODE,
    "gpuready.containerd.keyschema": NODE,
    "gpuready.rules.locate": NODE,  # where a key is in a text: no rule in it
    "gpuready.rules.placement": NODE,  # where each version reads a table: no rule in it
    "gpuready.cdi": NODE,  # CDI specs as read (what gpuready writes of them: below, PLANS)
    "gpuready.owners": NODE,  # who owns containerd's config on this node
    "gpuready.cri": NODE,  # the CRI client and what it reads back
    "gpuready.engines.docker.address": NODE,
    "gpuready.engines.docker.api": NODE,
    "gpuready.engines.docker.installed": NODE,
    "gpuready.engines.docker.jsontext": NODE,
    "gpuready.owners.state": NODE,  # who owns containerd's config, and what it renders from
    "gpuready.workflow.journal": NODE,  # a --restart journal as data and as read (not written)
    # -- 2 the effective model: what containerd loads, merged, with provenance
    # (with it: a config's text edited byte for byte, containerd's own migration, gpuready's
    # record; Docker's daemon.json and CRI-O's merged drop-ins as their daemons read them. A
    # one-file edit computed here is a value: the plans that change a node are a floor up.)
    "gpuready.containerd": MODEL,
    "gpuready.engines.docker.config": MODEL,
    "gpuready.engines.crio.config": MODEL,
    "gpuready.cdi.story": MODEL,  # which spec file each device comes from, which engine reads it
    # -- 3 the rules and their verdicts (the gate's too)
    "gpuready.rules": RULES,
    "gpuready.containerd.gate": RULES,
    "gpuready.containerd.default_runtime": RULES,  # the verdict on a change to the default runtime
    "gpuready.engines.docker.rules": RULES,
    "gpuready.engines.docker.lint": RULES,
    "gpuready.engines.crio.rules": RULES,
    "gpuready.engines.crio.lint": RULES,
    # -- 4 the plans and the one writer
    "gpuready.atfile": PLANS,  # the writer's descriptor-relative file operations
    "gpuready.fsio": PLANS,
    "gpuready.changeset": PLANS,
    "gpuready.rules.fix": PLANS,  # lint --fix: plans the fixes the rules found
    "gpuready.containerd.configure": PLANS,
    "gpuready.containerd.register": PLANS,
    "gpuready.containerd.keep_default": PLANS,
    "gpuready.containerd.dropin": PLANS,
    "gpuready.containerd.unconfigure": PLANS,
    "gpuready.containerd.base": PLANS,
    "gpuready.engines": PLANS,
    "gpuready.cdi.generate": PLANS,
    "gpuready.cdi.refresh": PLANS,
    "gpuready.cdi.units": PLANS,
    "gpuready.owners.configure": PLANS,
    "gpuready.owners.effective": PLANS,
    "gpuready.owners.records": PLANS,  # the records of an owned node, and their undo
    # -- 5 the workflows: several plans, one verdict, in order
    "gpuready.workflow": WORKFLOWS,
    "gpuready.cri.verify": WORKFLOWS,
    "gpuready.fleet": WORKFLOWS,
    # -- 6 reporting
    "gpuready.reporting": REPORTING,
    "gpuready.cdi.report": REPORTING,  # cdi validate and cdi list, rendered
    "gpuready.agent": REPORTING,  # the cluster agent: workflows in a loop, its reports served
    # -- 7 the command line: the one place that prints and exits
    "gpuready.cli": CLI,
    "gpuready.__main__": CLI,
}

# Edges that go up a floor, each with its reason. Keep it empty: move the code instead.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module under src/gpuready: dotted name -> (file, is a package)."""
    found = {}
    for path in sorted((SRC / "gpuready").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


MODULES = _modules()


def _known(name: str) -> str | None:
    """The module ``name`` loads: itself, else the nearest package above it that exists."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.AST, package: str) -> Iterator[str]:
    """The gpuready modules one syntax node imports or names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module
                                                                    else []))
        else:
            base = node.module or ""
        for alias in node.names:  # ``from gpuready.x import y``: y may be a module
            yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
        yield node.value  # loaded by name: importlib.import_module, a catalogue, a table


def _graph() -> dict[str, set[str]]:
    """module -> the gpuready modules it imports (at any depth, or by name)."""
    graph = {}
    for name, (path, package) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        here = name if package else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
            for target in _targets(node, here):
                if target.split(".")[0] == "gpuready":
                    edges.add(_known(target))
        graph[name] = edges - {name, None}
    return graph


GRAPH = _graph()


def layer_of(module: str) -> int:
    """The layer of ``module``: that of the longest prefix in LAYERS naming it."""
    name = module
    while name not in LAYERS:
        if "." not in name:
            raise AssertionError(f"{module} has no layer: add it to LAYERS")
        name = name.rpartition(".")[0]
    return LAYERS[name]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (as a chain ``a -> b -> ... -> a``) through each group of modules that import
    each other (Tarjan's strongly connected components, then a shortest circle in each)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:  # iterative: the graph is deep
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == module:
                        break
                if len(group) > 1:
                    groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_shortest_circle(graph, group) for group in groups]


def _shortest_circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest circle inside ``group``, from its first module back to it."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for child in sorted(graph[module] & group):
                if child == start:
                    return paths[module] + [start]
                if child not in paths:
                    paths[child] = paths[module] + [child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle in {sorted(group)}")


def test_the_graph_is_read():
    """The reader finds imports of every kind (else the other tests prove nothing)."""
    assert "gpuready.cli.main" in GRAPH["gpuready.__main__"]  # top-level import
    assert "gpuready.rules.structure" in GRAPH["gpuready.rules.registry"]  # catalogue string
    assert "gpuready.cli.cmd_lint" in GRAPH["gpuready.cli.commands"]  # command table
    assert "gpuready.engines.docker.engine" in GRAPH["gpuready.engines"]  # importlib table
    assert "gpuready.containerd.migrate" in GRAPH["gpuready.containerd.model"]  # in a function


def test_relative_imports_are_read():
    """``from . import x`` and ``from ..x import y`` name the modules they load."""
    tree = ast.parse("from . import facts\nfrom ..node import Node\n")
    found = {target for node in ast.walk(tree) for target in _targets(node, "gpuready.containerd")}
    assert found == {"gpuready.containerd.facts", "gpuready.node"}


def test_cycles_are_found():
    """The circle finder names a circle as a chain, and finds none where there is none."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    """No module imports itself through others, even through an import inside a function."""
    found = [" -> ".join(circle) for circle in cycles(GRAPH)]
    assert not found, "import circles in src/gpuready:\n  " + "\n  ".join(found)


def test_every_module_has_a_layer():
    """A new module is given its floor on purpose, not by accident."""
    for module in GRAPH:
        layer_of(module)


def test_imports_go_down_the_layers():
    """Every import goes to a module of the same layer or a lower one."""
    upward = []
    for module in sorted(GRAPH):
        for target in sorted(GRAPH[module]):
            here, there = layer_of(module), layer_of(target)
            if there > here and (module, target) not in EXCEPTIONS:
                upward.append(f"{module} ({LAYER_NAMES[here]}) imports {target} "
                              f"({LAYER_NAMES[there]})")
    assert not upward, "imports that go up a layer:\n  " + "\n  ".join(upward)


def test_exceptions_are_still_needed():
    """An exception whose edge is gone (or no longer goes up) is dropped from the table."""
    stale = [f"{module} -> {target}" for module, target in EXCEPTIONS
             if target not in GRAPH[module] or layer_of(target) <= layer_of(module)]
    assert not stale, "exceptions no longer needed: " + ", ".join(stale)
