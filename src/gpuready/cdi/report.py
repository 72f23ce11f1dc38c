"""Text and JSON renderings of CDI scans: validation reports and device lists (no printing)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from gpuready.cdi.names import natural_key
from gpuready.cdi.validate import Scan, discover, scan
from gpuready.errors import ExitCode
from gpuready.node import Node
from gpuready.problems import Problem, Severity, has_errors
from gpuready.reporting.text import location


def scan_for(root: str, paths: Sequence[str]) -> Scan:
    """Scan ``paths`` (node paths, looked up under ``root``), or the node's CDI folders."""
    node = Node(root)
    if not paths:
        return discover(node)
    return scan([node.path(p) for p in paths], node=node)


def validation_exit_code(found: Scan) -> int:
    """2 when some input could not be read, 1 when a spec is refused, else 0."""
    if found.unreadable:
        return ExitCode.BAD_INPUT
    if has_errors(found.problems):
        return ExitCode.CHECK_FAILED
    return ExitCode.OK


def verdict(found: Scan) -> str:
    """``valid``, ``invalid`` or ``unreadable``: the word for the exit code."""
    return {0: "valid", 1: "invalid", 2: "unreadable"}[validation_exit_code(found)]


def status(found: Scan) -> str:
    """``ok``, ``failed`` or ``error`` (unreadable input): the status every command reports."""
    return {0: "ok", 1: "failed", 2: "error"}[validation_exit_code(found)]


def render_validation(found: Scan, *, fmt: str = "text") -> str:
    """The validation report as text (one line per problem) or JSON (always with a status).

    JSON ``status`` is ``ok``, ``failed`` (a spec the loader refuses) or ``error`` (unreadable
    input), with ``exit_code``, and ``error`` when it is an error, like every gpuready command;
    ``verdict`` says ``valid``, ``invalid`` or ``unreadable``.
    """
    if fmt == "json":
        return json.dumps({
            "status": status(found),
            "exit_code": validation_exit_code(found),
            **_error(found),
            "verdict": verdict(found),
            "files": [str(spec.path) for spec in found.specs],
            "problems": [p.to_dict() for p in found.problems],
            "unreadable": [error.message() for error in found.unreadable],
        }, indent=2) + "\n"
    lines = [problem_line(p) for p in found.problems]
    lines += [f"{error.message()}: unreadable" for error in found.unreadable]
    lines.append(_summary(found))
    return "\n".join(lines) + "\n"


def _error(found: Scan) -> dict[str, str]:
    """``{"error": ...}`` naming every unreadable input and refused spec, or nothing."""
    notes = scan_notes(found)
    return {"error": "; ".join(notes)} if notes else {}


def problem_line(problem: Problem) -> str:
    """``file:line:column: severity: field: message [rule]`` with a fix hint when there is one."""
    field = f"{problem.key_path}: " if problem.key_path else ""
    severity = problem.severity.value
    text = f"{location(problem)}: {severity}: {field}{problem.message} [{problem.rule}]"
    return text + (f"\n    fix: {problem.fix}" if problem.fix else "")


def _summary(found: Scan) -> str:
    counts = {s: sum(p.severity is s for p in found.problems) for s in Severity}
    files = sum(1 for spec in found.specs if spec.kind or spec.problems)
    if not found.specs and not found.unreadable:
        return "no CDI spec files found"
    return (f"{files} file(s), {len(found.devices)} device(s): {verdict(found)} "
            f"({counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s))")


def list_exit_code(found: Scan) -> int:
    """``cdi list``: 2 when an input is unreadable; 1 when a spec is refused, named or found in
    the CDI folders (the runtime skips it too, so its devices are missing from the list: a
    finding); else 0."""
    return validation_exit_code(found)


def render_devices(found: Scan, *, fmt: str = "text", code: int = 0) -> str:
    """The resolved devices, ``nvidia.com/gpu=0  /etc/cdi/nvidia.yaml``, in natural order."""
    devices = sorted(found.devices.values(), key=lambda d: natural_key(d.name))
    if fmt == "json":
        return json.dumps({"status": {0: "ok", 1: "failed", 2: "error"}[code],
                           "exit_code": int(code), **_error(found),
                           "devices": [{"name": d.name, "file": str(d.file)} for d in devices]},
                          indent=2) + "\n"
    if not devices:
        return ""
    width = max(len(d.name) for d in devices)
    return "".join(f"{d.name:<{width}}  {d.file}\n" for d in devices)


def scan_notes(found: Scan) -> list[str]:
    """Lines for standard error: unreadable inputs and refused spec files."""
    notes = [f"{error.message()}: unreadable" for error in found.unreadable]
    refused = [spec.path for spec in found.specs if has_errors(spec.problems)]
    notes += [f"{path}: refused or conflicting; see 'gpuready cdi validate {path}'"
              for path in refused]
    return notes
