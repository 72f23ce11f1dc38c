"""Would containerd act on what ``configure`` or ``setup`` wrote? Why not, as one line each.

A registration that parses is not one containerd uses. Two ways it has no effect at all, each
decided by the rules that ``lint`` and ``doctor`` use:

- ``disabled_plugins`` turns the CRI plugin off (the ``cri-disabled`` rule, on the file as it
  will be written): Docker's ``containerd.io`` package ships ``disabled_plugins = ["cri"]``;
- the file is not one containerd reads: it sits in containerd's folder but is not the main config
  and no ``imports`` entry reaches it (imports resolved as containerd does,
  :mod:`gpuready.containerd.imports`). A file elsewhere is taken as a working copy and not judged.

And one way it loads but its first sandbox fails: ``SystemdCgroup = true`` on a node that
shows no systemd (:func:`without_systemd`, the ``systemd-cgroup-without-systemd`` finding that
``doctor`` gives, with its fix).
"""

from __future__ import annotations

from pathlib import Path

from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.paths import CONTAINERD_CONFIG
from gpuready.problems import Problem
from gpuready.rules.context import FileContext, Options

ENABLE_CRI_HINT = "run again with --enable-cri to do it, then restart containerd"


def without_effect(path: Path, text: str, *, node: Node, runtime_name: str) -> list[str]:
    """One line per reason containerd will not load the runtime written to ``path``."""
    options = Options(runtime_name=runtime_name, root=node.root)
    reasons = [_line(problem, enable_cri_hint(node)) for problem in _cri_disabled(path, text,
                                                                                  options)]
    unread = _not_read(path, node=node, options=options)
    if unread:
        reasons.append(unread)
    return reasons


def _cri_disabled(path: Path, text: str, options: Options) -> list[Problem]:
    from gpuready.rules.engine import lint_file

    file = FileContext(path, text, options=options)
    return lint_file(file, selected=frozenset({"cri-disabled"}))


def enable_cri_hint(node: Node) -> str:
    """How to go on when the CRI plugin is disabled; on a machine that also has Docker, the CRI
    is off because containerd is there for Docker: the runtime the user wants may be Docker's."""
    from gpuready.engines.detection import engines_found

    if "docker" not in engines_found(node.root):
        return ENABLE_CRI_HINT
    return (f"{ENABLE_CRI_HINT}; this machine also has Docker: for GPU containers under Docker, "
            "configure it instead with --engine docker")


def _line(problem: Problem, hint: str) -> str:
    where = problem.file
    if problem.line:
        where += f":{problem.line}:{problem.column}"
    return f"{where}: {problem.message}; fix: {problem.fix} ({hint})"


def _not_read(path: Path, *, node: Node, options: Options) -> str | None:
    """Why containerd does not read ``path``, when it is in containerd's folder; else None."""
    from gpuready.containerd.imports import load_imports

    main = node.path(CONTAINERD_CONFIG)
    target = node.resolve(path) if node.contains(path) else path.resolve()
    if target == node.resolve(main) or not node.contains(path):
        return None
    if not str(target).startswith(str(node.resolve(main.parent)) + "/"):
        return None
    shown = node.node_path(target)
    if not node.is_file(main):
        return (f"{path}: containerd does not read this file: it reads {main}, which does not "
                f"exist; fix: create {main} with imports = [\"{shown}\"]")
    read = FileContext(main, node.read_text(main, kind=FileKind.CONFIG), options=options)
    if read.data is None:
        return None  # the main file's own syntax error is reported where it is read
    files, _ = load_imports(read, options=options)
    if any(node.resolve(file.path) == target for file in files):
        return None
    return (f"{path}: containerd does not read this file: no imports entry of {main} reaches it; "
            f"fix: add \"{shown}\" (or a glob that matches it) to imports in {main}")


def in_containerd_folder(path: Path, *, node: Node) -> bool:
    """True when ``path`` is one of the node's own containerd files: it lies in the folder of
    the node's main config (``/etc/containerd`` under the root). A config elsewhere, named with
    ``--config``, is taken as a working copy: what the node runs says nothing about it."""
    if not node.contains(path):
        return False
    folder = node.resolve(node.path(CONTAINERD_CONFIG).parent)
    return str(node.resolve(path)).startswith(str(folder) + "/")


def without_systemd(path: Path, text: str | None, *, node: Node, runtime_name: str,
                    containerd_version: str | None = None) -> list[Problem]:
    """The ``systemd-cgroup-without-systemd`` finding on ``text`` (the file as it will be
    written at ``path``) when ``node`` shows that systemd does not run: runc refuses every
    sandbox of a runtime with ``SystemdCgroup = true`` there ("systemd not running on this
    host, cannot use systemd cgroups manager"). Empty where systemd runs or nothing tells (a
    bare sandbox root), and for a file that does not parse (its own error comes elsewhere).

    The verdict is :func:`gpuready.rules.options.cgroup_verdict`, as ``doctor`` gives it,
    kubelet included."""
    from gpuready.init_system import systemd_fact

    systemd = systemd_fact(node)
    if not systemd.absent or not text:
        return []
    from gpuready.containerd.semantics import choose
    from gpuready.kubernetes import kubelet
    from gpuready.rules.base import Scope
    from gpuready.rules.context import ConfigContext
    from gpuready.rules.options import NO_SYSTEMD_RULE
    from gpuready.rules.registry import rules_for

    options = Options(runtime_name=runtime_name, root=node.root)
    file = FileContext(path, text, options=options)
    if file.data is None or file.spec is None:
        return []
    file.semantics = choose(flag=containerd_version, probe=True, root=node.root,
                            config_version=file.data.get("version"))
    try:
        driver, kubelet_file = kubelet.cgroup_driver(node)
    except InputError:  # the kubelet's own bad file is doctor's to report: judge the runtimes
        driver, kubelet_file = None, None
    config = ConfigContext(file.data, file.spec, file.semantics, options, [file],
                           kubelet_cgroup_driver=driver, kubelet_file=kubelet_file,
                           systemd=systemd)
    return [problem for rule in rules_for(Scope.CONFIG, frozenset({NO_SYSTEMD_RULE}))
            for problem in rule.check(config)]
