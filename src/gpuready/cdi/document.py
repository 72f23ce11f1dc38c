"""Reading a spec file: its data (``yaml.safe_load`` or ``json``) and where each field is.

The loader decodes JSON and YAML alike with a strict YAML decoder: a syntax error, a duplicate
key, or a document that is not a mapping refuses the file. Those come back as problems; a file
that cannot be read at all (missing, a folder, not UTF-8) raises :class:`InputError`.

Two consequences of that decoder, which the loader (container-device-interface v1.1.0) shows and
this module follows, each with a warning since the text says otherwise: a YAML spec saved with a
``.json`` extension loads (the decoder is YAML whatever the extension), and a YAML document ended
by a ``...`` marker loads with whatever follows the marker ignored (only the first document is
decoded).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from gpuready import yamlfile
from gpuready.node import HOST, FileKind, Node
from gpuready.problems import Problem, Severity
from gpuready.records import Factory, MutableRecord
from gpuready.yamlfile import yaml_error

RULE_INVALID = "cdi-spec-invalid"
RULE_STRICT = "cdi-spec-strict"
Position = tuple[int, int]
# A document end marker at the start of a line (a comment may follow it).
_DOCUMENT_END = re.compile(r"^\.\.\.[ \t]*(?:#.*)?$", re.MULTILINE)


class SpecDocument(MutableRecord):
    """One spec file as read: ``data`` (None when it did not parse), field positions, problems."""

    path: str
    data: Any
    lines: dict[str, Position] = Factory(dict)
    problems: list[Problem] = Factory(list)


def load_spec_file(path: Path, *, node: Node = HOST) -> SpecDocument:
    """Read (through ``node``) and parse ``path``: JSON for ``*.json``, YAML for the rest."""
    return parse_spec_text(node.read_text(path, kind=FileKind.CDI_SPEC), path)


def parse_spec_text(text: str, path: Path) -> SpecDocument:
    """Parse a spec file's text as the file's name says: JSON for ``*.json``, YAML for the rest."""
    if path.suffix == ".json":
        return parse_json_file(text, str(path))
    return parse_yaml(text, str(path))


def parse_json_file(text: str, file: str) -> SpecDocument:
    """A ``*.json`` spec: JSON, or (as the loader's YAML decoder reads it) YAML, with a warning."""
    document = parse_json(text, file)
    if document.data is not None or not _is_json_syntax_error(document):
        return document
    as_yaml = parse_yaml(text, file)
    if as_yaml.data is None:
        return document
    json_error = document.problems[0]
    if text.lstrip().startswith(("{", "[")):
        message = (f"{json_error.message} (line {json_error.line}); the CDI loader decodes "
                   "specs as YAML, which reads this text")
        fix = "write valid JSON"
    else:
        message = "the file is YAML, not JSON: the CDI loader decodes every spec as YAML"
        fix = f"rename it to {Path(file).stem}.yaml"
    as_yaml.problems.insert(0, Problem(RULE_STRICT, Severity.WARNING, message, file,
                                       line=json_error.line, column=json_error.column, fix=fix))
    return as_yaml


def _is_json_syntax_error(document: SpecDocument) -> bool:
    return any(p.message.startswith("invalid JSON:") for p in document.problems)


def first_document(text: str) -> tuple[str, int | None]:
    """The text up to a ``...`` end marker followed by more content, and the marker's line.

    ``(text, None)`` when there is no such marker: nothing is cut.
    """
    for match in _DOCUMENT_END.finditer(text):
        rest = text[match.end():]
        if any(line.strip() and not line.lstrip().startswith("#") for line in rest.splitlines()):
            return text[: match.end()] + "\n", text.count("\n", 0, match.start()) + 1
    return text, None


def parse_yaml(text: str, file: str) -> SpecDocument:
    """Parse YAML text (within bounds): values and positions from the first composed document.

    Text after a ``...`` document end marker is ignored, as the loader ignores it, with a
    warning.
    """
    first, marker_line = first_document(text)
    try:
        node = yamlfile.safe_compose(first)
        data = yamlfile.construct(node)
    except yaml.YAMLError as error:
        return SpecDocument(file, None, problems=[_yaml_syntax_problem(error, file)])
    document = SpecDocument(file, data)
    if node is not None:
        _record_positions(node, "", document, depth=0)
    if marker_line is not None:
        document.problems.append(Problem(
            RULE_STRICT, Severity.WARNING,
            f"text after the document end marker '...' on line {marker_line} is ignored: the "
            "CDI loader decodes only the first document", file, line=marker_line + 1, column=1,
            fix="remove the marker and what follows it, or move that text into its own file"))
    return document


def parse_json(text: str, file: str) -> SpecDocument:
    """Parse JSON text with ``json``; positions come from composing the same text as YAML."""
    duplicates: list[str] = []
    try:
        yamlfile.check_bounds(text)  # json recurses once per level: bound the nesting first
    except yaml.YAMLError as error:  # not YAML (rare for JSON): json says what is wrong
        if yamlfile.is_bound_error(error):
            return SpecDocument(file, None, problems=[_yaml_syntax_problem(error, file)])
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _no_duplicates(pairs, duplicates))
    except RecursionError:
        reason = f"invalid JSON: nested deeper than {yamlfile.MAX_DEPTH} levels; refused"
        problem = Problem(RULE_INVALID, Severity.ERROR, reason, file)
        return SpecDocument(file, None, problems=[problem])
    except json.JSONDecodeError as error:
        problem = Problem(RULE_INVALID, Severity.ERROR, f"invalid JSON: {error.msg}", file,
                          line=error.lineno, column=error.colno)
        return SpecDocument(file, None, problems=[problem])
    document = SpecDocument(file, data)
    try:  # JSON is YAML for positions; PyYAML (YAML 1.1) reads nearly every JSON text
        node = yamlfile.safe_compose(text)
    except yaml.YAMLError:
        node = None
    if node is not None:
        _record_positions(node, "", document, depth=0)
    elif duplicates:
        document.problems.extend(_duplicate_problem(key, file, None) for key in duplicates)
    return document


