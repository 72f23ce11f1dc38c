"""Run the rules: ``lint`` on config files alone, ``doctor`` on a whole node.

Loader, checker and reporter are separate: this module loads and checks and returns a
:class:`Report`; reporters in :mod:`gpuready.reporting` render it; only the CLI prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.containerd.semantics import Semantics, choose
from gpuready.node import FileKind, Node
from gpuready.paths import CDI_DIRS, TOOLKIT_DIR
from gpuready.problems import Problem, Report
from gpuready.rules.base import Scope
from gpuready.rules.context import (
    ConfigContext,
    FileContext,
    NodeContext,
    Options,
    RuntimeClassDocument,
)
from gpuready.rules.registry import rules_for

if TYPE_CHECKING:
    from gpuready.owners.detect import Detection

RUNTIMECLASS_FILE = TOOLKIT_DIR / "runtimeclass.yaml"


def _run(scope: Scope, ctx: object, selected: frozenset[str]) -> list[Problem]:
    found: list[Problem] = []
    for rule in rules_for(scope, selected):
        found.extend(rule.check(ctx))
    return found


def _ordered(problems: Iterable[Problem]) -> list[Problem]:
    """Problems by file (in reading order) and position, each reported once."""
    unique = list(dict.fromkeys(problems))
    order = {name: index for index, name in enumerate(dict.fromkeys(p.file for p in unique))}
    return sorted(unique, key=lambda p: (order[p.file], p.line or 0, p.column or 0))


def lint_file(
    file: FileContext, *, selected: frozenset[str], semantics: Semantics | None = None
) -> list[Problem]:
    """Every problem of one config file checked on its own."""
    file.semantics = semantics or choose(
        flag=None, probe=False, config_version=file.data.get("version") if file.data else None
    )
    problems = _run(Scope.FILE, file, selected)
    if file.data is not None and file.spec is not None:
        config = ConfigContext(file.data, file.spec, file.semantics, file.options, [file])
        problems += _run(Scope.CONFIG, config, selected)
    return _ordered(problems)


def lint_paths(
    paths: Sequence[Path],
    *,
    options: Options,
    selected: frozenset[str],
    containerd_version: str | None = None,
) -> Report:
    """Lint each file alone; a missing or unreadable file raises InputError (exit 2)."""
    semantics = (
        choose(flag=containerd_version, probe=False, config_version=None)
        if containerd_version
        else None
    )
    report = Report()
    with options.node.reading():
        for path in paths:
            file = FileContext(path, options.node.read_text(path, kind=FileKind.CONFIG),
                               options=options)
            report.files.append(file.display)
            if file.data and file.data.get("imports"):
                report.importing.append(file.display)
            report.problems += lint_file(file, selected=selected, semantics=semantics)
    return report


def doctor(
    *,
    options: Options,
    selected: frozenset[str],
    config_path: Path | None = None,
    runtimeclass_paths: Sequence[Path] = (),
    containerd_version: str | None = None,
    detection: Detection | None = None,
    probe: bool = True,
    config_only: bool = False,
) -> Report:
    """Check a node: the config and its imports merged, RuntimeClasses, CDI specs, kubelet.

    The main config is ``config_path``, else the one the node's owner makes containerd read.
    ``probe`` asks the installed containerd for its release when ``containerd_version`` is not
    given; leave it off when the files are a copy of another machine's. ``config_only``: the
    containerd config and its imports alone (``lint`` of a node), without RuntimeClasses, CDI
    specs or the kubelet.
    """
    with options.node.reading():  # a read-only pass: folders and links are looked up once
        return _doctor(options, selected, config_path, runtimeclass_paths, containerd_version,
                       detection, probe, config_only)


def _doctor(options, selected, config_path, runtimeclass_paths, containerd_version, detection,
            probe, config_only=False) -> Report:
    # a node's owner, its imports, its kubelet and its init: what lint FILE never needs to load
    from gpuready.containerd.imports import load_imports, merge
    from gpuready.init_system import systemd_fact
    from gpuready.kubernetes import kubelet
    from gpuready.owners.detect import detect
    from gpuready.owners.state import OwnerState
    from gpuready.rules.ownership import superseded

    node = options.node
    detection = detection or detect(node)
    main_path = config_path or node.path(detection.owner.config)
    main = FileContext(main_path, node.read_text(main_path, kind=FileKind.CONFIG), options=options)
    semantics = choose(
        flag=containerd_version,
        probe=probe,
        config_version=main.data.get("version") if main.data else None,
        root=options.root,
    )
    files, missing = load_imports(main, options=options) if main.data else ([main], [])
    problems: list[Problem] = []
    for file in files:
        file.semantics = semantics
        problems += _run(Scope.FILE, file, selected)
    context = NodeContext(options=options, config=None, files=files, missing_imports=missing,
                          ownership=OwnerState(node, detection, main_path))
    kubelet_file = None
    if all(f.data is not None for f in files) and main.spec is not None:
        # Nothing imported: the main file's data is the config as it is (rules only read it).
        data, context.replaced_tables = (
            merge(files, major=semantics.major) if len(files) > 1 else (main.data, []))
        driver, kubelet_file = (None, None) if config_only else kubelet.cgroup_driver(node)
        context.config = ConfigContext(
            data,
            main.spec,
            semantics,
            options,
            files,
            kubelet_cgroup_driver=driver,
            kubelet_file=kubelet_file,
            systemd=systemd_fact(node),
        )
        problems += _run(Scope.CONFIG, context.config, selected)
    if config_only:
        problems = superseded(problems + _run(Scope.NODE, context, selected))
        return Report(problems=_ordered(problems), files=[f.display for f in files])
    context.runtime_classes = _runtime_classes(node, runtimeclass_paths)
    context.cdi_dirs = [node.path(d) for d in CDI_DIRS]
    problems = superseded(problems + _run(Scope.NODE, context, selected))
    checked = [f.display for f in files] + sorted({d.file for d in context.runtime_classes})
    checked += [str(spec.path) for spec in context.cdi_scan().specs]
    checked += [kubelet_file] if context.config and kubelet_file else []
    return Report(problems=_ordered(problems), files=checked)


def _runtime_classes(node: Node, paths: Sequence[Path]) -> list[RuntimeClassDocument]:
    """The RuntimeClasses of the given manifests (default: the toolkit's, when present)."""
    from gpuready.kubernetes.runtimeclass import parse, require_some

    named = bool(paths)
    if not paths:
        default = node.path(RUNTIMECLASS_FILE)
        paths = [default] if node.exists(default) else []
    documents = []
    for path in paths:
        text = node.read_text(path, kind=FileKind.MANIFEST)
        classes = parse(text, path)
        for found in require_some(classes, path) if named else classes:
            documents.append(
                RuntimeClassDocument(found.name, found.handler, found.file, found.line, text)
            )
    return documents
