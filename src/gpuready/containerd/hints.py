"""Hints for broken config files: the real mistakes behind a TOML parser's terse message.

Each entry is one mistake seen in configs written by tools and people, recognised on the line the
parser stopped at, with what to write instead. The parser's own message stays; the hint is
added beside it.

| mistake | where it comes from |
|---|---|
| doubled quotes (``""/usr/bin/x""``) | a quoted inventory or Helm value rendered inside quotes |
| an unquoted dotted ID (``runtime_type = io.containerd.runc.v2``) | a value pasted without quotes |
| a placeholder (``{{ … }}``, ``${…}``) | a Jinja, Go or Helm template or envsubst input |
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gpuready.records import Record

_KEY = r"""(?P<key>[A-Za-z0-9_.\-"' ]+?)"""


class Hint(Record):
    """A mistake recognised on one line, and the advice that goes with it."""

    name: str
    pattern: re.Pattern[str]
    advice: Callable[[re.Match[str]], str]


HINTS = (
    Hint(
        "template-placeholder",
        re.compile(r"(?P<placeholder>\{\{.*?\}\}|\$\{[^}\n]*\}|\{%.*?%\})"),
        lambda m: f"{m['placeholder']} is a template placeholder left in the file: render the "
        "template (Helm, Ansible, envsubst) and install its output instead",
    ),
    Hint(
        "doubled-quotes",
        re.compile(rf"^\s*{_KEY}\s*=\s*(?P<q>\"\"|'')(?P<inner>[^\"'\n]+)(?P=q)\s*(#.*)?$"),
        lambda m: f"the value is wrapped in doubled quotes (a quoted variable rendered inside "
        f"quotes): write {m['key'].strip()} = \"{m['inner']}\"",
    ),
    Hint(
        "unquoted-dotted-id",
        re.compile(rf"^\s*{_KEY}\s*=\s*\[?\s*(?P<id>[A-Za-z][\w-]*(\.[\w-]+)+)\s*\]?\s*(#.*)?$"),
        lambda m: f"strings need quotes: write {m['key'].strip()} = "
        + (f"[\"{m['id']}\"]" if "[" in m.group(0).split("=", 1)[1] else f"\"{m['id']}\""),
    ),
    Hint(
        "unquoted-plugin-header",
        re.compile(r"^\s*\[+[^\]\n]*\b(?P<id>io\.containerd\.[\w.-]+)[^\]\n]*\]"),
        lambda m: f"quote the plugin ID in the header: \"{m['id']}\" (dots in a bare key "
        "make nested tables)",
    ),
)


def hint_for(line: str) -> str | None:
    """Advice for the line a parser stopped at, or None when no known mistake is on it."""
    for hint in HINTS:
        match = hint.pattern.search(line)
        if match:
            return hint.advice(match)
    return None
