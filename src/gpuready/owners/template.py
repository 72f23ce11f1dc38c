"""k3s and RKE2 containerd templates: the documented subset gpuready reads, edits and renders.

k3s renders ``config.toml.tmpl`` (``config-v3.toml.tmpl`` for a version 3 config) as a Go
``text/template`` with a template named ``base`` defined as k3s's own generated config
(k3s-io/k3s pkg/agent/templates/templates.go ``ParseTemplateFromConfig``; k3s-io/k3s#7991). The
documented way to extend it is ``{{ template "base" . }}`` followed by TOML
(docs.k3s.io advanced, "Base template"). gpuready handles exactly that subset, and templates
without any Go action (plain TOML, rendered unchanged); anything else is refused, never guessed.

Rendering replaces the action with the base text and keeps every other byte, which is what Go's
``text/template`` does for this subset. It has been checked against hand-written base fixtures
modelled on k3s's generated config, not against k3s itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuready.errors import InputError
from gpuready.records import Record

# {{ template "base" . }}, with Go's optional trim markers ({{- ... -}}) and spacing.
BASE_ACTION = re.compile(r"\{\{(-?)\s*template\s+\"base\"\s+\.\s*(-?)\}\}")
BASE_LINE = '{{ template "base" . }}'


class GoTemplate(Record):
    """A template split around its ``base`` action: ``prefix``, the action, ``body``.

    ``has_base`` is False for a template without Go actions, whose ``body`` is the whole text.
    """

    path: Path
    prefix: str
    action: str
    body: str

    @property
    def has_base(self) -> bool:
        """True when the template includes k3s's generated config."""
        return bool(self.action)

    def text(self, body: str | None = None) -> str:
        """The template's text, with ``body`` in place of the current body when given."""
        return self.prefix + self.action + (self.body if body is None else body)


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _first_action(text: str) -> tuple[str, int] | None:
    """The first ``{{ ... }}`` (or unclosed ``{{``) and its offset, found in linear time (a
    regular expression would backtrack quadratically on a hostile file of many ``{{``)."""
    start = text.find("{{")
    if start < 0:
        return None
    end = text.find("}}", start + 2)
    shown = text[start: end + 2] if end >= 0 else text[start: start + 40]
    return (shown if len(shown) <= 80 else shown[:77] + "..."), start


def parse_template(text: str, path: Path) -> GoTemplate:
    """Split a template; an action outside the documented subset is an :class:`InputError`."""
    match = BASE_ACTION.search(text)
    prefix, action, body = ("", "", text) if match is None else (
        text[: match.start()], match.group(0), text[match.end():])
    for part, start in ((prefix, 0), (body, len(text) - len(body))):
        other = _first_action(part)
        if other:
            found, offset = other
            line, column = _position(text, start + offset)
            raise InputError(
                path,
                f"Go template action {found!r} is outside what gpuready edits "
                f"({BASE_LINE} followed by TOML, or plain TOML): edit this template by hand",
                line=line,
                column=column,
            )
    if prefix.strip() and any(
        line.strip() and not line.lstrip().startswith("#") for line in prefix.splitlines()
    ):
        line, column = _position(text, match.start())
        raise InputError(
            path,
            f"TOML before {BASE_LINE} would put the base config's keys inside it: move it after "
            "the action",
            line=line,
            column=column,
        )
    return GoTemplate(path, prefix, action, body)


def render(template: GoTemplate, base: str) -> str:
    """The config k3s would write from ``template`` with ``base`` as its generated config."""
    if not template.has_base:
        return template.body
    prefix, body = template.prefix, template.body
    trim_left, trim_right = BASE_ACTION.fullmatch(template.action).groups()
    if trim_left:
        prefix = prefix.rstrip()
    if trim_right:
        body = body.lstrip()
    return prefix + base + body


def new_template(body: str) -> str:
    """A template that keeps k3s's generated config and adds ``body`` after it."""
    return f"{BASE_LINE}\n{body}"


def template_version(target: Path) -> int:
    """The config version a template body is written in: config-v3.toml.tmpl renders a version 3
    config, config.toml.tmpl the legacy version 2 (k3s-io/k3s#11626)."""
    return 3 if target.name.startswith("config-v3") else 2
