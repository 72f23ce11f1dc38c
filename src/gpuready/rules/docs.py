"""The rule reference, generated from the rules' docstrings (``gpuready rules``, docs/rules.md)."""

from __future__ import annotations

from gpuready.rules.base import SECTIONS
from gpuready.rules.registry import REGISTRY, get

SCOPE_WORDS = {
    "file": "lint, doctor",
    "config": "lint, doctor",
    "node": "doctor",
    "docker": "lint, doctor (--engine docker)",
    "crio": "lint, doctor (--engine crio)",
}

HEADER = """\
# gpuready rules

<!-- Generated from the rule docstrings by scripts/generate_docs.py
     (gpuready rules --markdown). Do not edit by hand. -->

Every rule of `gpuready lint` and `gpuready doctor`. Select or skip rules with
`--select NAME,…` / `--ignore NAME,…`; `gpuready rules NAME` prints one of these sections.
Rules marked *fixable* are repaired by `gpuready lint --fix`.

| rule | severity | checked by | fixable | finds |
|---|---|---|---|---|
"""


def listing() -> str:
    """One line per rule: name, severity, commands, summary."""
    width = max(len(name) for name in REGISTRY)
    lines = []
    for name, rule in REGISTRY.items():
        fix = " (fixable)" if rule.fixable else ""
        lines.append(f"{name:<{width}}  {rule.severity.value:<7}  {rule.summary()}{fix}")
    return "\n".join(lines) + "\n"


def explain(name: str) -> str:
    """One rule's full text, as the terminal shows it."""
    rule = get(name)
    lines = [
        f"{rule.name} ({rule.severity.value}; checked by {SCOPE_WORDS[rule.scope.value]}"
        f"{'; fixable by lint --fix' if rule.fixable else ''})",
        "",
        rule.summary(),
    ]
    for title, text in rule.sections().items():
        lines += ["", f"{title}", *("  " + line if line else "" for line in text.splitlines())]
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """The whole reference as Markdown: a table, then one section per rule."""
    parts = [HEADER]
    for name, rule in REGISTRY.items():
        parts.append(
            f"| [`{name}`](#{name}) | {rule.severity.value} | {SCOPE_WORDS[rule.scope.value]} "
            f"| {'yes' if rule.fixable else ''} | {rule.summary().replace('|', '/')} |\n"
        )
    for name, rule in REGISTRY.items():
        parts.append(f"\n## {name}\n\n{rule.summary()}\n\n")
        fixable = " Fixable by `gpuready lint --fix`." if rule.fixable else ""
        parts.append(
            f"Default severity: **{rule.severity.value}**. Checked by: "
            f"{SCOPE_WORDS[rule.scope.value]}.{fixable}\n"
        )
        sections = rule.sections()
        for title in SECTIONS:
            parts.append(f"\n### {title}\n\n{sections.get(title, '')}\n")
    return "".join(parts)
