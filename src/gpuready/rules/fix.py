"""``lint --fix``: repair what can be repaired without guessing, keeping every comment.

Two kinds of edit, each the smallest that does the job:

- Table headers are rewritten in place (unquoted-plugin-key: quote the plugin ID;
  wrong-version-path: give a runtime's headers this version's path). TOML lets a table be
  defined anywhere in the file, so renaming the header moves the table; the line, its comment
  and the table's body stay as they were. (tomlkit cannot rename a header path without
  re-rendering, and merging, the tables around it.)
- Values are edited with tomlkit (bool-as-string, option-outside-options,
  runtime-type-missing), which keeps comments and layout.

Every step is checked by parsing the result with ``tomllib``; a step whose result would not
parse (a table defined twice) is left undone and reported. The steps repeat until a pass
changes nothing, so one run does all that a second run would. The text keeps its byte order
mark and CRLF line endings (:func:`gpuready.textfile.restyle`). The change is a
:class:`gpuready.plan.Plan` applied by :func:`gpuready.fsio.apply_plan` under the file's lock.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.runc_options import RECOMMENDED_RUNTIME_TYPE, bool_text
from gpuready.containerd.versions import KeyPath, render_key_path
from gpuready.plan import Plan
from gpuready.problems import Problem
from gpuready.rules.context import FileContext, Options
from gpuready.rules.locate import Header, Locator
from gpuready.rules.options import bool_strings as find_bool_strings
from gpuready.rules.options import misplaced_options, respelled_options
from gpuready.rules.placement import misplaced, unquoted_plugin_id
from gpuready.rules.registry import REGISTRY
from gpuready.textfile import restyle, without_bom

FIXABLE = frozenset(name for name, rule in REGISTRY.items() if rule.fixable)


# Each pass can uncover work for the next (a header quoted in one pass puts a runtime at a
# path the next pass moves; a key fixed in one pass lets another key move). A few passes reach
# the fixed point of any file; the bound only guards against a step that undoes another.
MAX_PASSES = 5


@dataclass
class FixResult:
    """The repaired text, and what could not be repaired and why."""

    text: str
    cannot: list[str] = field(default_factory=list)
    # The texts between the steps: problems inside a misplaced table show only once it has
    # been moved into place, so they are counted as fixed from these.
    stages: list[str] = field(default_factory=list)


def _render(path: KeyPath, quote: str) -> str:
    rendered = render_key_path(path)
    return rendered.replace('"', "'") if quote == "'" else rendered


def rewrite_headers(text: str, rename: Callable[[Header], KeyPath | None]) -> str:
    """``text`` with each header that ``rename`` maps to a new path rewritten in place."""
    lines = text.splitlines(keepends=True)
    for header in Locator(text).headers:
        new_path = rename(header)
        if new_path is None:
            continue
        line = lines[header.line - 1]
        rendered = _render(new_path, header.quote)
        lines[header.line - 1] = line[: header.start] + rendered + line[header.end :]
    return "".join(lines)


def _parses(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def quote_plugin_ids(result: FixResult) -> None:
    """unquoted-plugin-key: ``[plugins.io.containerd.grpc.v1.cri.x]`` -> ``[plugins."…cri".x]``."""

    def rename(header: Header) -> KeyPath | None:
        found = unquoted_plugin_id(header.path)
        if not found:
            return None
        plugin, span = found
        return ("plugins", plugin, *header.path[span + 1 :])

    _apply_header_step(result, rename, "quote the plugin IDs")


def move_runtimes(result: FixResult, options: Options) -> None:
    """wrong-version-path: give each misplaced runtime's headers this version's path."""
    file = FileContext(Path("<fix>"), result.text, options=options)
    if file.data is None or file.spec is None or not file.has_version:
        return
    moves: dict[KeyPath, KeyPath] = {}
    for found in misplaced(file.data, file.spec):
        if found.runtime is None:
            result.cannot.append(
                f"wrong-version-path: settings under [{render_key_path(found.path)}] need a "
                "person to decide where they belong"
            )
            continue
        target = file.spec.runtime_path(found.runtime)
        if facts.lookup(file.data, target) is not None:
            result.cannot.append(
                f"wrong-version-path: runtime {found.runtime!r} is also at "
                f"[{render_key_path(target)}]; keep one of the two by hand"
            )
            continue
        if not file.locator.headers_under(found.path):
            result.cannot.append(
                f"wrong-version-path: runtime {found.runtime!r} is not written as a table "
                "header; move it by hand"
            )
            continue
        moves[found.path] = target

    def rename(header: Header) -> KeyPath | None:
        for source, target in moves.items():
            if header.path[: len(source)] == source:
                return (*target, *header.path[len(source) :])
        return None

    if moves:
        _apply_header_step(result, rename, "move the runtimes")


def _apply_header_step(result: FixResult, rename, what: str) -> None:
    candidate = rewrite_headers(result.text, rename)
    if candidate == result.text:
        return
    if _parses(candidate) is None:
        result.cannot.append(f"cannot {what}: the result would define a table twice")
        return
    result.text = candidate


def _node(doc: Any, path: KeyPath) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _key_indent(table: Any) -> str | None:
    """The indentation of the first plain key of a tomlkit table (None when it has none)."""
    body = getattr(getattr(table, "value", None), "body", [])
    for key, item in body:
        if key is not None and not isinstance(item, dict) and hasattr(item, "trivia"):
            return item.trivia.indent
    return None


def _item(table: Any, key: str) -> Any:
    """The tomlkit item of ``key`` in ``table``, with its comment where tomlkit keeps one."""
    from tomlkit.container import Container

    container = getattr(table, "value", None)
    if isinstance(container, Container):
        return container.item(key)
    # A table written in parts (``[a.b]``, then ``[c]``, then ``[a]``) is a proxy over the
    # parts; its values come without their comment.
    return table.get(key)


def _add(table: Any, key: str, item: Any) -> None:
    """Add ``key`` to a table, or to a table written in parts (which has no ``add``)."""
    if hasattr(table, "add"):
        table.add(key, item)
    else:
        table[key] = item


def _set(doc: Any, path: KeyPath, value: Any, *, like: Any = None) -> None:
    """Set ``path`` to ``value``, creating tables; a new key or table is indented like its
    siblings (containerd's default style), and ``like``'s comment is kept."""
    import tomlkit

    parent = doc
    for key in path[:-1]:
        if key not in parent:
            table = tomlkit.table()
            table.trivia.indent = _key_indent(parent) or ""
            _add(parent, key, table)
        parent = parent[key]
    key = path[-1]
    if key in parent:
        parent[key] = value
        return
    item = tomlkit.item(value)
    indent = _key_indent(parent)
    if indent is None:
        indent = getattr(getattr(parent, "trivia", None), "indent", "") + "  "
    if like is not None and getattr(like, "trivia", None) and like.trivia.comment:
        item.trivia.comment_ws = like.trivia.comment_ws
        item.trivia.comment = like.trivia.comment
    _add(parent, key, item)
    # tomlkit indents an added item by its table's indentation; set the final one afterwards
    item.trivia.indent = indent


def edit_values(result: FixResult, options: Options) -> None:
    """bool-as-string, option-outside-options and runtime-type-missing, with tomlkit."""
    import tomlkit

    file = FileContext(Path("<fix>"), result.text, options=options)
    if file.data is None or file.spec is None:
        return
    major = 2 if (file.version or 1) >= 3 else 1
    data = file.data
    moves = misplaced_options(data, file.spec, major=major) + respelled_options(
        data, file.spec, major=major)
    if not moves and not _values_to_edit(data, file.spec, major=major):
        return  # nothing to change: the file is not parsed again with tomlkit (see below)
    tables = _too_many_tables(result.text)
    if tables:
        result.cannot.append(
            f"the values are not edited: the file has {tables} table headers, more than the "
            f"{MAX_TOMLKIT_TABLES} gpuready's comment-keeping editor handles in seconds; fix "
            "them by hand (lint names each)")
        return
    doc = tomlkit.parse(result.text)
    for move in moves:
        existing = facts.lookup(data, move.target)
        if existing is not None and move.source != move.target and existing != move.value:
            result.cannot.append(
                f"option-outside-options: {move.target[-1]} is set both at "
                f"{render_key_path(move.source)} and in options, to different values; "
                "keep one by hand"
            )
            continue
        source_table = _node(doc, move.source[:-1])
        original = _item(source_table, move.source[-1])
        del source_table[move.source[-1]]
        _set(doc, move.target, move.value, like=original)
    data = tomllib.loads(doc.as_string())
    for path in find_bool_strings(data, file.spec, major=major):
        _set(doc, path, bool_text(facts.lookup(data, path)))
    for name, entry in facts.runtimes(data, file.spec).items():
        if not entry.get("runtime_type"):
            _set(doc, (*file.spec.runtime_path(name), "runtime_type"), RECOMMENDED_RUNTIME_TYPE)
    candidate = doc.as_string()
    if _parses(candidate) is None:
        result.cannot.append("cannot edit the values: the result would not parse")
        return
    result.text = candidate


# tomlkit's parse time grows with the square of the tables (:func:`_values_to_edit`): past
# this many table headers the value edits are left to the operator, so that a fix still ends
# in seconds (tests/test_bounds.py). containerd's default configs have 49.
MAX_TOMLKIT_TABLES = 300
_TABLE_HEADER = re.compile(r"^[ \t]*\[", re.MULTILINE)  # a line that opens a table header


def _too_many_tables(text: str) -> int | None:
    """The number of table headers of ``text`` when it has more than
    :data:`MAX_TOMLKIT_TABLES` (tomlkit is then not given it), else None."""
    tables = len(_TABLE_HEADER.findall(text))
    return tables if tables > MAX_TOMLKIT_TABLES else None


def _values_to_edit(data: dict[str, Any], spec: Any, *, major: int) -> bool:
    """True when a bool is written as a string or a runtime has no ``runtime_type``.

    Asked before ``tomlkit`` parses the file: its parse time grows with the square of the
    runtime tables appended to a config like containerd's default (400 take 8 s with tomlkit
    0.15.3, 2,000 minutes; tomllib reads the 2,000 in under a second), so a file with nothing
    to fix is never given to it.
    """
    if find_bool_strings(data, spec, major=major):
        return True
    return any(not entry.get("runtime_type") for entry in facts.runtimes(data, spec).values())


def fix_text(text: str, *, options: Options) -> FixResult:
    """The repaired text of one config file (unchanged when nothing is certain to fix).

    The passes repeat until one changes nothing, so a second run has nothing left to do. The
    text keeps its byte order mark and, for a CRLF file, its line endings.
    """
    body = without_bom(text)
    result = FixResult(body)
    if _parses(body) is None:
        result.cannot.append("toml-syntax: the file is not valid TOML; correct it by hand first")
        result.text = text
        return result
    for _ in range(MAX_PASSES):
        before = result.text
        result.cannot = []
        _fix_pass(result, options)
        if result.text == before:
            break
    result.text = text if result.text == body else restyle(text, result.text)
    return result


def _fix_pass(result: FixResult, options: Options) -> None:
    """One pass of every step: headers first (they move tables), then values."""
    quote_plugin_ids(result)
    move_runtimes(result, options)
    result.stages.append(result.text)
    edit_values(result, options)
    result.stages.append(result.text)


def _fixable_counts(problems: Sequence[Problem]) -> Counter:
    return Counter(p.rule for p in problems if p.rule in FIXABLE)


def plan_fix(path: Path, text: str, *, options: Options) -> tuple[Plan, FixResult]:
    """The plan for one file: its text now and repaired, with a summary of what changes."""
    from gpuready.rules.engine import lint_file

    result = fix_text(text, options=options)
    everything = frozenset(REGISTRY)

    def found(version: str) -> Counter:
        problems = lint_file(FileContext(path, version, options=options), selected=everything)
        return _fixable_counts(problems)

    before = found(text)
    for stage in dict.fromkeys(result.stages):
        if stage != without_bom(text):
            before |= found(stage)  # what the moved tables held, what a step uncovered
    fixed = before - found(result.text)
    summary = ", ".join(f"{rule} ×{count}" for rule, count in sorted(fixed.items()))
    plan = Plan(
        path=path,
        before=text,
        after=result.text,
        summary=f"fixes {summary}" if summary else "nothing to fix without guessing",
        notes=tuple(result.cannot),
    )
    return plan, result


def fix_paths(paths: Sequence[Path], *, options: Options, dry_run: bool,
              default_confirmed: bool = False, containerd_version: str | None = None) -> str:
    """Repair each file under its lock (re-reading it there); return the diffs and notes.

    A repair that changes how the default runtime runs is refused (exit 2, nothing written)
    unless ``default_confirmed``; so is one the never-break gate refuses on the node's line
    (``containerd_version``, else as :func:`gpuready.containerd.lines.node_line` decides). A
    runtime moved into the table containerd 1.x reads replaces its built-in runc there, so runc's
    table is written beside it, as ``configure`` does.
    """
    from gpuready import fsio
    from gpuready.changeset import check
    from gpuready.node import FileKind

    node = options.node
    out: list[str] = []
    for path in paths:
        node.read_text(path, kind=FileKind.CONFIG)  # a missing file: exit 2 before the lock
        with fsio.locked(path, node=node):
            text = node.read_text(path, kind=FileKind.CONFIG)
            plan, _ = plan_fix(path, text, options=options)
            _guard_default_runtime(plan, options=options, confirmed=default_confirmed)
            if plan.changes:
                plan = _kept_whole(plan, options, default_confirmed, containerd_version)
                check([plan])
            if plan.changes and not dry_run:
                fsio.apply_plan(plan, node=node)
        out.append(plan.diff())
        verb = "would fix" if dry_run else "fixed"
        out.append(
            f"{path}: {verb if plan.changes else 'nothing fixed'}"
            f"{': ' + plan.summary.removeprefix('fixes ') if plan.changes else ''}\n"
        )
        out.extend(f"{path}: cannot fix: {note}\n" for note in plan.notes)
    return "".join(out)


def _kept_whole(plan: Plan, options: Options, confirmed: bool, flag: str | None) -> Plan:
    """``plan`` with runc kept where 1.x would lose it, carrying the never-break gate."""

    from gpuready.containerd.gate import Guard, Intent
    from gpuready.containerd.keep_default import keep_default_runtime
    from gpuready.containerd.lines import node_line
    from gpuready.containerd.model import file_version

    line = node_line(root=options.root, flag=flag, config_version=file_version(plan.before))
    guard = Guard(plan.path, options.root, line, Intent(confirmed=confirmed))
    [kept] = keep_default_runtime([plan], guard, beside=options.runtime_name)
    # the summary says runc was kept; the notes here are what could not be fixed
    return kept._replace(notes=plan.notes)


def _guard_default_runtime(plan: Plan, *, options: Options, confirmed: bool) -> None:
    """Refuse a repair that changes what containerd decodes for the default runtime; the
    refusal names the findings fixed there and the confirmation that lets the repair go ahead."""
    if not plan.changes or plan.before is None:
        return
    from gpuready.containerd import default_runtime

    before, after = _parses(without_bom(plan.before)), _parses(without_bom(plan.after))
    if before is not None and after is not None:
        fixing = ", ".join(default_runtime_findings(plan.path, plan.before, options=options))
        default_runtime.refuse_unconfirmed(before, after, plan.path, confirmed=confirmed,
                                           fixing=fixing)


def default_runtime_findings(path: Path, text: str, *, options: Options,
                             errors_only: bool = False) -> list[str]:
    """The fixable findings on the default runtime's table in ``text``, each as
    ``rule at line:column`` (every fixable finding when none is at that table: a runtime written
    at another version's path, say); ``errors_only``: the error-level ones alone."""
    from gpuready.containerd.default_runtime import how_it_runs
    from gpuready.problems import Severity
    from gpuready.rules.engine import lint_file

    file = FileContext(path, text, options=options)
    problems = [p for p in lint_file(file, selected=FIXABLE) if p.rule in FIXABLE
                and (p.severity is Severity.ERROR or not errors_only)]
    found = how_it_runs(file.data) if file.data is not None and file.spec is not None else None
    if found is not None:
        table = render_key_path(file.spec.runtime_path(found[0]))
        on_default = [p for p in problems
                      if p.key_path == table or p.key_path.startswith(table + ".")]
        problems = on_default or problems
    return [f"{p.rule} at {p.line}:{p.column}" if p.line else p.rule for p in problems]


def fix_bool_strings(text: str, *, options: Options) -> str:
    """``text`` with every boolean written as a string (bool-as-string) written as the boolean
    it spells, every other byte kept: the value the operator meant, which containerd cannot
    take from the string (a runc option's fails when a container is created), so no runtime
    comes to run otherwise than it was written to."""
    import tomlkit

    file = FileContext(Path("<fix>"), without_bom(text), options=options)
    if file.data is None or file.spec is None:
        return text
    major = 2 if (file.version or 1) >= 3 else 1
    paths = find_bool_strings(file.data, file.spec, major=major)
    if not paths or _too_many_tables(text):
        return text  # past the bound, the fix that follows says what it leaves by hand
    doc = tomlkit.parse(without_bom(text))
    for path in paths:
        _set(doc, path, bool_text(facts.lookup(file.data, path)))
    candidate = doc.as_string()
    return text if _parses(candidate) is None else restyle(text, candidate)


def fix_for_setup(path: Path, text: str, *, options: Options,
                  confirmed: bool) -> tuple[str, str]:
    """``text`` repaired for ``setup`` to register the runtime on, and a summary of the
    repairs ("" when none).

    Booleans written as strings are always repaired (``SystemdCgroup = "true"`` to ``true``):
    containerd decodes the boolean the string spells, so the default runtime keeps running as it
    does. Where an error-level finding on the default runtime remains whose repair changes how
    it runs (a runc option moved from runc's table, where containerd ignores it, into
    ``options``; a missing ``runtime_type``), every ``lint --fix`` repair is made with
    ``confirmed``; without it :class:`~gpuready.containerd.default_runtime.
    DefaultRuntimeFindingError` names the findings and the flag, and nothing is written.
    """
    from gpuready.containerd import default_runtime

    spelled = fix_bool_strings(text, options=options)
    plan, _ = plan_fix(path, spelled, options=options)
    before, after = _parses(without_bom(spelled)), _parses(without_bom(plan.after))
    found = default_runtime.changes(before, after) if plan.changes and before and after else None
    errors = (default_runtime_findings(path, spelled, options=options, errors_only=True)
              if found is not None else [])
    if errors and not confirmed:
        name, changed = found
        raise default_runtime.DefaultRuntimeFindingError(
            f"{path}: error {', '.join(errors)} on the default runtime {name!r}: its fix changes "
            f"how {name} runs ({'; '.join(changed)}), and every pod without a RuntimeClass uses "
            f"it; nothing written. Pass {default_runtime.CONFIRMATION_FLAG} to let setup fix "
            "it, or fix the table by hand ('gpuready lint' shows where)")
    final = plan.after if errors else spelled
    if final == text:
        return text, ""
    return final, _fixed_summary(path, text, final, options=options)


def _fixed_summary(path: Path, before: str, after: str, *, options: Options) -> str:
    """The fixable findings of ``before`` that ``after`` no longer has: ``rule ×count, ...``."""
    from gpuready.rules.engine import lint_file

    def found(text: str) -> Counter:
        return _fixable_counts(lint_file(FileContext(path, text, options=options),
                                         selected=FIXABLE))

    fixed = found(before) - found(after)
    return ", ".join(f"{rule} ×{count}" for rule, count in sorted(fixed.items()))
