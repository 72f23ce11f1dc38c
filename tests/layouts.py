"""Rewrite a config's data into an equivalent TOML layout, chosen by hypothesis.

The layouts are the ones real files use: tables in any order (a parent after its children),
tables only implied by deeper headers, dotted keys, inline tables, tabs and odd indentation,
trailing blanks, blank lines after headers, comments anywhere, single- or double-quoted keys.
Every layout parses to the same data (the strategy checks it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from gpuready.compat import tomllib

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass
class _Block:
    """A header and its body lines."""

    path: tuple[str, ...]
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Look:
    indent: str
    quote: str
    blank_after_header: bool
    trailing: str
    comments: bool


def key(part: str, quote: str) -> str:
    """A key as TOML writes it: bare when it can be, else quoted."""
    if _BARE.match(part):
        return part
    if quote == "'" and "'" not in part:
        return f"'{part}'"
    return json.dumps(part)


def value(item: Any, quote: str) -> str:
    """A TOML value on one line (tables inline)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, (int, float)):
        return repr(item)
    if isinstance(item, str):
        return f"'{item}'" if quote == "'" and "'" not in item and "\\" not in item and \
            item.isprintable() else json.dumps(item)
    if isinstance(item, list):
        return "[" + ", ".join(value(inner, quote) for inner in item) + "]"
    if isinstance(item, dict):
        pairs = ", ".join(f"{key(k, quote)} = {value(v, quote)}" for k, v in item.items())
        return "{" + (f" {pairs} " if pairs else "") + "}"
    raise TypeError(type(item))


@st.composite
def layouts(draw, data: dict[str, Any]) -> str:
    """A TOML text, in a layout hypothesis chooses, that parses to ``data``."""
    look = _Look(
        indent=draw(st.sampled_from(["", "  ", "\t", "    "])),
        quote=draw(st.sampled_from(['"', "'"])),
        blank_after_header=draw(st.booleans()),
        trailing=draw(st.sampled_from(["", " ", "\t "])),
        comments=draw(st.booleans()),
    )
    root = _Block(())
    blocks: list[_Block] = []
    _emit(draw, data, (), root, blocks, look)
    order = draw(st.permutations(blocks))
    text = "".join(line + "\n" for line in root.lines)
    for block in order:
        text += _render(block, look)
    assert tomllib.loads(text) == data, text
    return text


def _emit(draw, table: dict, path: tuple[str, ...], block: _Block, blocks: list[_Block],
          look: _Look, *, implied: bool = False) -> None:
    """Put ``table``'s scalars in ``block`` and each sub-table in the form hypothesis picks.

    Under an implied table (no header, no body) sub-tables need headers of their own.
    """
    for name, item in table.items():
        if not isinstance(item, dict):
            block.lines.append(f"{key(name, look.quote)} = {value(item, look.quote)}")
    for name, item in table.items():
        if not isinstance(item, dict):
            continue
        forms = ["header", "implied"] if implied else ["header", "header", "implied", "dotted",
                                                         "inline"]
        form = draw(st.sampled_from(forms))
        if form == "implied" and (not item or any(not isinstance(v, dict) for v in item.values())):
            form = "header"  # only a table of tables can be implied by deeper headers
        if form == "dotted" and not item:
            form = "inline"
        sub = (*path, name)
        if form == "inline":
            block.lines.append(f"{key(name, look.quote)} = {value(item, look.quote)}")
        elif form == "dotted":
            prefix = ".".join(key(p, look.quote) for p in sub[len(block.path):])
            for leaf, leaf_value in _leaves(item):
                dotted = ".".join(key(p, look.quote) for p in leaf)
                block.lines.append(f"{prefix}.{dotted} = {value(leaf_value, look.quote)}")
        else:
            child = _Block(sub)
            if form == "header":
                blocks.append(child)
            _emit(draw, item, sub, child, blocks, look, implied=form == "implied")


def _leaves(table: dict, prefix: tuple[str, ...] = ()):
    for name, item in table.items():
        if isinstance(item, dict) and item:
            yield from _leaves(item, (*prefix, name))
        else:
            yield (*prefix, name), item


def _render(block: _Block, look: _Look) -> str:
    depth = look.indent * max(len(block.path) - 2, 0)
    header = ".".join(key(part, look.quote) for part in block.path)
    lines = ["", f"{depth}[{header}]{look.trailing}"]
    if look.comments:
        lines[1] += "  # a comment"
    if look.blank_after_header:
        lines.append("")
    lines += [f"{depth}{look.indent}{line}{look.trailing}" for line in block.lines]
    if look.comments:
        lines.append(f"{depth}# end of {header}")
    return "".join(line + "\n" for line in lines)