def child_path(parent: str, key: str) -> str:
    """``devices[0]`` + ``name`` → ``devices[0].name``; odd keys are quoted (``["a.b/c"]``)."""
    if key.replace("_", "a").isalnum() and key.isascii():
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def _record_positions(node: yaml.Node, path: str, document: SpecDocument, *, depth: int) -> None:
    """Remember the 1-based line and column of every field; report duplicate mapping keys."""
    if depth > 64:  # aliases can nest a document deeper than any spec; stop, positions only
        return
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            here = child_path(path, key)
            position = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in seen and key != "<<":
                document.problems.append(_duplicate_problem(here, document.path, position))
            seen.add(key)
            document.lines.setdefault(here, position)
            _record_positions(value_node, here, document, depth=depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            here = f"{path}[{index}]"
            document.lines.setdefault(here, (item.start_mark.line + 1, item.start_mark.column + 1))
            _record_positions(item, here, document, depth=depth + 1)


def _duplicate_problem(key_path: str, file: str, position: Position | None) -> Problem:
    # The loader's strict YAML decoder refuses a repeated key; PyYAML would keep the last one.
    line, column = position if position else (None, None)
    return Problem(RULE_INVALID, Severity.ERROR, "key is repeated; the loader refuses duplicate "
                   "keys", file, key_path, line, column,
                   fix="keep one of the entries")


def _no_duplicates(pairs: list[tuple[str, Any]], duplicates: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            duplicates.append(key)
        result[key] = value
    return result


def _yaml_syntax_problem(error: yaml.YAMLError, file: str) -> Problem:
    found = yaml_error(error, file)
    line, column = found.line, found.column
    mark = getattr(error, "context_mark", None)
    if line is None and mark is not None:  # some errors know only where their context began
        line, column = mark.line + 1, mark.column + 1
    return Problem(RULE_INVALID, Severity.ERROR, found.reason, file, line=line, column=column)
