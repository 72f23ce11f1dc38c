"""Comment-keeping edits of a ``tomlkit`` document: add or update one runtime table.

New tables copy the look of the runtime beside them (indentation, single or double quotes), so
the added lines read as if the operator had written them. Nothing outside the runtime's own
table is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import tomlkit
from tomlkit import TOMLDocument
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.items import InlineTable, Item, String, StringType, Table

from gpuready.containerd.versions import KeyPath, render_key_path


@dataclass(frozen=True)
class TableStyle:
    """How a runtime table looks in this file."""

    header_indent: str = ""
    body_indent: str = ""
    options_header_indent: str = ""
    options_body_indent: str = ""
    literal_strings: bool = False


class UneditableTableError(ValueError):
    """A key on the way to the table to edit is not a ``[table]`` gpuready can add to."""


def ensure_table(document, path: KeyPath):
    """The table at ``path``, creating missing tables as header-less super tables.

    Raises :class:`UneditableTableError` when a key on the way holds a value that is not a
    table, or an inline table (``{ ... }``), which TOML does not let gpuready add tables to.
    """
    node = document
    for depth, key in enumerate(path):
        if key not in node:
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
        if isinstance(node, InlineTable) or not isinstance(node, Table | TOMLDocument):
            kind = "an inline table" if isinstance(node, InlineTable) else _kind(node)
            raise UneditableTableError(f"{render_key_path(path[: depth + 1])} is {kind}")
    return node


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array, not a table"
    if isinstance(value, OutOfOrderTableProxy):
        return "written as dotted keys or as tables out of order: rewrite it as [table] headers"
    name = type(value).__name__.lower()
    article = "an" if name[0] in "aeiou" else "a"
    return f"{article} {name} value, not a table"


def style_from(sibling: Any) -> TableStyle:
    """The style of an existing runtime table (flat when there is none)."""
    if not isinstance(sibling, Table):
        return TableStyle()
    options = sibling.get("options")
    literal = _is_literal(sibling.get("runtime_type")) or _is_literal(_first_string(sibling))
    if isinstance(options, Table):
        return TableStyle(
            header_indent=sibling.trivia.indent,
            body_indent=_first_value_indent(sibling),
            options_header_indent=options.trivia.indent,
            options_body_indent=_first_value_indent(options),
            literal_strings=literal,
        )
    body = _first_value_indent(sibling)
    step = body[len(sibling.trivia.indent):] if body.startswith(sibling.trivia.indent) else ""
    return TableStyle(sibling.trivia.indent, body, body, body + step, literal)


def add_table(parent, name: str, values: Mapping[str, Any], style: TableStyle) -> None:
    """Append ``[parent.name]`` with ``values``; a nested mapping becomes its ``options`` table."""
    table = tomlkit.table()
    for key, value in values.items():
        if not isinstance(value, Mapping):
            table.add(key, _item(value, style.body_indent, style=style))
    for key, value in values.items():
        if isinstance(value, Mapping):
            table.add(tomlkit.nl())
            child = _subtable(value, style)
            table.add(key, child)
            child.trivia.indent = style.options_header_indent
    table.add(tomlkit.nl())
    separate = bool(parent.value.body) and not _ends_with_blank_line(parent)
    parent.add(name, table)
    # tomlkit adds the parent's indentation to an appended table; set the wanted one afterwards,
    # with a blank line first when the text before it does not end in one.
    table.trivia.indent = ("\n" if separate else "") + style.header_indent


def set_values(table, values: Mapping[str, Any], style: TableStyle) -> None:
    """Set ``values`` on an existing table, creating a missing ``options`` sub-table."""
    for key, value in values.items():
        if isinstance(value, Mapping):
            if key in table and isinstance(table[key], Mapping):
                set_values(table[key], value, _options_style(style))
            else:
                child = _subtable(value, style)
                table.add(key, child)
                child.trivia.indent = style.options_header_indent
        elif key not in table:
            _append(table, key, _item(value, style.body_indent, style=style))
        elif table[key] != value:
            existing = table.item(key)  # the Item: table[key] unwraps booleans to bool
            keep = replace(style, literal_strings=style.literal_strings or _is_literal(existing))
            table[key] = _item(value, existing.trivia.indent, style=keep)


def _append(table, key: str, item: Item) -> None:
    """Append a value keeping its own indentation (tomlkit would add the table's indent)."""
    indent = item.trivia.indent
    table.add(key, item)
    item.trivia.indent = indent


def _subtable(values: Mapping[str, Any], style: TableStyle):
    child = tomlkit.table()
    for key, value in values.items():
        child.add(key, _item(value, style.options_body_indent, style=style))
    return child


def _options_style(style: TableStyle) -> TableStyle:
    return TableStyle(
        style.options_header_indent,
        style.options_body_indent,
        style.options_header_indent,
        style.options_body_indent,
        style.literal_strings,
    )


def _item(value: Any, indent: str, *, style: TableStyle) -> Item:
    if isinstance(value, Item):
        new = value.copy() if hasattr(value, "copy") else value
    elif isinstance(value, str) and style.literal_strings and "'" not in value:
        new = tomlkit.string(value, literal=True)
    else:
        new = tomlkit.item(value)
    new.trivia.indent = indent
    return new


def _first_value_indent(table: Table) -> str:
    for _, item in table.value.body:
        if not isinstance(item, Table) and hasattr(item, "trivia"):
            try:
                return item.trivia.indent
            except RuntimeError:  # whitespace items have no trivia
                continue
    return table.trivia.indent + "  " if table.trivia.indent else ""


def _is_literal(value: Any) -> bool:
    return isinstance(value, String) and value.type in (StringType.SLL, StringType.MLL)


def _first_string(table: Table) -> Any:
    return next((value for value in table.values() if isinstance(value, String)), None)


def _ends_with_blank_line(container: Any) -> bool:
    """True when the rendered container ends in an empty line (its last item, recursively)."""
    body = getattr(container, "value", container).body
    if not body:
        return False
    _, last = body[-1]
    if isinstance(last, Table):
        return _ends_with_blank_line(last)
    return last.as_string().endswith("\n") and isinstance(last, tomlkit.items.Whitespace)
