"""JSON: one document with a stable shape, for scripts and fleet audits.

The shape (stable; new keys may be added, none removed or renamed)::

    {
      "command": "lint",                      # or "doctor", …
      "status": "ok" | "failed",              # failed: at least one error-level problem
      "summary": {"files": 1, "errors": 1, "warnings": 0, "info": 0},
      "files": ["/etc/containerd/config.toml"],
      "problems": [
        {
          "rule": "bool-as-string",
          "severity": "error",                # error | warning | info
          "message": "…",
          "file": "/etc/containerd/config.toml",
          "key_path": "plugins.\\"io.containerd.grpc.v1.cri\\".containerd.runtimes.nvidia…",
          "line": 12, "column": 5,            # 1-based; null when unknown
          "fix": "…"
        }
      ]
    }

``status`` follows the exit code: ``ok`` with exit 0, ``failed`` with exit 1. Usage errors and
unreadable input (exit 2) print a one-line message on stderr and no JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from gpuready.problems import Problem, Severity, has_errors


def document(problems: Sequence[Problem], *, files: Sequence[str], command: str) -> dict:
    """The report as a JSON-ready mapping."""
    by = Counter(p.severity for p in problems)
    return {
        "command": command,
        "status": "failed" if has_errors(list(problems)) else "ok",
        "summary": {
            "files": len(files),
            "errors": by[Severity.ERROR],
            "warnings": by[Severity.WARNING],
            "info": by[Severity.INFO],
        },
        "files": list(files),
        "problems": [p.to_dict() for p in problems],
    }


def render(problems: Sequence[Problem], *, files: Sequence[str], command: str) -> str:
    """The report as indented JSON text."""
    return json.dumps(document(problems, files=files, command=command), indent=2) + "\n"
