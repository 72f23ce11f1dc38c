"""``lint`` and ``doctor`` for Docker: the daemon.json rules over one or more files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuready.problems import Report
from gpuready.rules.base import Scope
from gpuready.rules.context import Options
from gpuready.rules.registry import rules_for


def lint_daemon_json(paths: Sequence[Path], *, options: Options, selected: frozenset[str],
                     release: tuple[int, int] | None) -> Report:
    """Every Docker rule on each file; a missing or unreadable file is an InputError (exit 2)."""
    from gpuready.engines.docker.rules import DockerFileContext
    from gpuready.node import FileKind

    report = Report()
    for path in paths:
        text = options.node.read_text(path, kind=FileKind.DOCKER_CONFIG)
        context = DockerFileContext(path, text, options=options, release=release)
        report.files.append(context.display)
        for rule in rules_for(Scope.DOCKER, selected):
            report.problems.extend(rule.check(context))
    report.problems.sort(key=lambda p: (p.file, p.line or 0, p.column or 0))
    return report


def check_before_write(text: str, path: Path, *, options: Options,
                       release: tuple[int, int] | None, ask_dockerd: bool) -> list[str]:
    """The daemon.json ``configure`` is about to write, judged before a byte is written.

    With ``ask_dockerd`` (the node is this machine) and a dockerd that has ``--validate``
    (Docker 23.0 and later), dockerd itself judges the text. Otherwise its top-level keys are
    compared with the key table of ``release`` (the ``docker-unknown-key`` rule). Raises
    :class:`~gpuready.errors.UsageError` when dockerd refuses the file (it would not start with
    it, and would refuse a reload); returns warnings for keys the table cannot vouch for (an
    unknown release, or one later than the table describes completely).
    """
    from gpuready.engines.docker.facts import keys_complete, render_release
    from gpuready.engines.docker.rules import DockerFileContext, DockerUnknownKey
    from gpuready.errors import UsageError

    nothing = "; nothing written (gpuready lint --engine docker shows every finding)"
    if ask_dockerd:
        from gpuready.engines.docker.installed import supports_validate, validate

        if supports_validate():
            reason = validate(text, str(path))
            if reason is not None:
                raise UsageError(f"{path}: dockerd --validate refuses the file as it would be "
                                 f"written: {reason}{nothing}")
            return []
    context = DockerFileContext(path, text, options=options, release=release)
    found = list(DockerUnknownKey().check(context))
    if not found:
        return []
    if keys_complete(release):
        # the rule's message ends with ": dockerd refuses the whole file", said once here
        where = "; ".join(f"{problem.message.rsplit(': ', 1)[0]} (line {problem.line})"
                          for problem in found)
        fixes = "; ".join(problem.fix for problem in found)
        raise UsageError(f"{path}: dockerd {render_release(release)} refuses the whole file (it "
                         f"would not start with it, and refuses a reload): {where}; fix: {fixes}"
                         f"{nothing}")
    keys = ", ".join(repr(problem.key_path) for problem in found)
    which = (f"dockerd {render_release(release)}, a release whose keys gpuready knows only in "
             "part" if release is not None else "the node's dockerd, whose release is unknown "
             "here")
    verb = "is" if len(found) == 1 else "are"
    return [f"{keys} {verb} not among the daemon.json keys gpuready knows ({which}): dockerd "
            "refuses the whole file when it does not know a key"]
