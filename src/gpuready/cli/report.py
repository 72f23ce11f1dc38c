"""Printing the outcome of a change to a config: containerd's, Docker's or CRI-O's."""

from __future__ import annotations

import json
import sys


def print_findings(findings) -> None:
    """Each finding (a :meth:`gpuready.problems.Problem.to_dict`) as ``doctor`` prints it: the
    place, the severity and rule, the message, and its fix on the next line."""
    from gpuready.problems import Problem, Severity
    from gpuready.reporting.text import render_problem

    for finding in findings:
        problem = Problem(**{**finding, "severity": Severity(finding["severity"])})
        print(render_problem(problem))


def print_configure_report(report: dict, *, dry_run: bool, as_json: bool) -> None:
    """Print the outcome: the summary and notes, and the diff in a dry run."""
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if dry_run and report["diff"]:
        sys.stdout.write(report["diff"])
    for repair in report.get("repairs", ()):
        if dry_run:
            sys.stdout.write(repair["diff"])
        print(f"{repair['file']}: {'would ' if dry_run else ''}{repair['summary']}")
    if report["advice"]:
        print(report["advice"])
        return
    prefix = "would " if dry_run and report["changed"] else ""
    state = "" if report["changed"] else " (no change)"
    print(f"{report['file']}: {prefix}{report['summary']}{state}")
    for note in report["notes"]:
        print(f"note: {note}")
    if report["backup"]:
        print(f"backup of the original: {report['backup']}")
    print_findings(report.get("findings", ()))
    for reason in report.get("without_effect", ()):
        print(f"gpuready: error: {reason}", file=sys.stderr)
    if report.get("record"):
        print(f"record of what gpuready changed: kept in {report['record']}")
