"""SARIF 2.1.0, so code-scanning tools show each problem on its line with the rule's help.

Every rule of the catalogue is listed in ``tool.driver.rules`` (help text from its docstring);
each problem is a result with ``ruleId``, ``level`` and a ``physicalLocation`` whose region has
``startLine``/``startColumn`` when the position is known.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from gpuready import __version__
from gpuready.problems import Problem, Severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule_descriptor(rule) -> dict:
    sections = rule.sections()
    help_text = "\n\n".join(f"{title}\n{text}" for title, text in sections.items())
    markdown = "\n\n".join(f"**{title}**\n\n{text}" for title, text in sections.items())
    return {
        "id": rule.name,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": sections.get("What it does", rule.summary())},
        "help": {"text": help_text, "markdown": markdown},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
    }


def _uri(path: str) -> str:
    candidate = Path(path)
    return candidate.as_uri() if candidate.is_absolute() else path


def _result(problem: Problem, index: dict[str, int]) -> dict:
    location: dict = {"artifactLocation": {"uri": _uri(problem.file)}}
    if problem.line is not None:
        location["region"] = {"startLine": problem.line, "startColumn": problem.column or 1}
    result = {
        "ruleId": problem.rule,
        "level": LEVELS[problem.severity],
        "message": {"text": problem.message + (f" Fix: {problem.fix}" if problem.fix else "")},
        "locations": [{"physicalLocation": location}],
    }
    if problem.rule in index:
        result["ruleIndex"] = index[problem.rule]
    if problem.key_path:
        result["locations"][0]["logicalLocations"] = [
            {"fullyQualifiedName": problem.key_path, "kind": "member"}
        ]
    return result


def document(problems: Sequence[Problem], *, files: Sequence[str]) -> dict:
    """The SARIF log as a JSON-ready mapping."""
    from gpuready.rules import REGISTRY

    rules = [_rule_descriptor(rule) for rule in REGISTRY.values()]
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpuready",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "artifacts": [{"location": {"uri": _uri(f)}} for f in files],
                "results": [_result(p, index) for p in problems],
            }
        ],
    }


def render(problems: Sequence[Problem], *, files: Sequence[str]) -> str:
    """The SARIF log as JSON text."""
    return json.dumps(document(problems, files=files), indent=2) + "\n"
