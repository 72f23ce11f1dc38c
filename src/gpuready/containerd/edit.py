"""Line-keeping edits of a containerd config: add a table, set a value, wherever TOML keeps it.

A table can be written as a ``[header]`` (its headers in any order, spread across the file), as
dotted keys in another table's body, as an inline table, or only implied by deeper headers. The
editor finds how the file writes the place it edits (:mod:`gpuready.containerd.layout`) and adds
lines in the same form, next to what is there:

- a new runtime goes after the other runtimes, written as they are (headers, dotted keys, or an
  inline table on its own line), copying their indentation and quote style;
- a new key goes at the end of its table's body, or under a new header after the table's last
  sub-table; an existing value is replaced on its own line, the rest of the line kept.

Only inserting into an inline table changes an existing line (TOML keeps an inline table on one
line); the edit then carries a note saying which line and why.

Every edit is checked: the result is parsed with ``tomllib`` and must equal the original data
with exactly the intended change, else it is refused. (tomlkit, which re-renders the tables it
touches, was tried and fails on these layouts: it refuses out-of-order tables it returns as
proxies, crashes on a blank line after a header, and moves a table added under dotted keys to the
top level of the document.)
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from typing import Any

from gpuready.compat import tomllib
from gpuready.containerd.document import loads_bounded
from gpuready.containerd.layout import Entry, Header, Layout, array_items, scan
from gpuready.containerd.versions import KeyPath, render_key_path
from gpuready.errors import InputError
from gpuready.records import Record

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
DOUBLE = '"'


class UneditableTableError(ValueError):
    """A key on the way to the place to edit holds a value that is not a table."""


class Edit(Record):
    """The edited text, and a note when an existing line had to change (not only added to)."""

    text: str
    note: str = ""


class Style(Record):
    """How new lines look: indentation of a table and of its sub-tables, quotes, sub-table form.

    ``options`` says how a sub-table (a runtime's ``options``) is written: ``header``,
    ``dotted`` (``options.Key = …`` in the body) or ``inline`` (``options = { … }``).
    """

    header_indent: str = ""
    body_indent: str = ""
    sub_header_indent: str = ""
    sub_body_indent: str = ""
    literal: bool = False
    quote: str = '"'
    options: str = "header"

    def nested(self) -> Style:
        """The style of a sub-table, one level deeper."""
        step = _step(self.sub_header_indent, self.sub_body_indent)
        return Style(self.sub_header_indent, self.sub_body_indent, self.sub_body_indent,
                     self.sub_body_indent + step, self.literal, self.quote)


def _step(outer: str, inner: str) -> str:
    return inner[len(outer):] if inner.startswith(outer) else ""


def add_table(text: str, path: KeyPath, values: Mapping[str, Any], *, sibling: str | None) -> Edit:
    """Add the table ``path`` (which must not exist) holding ``values``, next to ``sibling``.

    ``sibling`` names another table of the same parent written the way the new one should be
    (the runtime a new runtime is modelled on); without one, the parent's own form decides.
    """
    data = _parse(text)
    _check_tables(data, path)
    layout = scan(text)
    sibling_path = (*path[:-1], sibling) if sibling else None
    if sibling_path and _is_table(data, sibling_path):
        edit = _beside_sibling(layout, sibling_path, path, values)
    else:
        edit = _insert(layout, data, path, values)
    _verify(text, data, edit, path, values)
    return edit


def set_value(text: str, path: KeyPath, value: Any) -> Edit:
    """Set the key ``path`` to ``value``: replace it where it is written, else add it."""
    data = _parse(text)
    _check_tables(data, path[:-1])
    layout = scan(text)
    entry = layout.value(path)
    if entry is not None:
        literal = text[entry.value_start] == "'"
        rendered = render_value(value, literal=literal)
        edit = Edit(text[: entry.value_start] + rendered + text[entry.value_end :])
        if entry.nested:
            edit = Edit(edit.text, _inline_note(text, entry.value_start, path[:-1], path[-1]))
    else:
        edit = _insert(layout, data, path, value)
    _verify(text, data, edit, path, value)
    return edit


def remove_items(text: str, path: KeyPath, unwanted: frozenset[str]) -> Edit:
    """Take the strings in ``unwanted`` out of the array at ``path``, keeping everything else.

    An item alone on its line goes with its line; otherwise it goes with one comma beside it.
    """
    data = _parse(text)
    entry = scan(text).value(path)
    if entry is None or text[entry.value_start] != "[":
        raise UneditableTableError(f"{render_key_path(path)} is not an array")
    items = array_items(text, entry.value_start)
    for start, end in reversed(items):
        if tomllib.loads(f"v = {text[start:end]}")["v"] in unwanted:
            start, end = _item_span(text, start, end, entry.value_start)
            text = text[:start] + text[end:]
    expected = copy.deepcopy(data)
    node = expected
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = [item for item in node[path[-1]] if item not in unwanted]
    edit = Edit(text)
    if not _same(_parse(text), expected):
        raise UneditableTableError(f"removing from {render_key_path(path)} would change more")
    return edit


def _item_span(text: str, start: int, end: int, array_start: int) -> tuple[int, int]:
    """What to delete with an array item: its line when alone on it, else one comma beside it."""
    line_start = text.rfind("\n", 0, start) + 1
    after = re.compile(r"[ \t]*,?[ \t]*(#[^\n]*)?\n").match(text, end)
    if line_start > array_start and not text[line_start:start].strip() and after:
        return line_start, after.end()
    following = re.compile(r"[ \t]*,[ \t]*").match(text, end)
    if following:
        return start, following.end()
    preceding = re.compile(r",[ \t]*$").search(text, array_start, start)
    return (preceding.start(), end) if preceding else (start, end)


def _insert(layout: Layout, data: dict, path: KeyPath, value: Any) -> Edit:
    """Add ``path`` (absent) inside its deepest existing ancestor, in that ancestor's form."""
    parent = path[:-1]
    while parent and not _is_table(data, parent):
        parent = parent[:-1]
    relative = path[len(parent):]
    inline = layout.inline(parent) if parent else None
    if inline is not None:
        return _into_inline(layout, inline, (*parent[len(inline.path):], *relative), value)
    dotted = layout.dotted(parent) if parent else []
    if dotted:
        anchor = dotted[-1]
        prefix = anchor.raw[: len(parent) - len(anchor.table)]
        return _dotted_lines(layout, anchor, prefix, relative, value, _style_near(layout, parent))
    header = layout.header(parent) if parent else None
    if not isinstance(value, Mapping) and len(relative) == 1 and (header or not parent):
        return _body_line(layout, header, relative[0], value)
    table, values = (path, value) if isinstance(value, Mapping) else (
        path[:-1], {path[-1]: value})
    return _header_block(layout, parent, table, values, _style_near(layout, parent))


def _beside_sibling(
    layout: Layout, sibling: KeyPath, path: KeyPath, values: Mapping[str, Any]
) -> Edit:
    """Add ``path`` written as ``sibling`` is: inline, dotted keys, or headers after it."""
    text = layout.text
    written = layout.value(sibling)
    if written is not None and written.inline and not written.nested:
        line = _line(written.indent, (*written.raw[:-1], _key(path[-1], _quote_of(written.raw))),
                     render_inline(values, literal=_literal_under(layout, sibling)))
        return Edit(_insert_at(text, written.end, line))
    inline = layout.inline(path[:-1])
    if inline is not None:
        return _into_inline(layout, inline, path[len(inline.path):], values)
    dotted = layout.dotted(sibling)
    if dotted:
        anchor = dotted[-1]
        prefix = anchor.raw[: len(path) - 1 - len(anchor.table)]
        style = _style_near(layout, sibling)
        return _dotted_lines(layout, anchor, prefix, path[-1:], values, style)
    return _header_block(layout, path[:-1], path, values, _sibling_style(layout, sibling))


# --- the three forms of an addition -------------------------------------------------------


def _body_line(layout: Layout, header: Header | None, key: str, value: Any) -> Edit:
    """``key = value`` at the end of a table's own body (the root's when ``header`` is None)."""
    table = header.path if header else ()
    body = [e for e in layout.entries if e.table == table and not e.in_array]
    if body:
        where, indent = body[-1].end, body[-1].indent
    elif header is not None:
        where, indent = header.end, header.indent + ("  " if header.indent else "")
    else:
        where, indent = 0, ""
    literal = _literal_under(layout, table)
    line = _line(indent, (_key(key, _file_quote(layout)),), render_value(value, literal=literal))
    return Edit(_insert_at(layout.text, where, line))


def _dotted_lines(
    layout: Layout, anchor: Entry, prefix: tuple[str, ...], relative: KeyPath, value: Any,
    style: Style,
) -> Edit:
    """Dotted-key lines (``prefix.relative.leaf = value``) right after ``anchor``."""
    quote = _quote_of(anchor.raw) or style.quote
    lines = "".join(
        _line(anchor.indent, (*prefix, *(_key(part, quote) for part in leaf)), rendered)
        for leaf, rendered in _leaves(relative, value, literal=style.literal)
    )
    return Edit(_insert_at(layout.text, anchor.end, lines))


def _header_block(
    layout: Layout, parent: KeyPath, table: KeyPath, values: Mapping[str, Any], style: Style
) -> Edit:
    """``[table]`` with ``values`` (sub-tables as the style says), after ``parent``'s tables."""
    raw = _raw_path(layout, table, style.quote)
    block = _table_lines(raw, values, style)
    text = layout.text
    where = _region_end(layout, parent)
    while where < len(text) and _is_blank_line(text, where):
        where = text.index("\n", where) + 1 if "\n" in text[where:] else len(text)
    lead = "" if where == 0 or _blank_before(text, where) else "\n"
    if where == len(text) and text and not text.endswith("\n"):
        lead = "\n" + lead
    return Edit(text[:where] + lead + block + "\n" + text[where:])


def _table_lines(raw: tuple[str, ...], values: Mapping[str, Any], style: Style) -> str:
    """A header and its body; sub-tables follow as headers (or stay in the body, per style)."""
    header = f"{style.header_indent}[{'.'.join(raw)}]\n"
    body = ""
    tables = []
    for key, value in values.items():
        if isinstance(value, Mapping) and style.options == "header":
            tables.append((key, value))
            continue
        if isinstance(value, Mapping) and style.options == "dotted":
            for leaf, rendered in _leaves((key,), value, literal=style.literal):
                body += _line(style.body_indent, tuple(_key(p, style.quote) for p in leaf),
                              rendered)
            continue
        body += _line(style.body_indent, (_key(key, style.quote),),
                      render_value(value, literal=style.literal))
    for key, value in tables:
        body += "\n" + _table_lines((*raw, _key(key, style.quote)), value, style.nested())
    return header + body


def _into_inline(layout: Layout, inline, relative: KeyPath, value: Any) -> Edit:
    """Add ``relative = value`` inside an inline table: the one edit that changes a line."""
    text = layout.text
    end = inline.close
    while text[end - 1] in " \t":
        end -= 1
    literal = _literal_under(layout, inline.path)
    rendered = (render_inline(value, literal=literal) if isinstance(value, Mapping)
                else render_value(value, literal=literal))
    pair = f"{'.'.join(_key(p, _file_quote(layout)) for p in relative)} = {rendered}"
    addition = f" {pair} " if inline.empty else f", {pair}"
    edited = text[:end] + addition + text[end:]
    return Edit(edited, _inline_note(text, inline.open, inline.path, relative[0]))


def _inline_note(text: str, offset: int, table: KeyPath, key: str) -> str:
    line = text.count("\n", 0, offset) + 1
    return (f"line {line} changed, not only added to: [{render_key_path(table)}] is an inline "
            f"table, which TOML keeps on one line, so {key} was written inside it")


# --- where: regions, blank lines ------------------------------------------------------------


def _region_end(layout: Layout, parent: KeyPath) -> int:
    """The end of the last run of tables under ``parent`` (the end of the file for the root)."""
    headers = layout.headers_under(parent) if parent else []
    if not headers:
        return len(layout.text)
    statements = layout.statements
    index = statements.index(headers[-1])
    end = headers[-1].end
    for statement in statements[index + 1:]:
        if isinstance(statement, Header) and statement.path[: len(parent)] != parent:
            break
        end = statement.end
    return end


def _insert_at(text: str, where: int, lines: str) -> str:
    if where == len(text) and text and not text.endswith("\n"):
        lines = "\n" + lines
    return text[:where] + lines + text[where:]


def _is_blank_line(text: str, offset: int) -> bool:
    end = text.find("\n", offset)
    return not text[offset: len(text) if end < 0 else end].strip()


def _blank_before(text: str, offset: int) -> bool:
    """True at the start of the text, or when the line before ``offset`` is blank."""
    if offset == 0:
        return True
    if text[offset - 1] != "\n":
        return False
    start = text.rfind("\n", 0, offset - 1) + 1
    return not text[start:offset].strip()


# --- how: styles, keys and values ------------------------------------------------------------


def _sibling_style(layout: Layout, sibling: KeyPath) -> Style:
    """The look of a runtime written with headers: indentation, quotes, how ``options`` is."""
    own = layout.header(sibling) or layout.headers_under(sibling)[0]
    body = _body_indent(layout, own)
    options_path = (*sibling, "options")
    options_header = layout.header(options_path)
    if options_header is not None:
        sub_header, sub_body = options_header.indent, _body_indent(layout, options_header)
    else:
        sub_header, sub_body = body, body + _step(own.indent, body)
    options = "header"
    if options_header is None and getattr(layout.value(options_path), "inline", False):
        options = "inline"
    elif options_header is None and layout.dotted(options_path):
        options = "dotted"
    return Style(own.indent, body, sub_header, sub_body, _literal_under(layout, sibling),
                 _quote_of(own.raw) or _file_quote(layout), options)


def _style_near(layout: Layout, parent: KeyPath) -> Style:
    """The look of new tables under ``parent``: its body's indentation, the file's quotes."""
    quote = _file_quote(layout)
    literal = _literal_under(layout, parent)
    header = layout.header(parent) if parent else None
    if header is None:
        return Style(literal=literal, quote=quote)
    body = _body_indent(layout, header)
    step = _step(header.indent, body)
    return Style(body, body + step, body + step, body + 2 * step, literal, quote)


def _body_indent(layout: Layout, header: Header) -> str:
    for entry in layout.entries:
        if entry.start >= header.end and entry.table == header.path:
            return entry.indent
        if entry.start >= header.end:
            break
    return header.indent + ("  " if header.indent else "")


def _literal_under(layout: Layout, table: KeyPath) -> bool:
    """True when the first string written under ``table`` is a 'literal string'."""
    size = len(table)
    for entry in (*layout.entries, *layout.inline_values):
        if entry.path[:size] == table and not entry.inline:
            first = layout.text[entry.value_start]
            if first in "\"'":
                return first == "'"
    return False


def _file_quote(layout: Layout) -> str:
    """The quote the file uses for quoted keys (double unless it only uses single ones)."""
    for header in layout.headers:
        quote = _quote_of(header.raw)
        if quote:
            return quote
    return '"'


def _quote_of(raw: tuple[str, ...]) -> str:
    return next((part[0] for part in raw if part[:1] in ("'", '"')), "")


def _raw_path(layout: Layout, path: KeyPath, quote: str) -> tuple[str, ...]:
    """``path`` as the file writes its longest known prefix, the rest in ``quote`` style."""
    best: tuple[str, ...] = ()
    for header in layout.headers:
        size = 0
        while size < min(len(header.path), len(path)) and header.path[size] == path[size]:
            size += 1
        if size > len(best):
            best = header.raw[:size]
    return (*best, *(_key(part, quote) for part in path[len(best):]))


def _key(part: str, quote: str) -> str:
    if _BARE_KEY.match(part):
        return part
    if quote == "'" and "'" not in part and not any(ord(c) < 32 or c == "\x7f" for c in part):
        return f"'{part}'"
    return render_value(part, literal=False)


def _line(indent: str, raw_key: tuple[str, ...], rendered: str) -> str:
    return f"{indent}{'.'.join(raw_key)} = {rendered}\n"


def _leaves(prefix: KeyPath, value: Any, *, literal: bool):
    """``(key path, rendered value)`` for every non-table value under ``prefix``."""
    if isinstance(value, Mapping) and value:
        for key, inner in value.items():
            yield from _leaves((*prefix, key), inner, literal=literal)
    else:
        rendered = (render_inline(value, literal=literal) if isinstance(value, Mapping)
                    else render_value(value, literal=literal))
        yield prefix, rendered


def render_value(value: Any, *, literal: bool) -> str:
    """A TOML value; strings as 'literal strings' when asked and possible."""
    import tomlkit  # lazy: only edits pay for it

    if isinstance(value, Mapping):
        return render_inline(value, literal=literal)
    if isinstance(value, str) and literal:
        try:
            return tomlkit.string(value, literal=True).as_string()
        except ValueError:  # a quote or control character: a basic string instead
            pass
    if isinstance(value, list):
        return "[" + ", ".join(render_value(item, literal=literal) for item in value) + "]"
    return tomlkit.item(value).as_string()


def render_inline(values: Mapping[str, Any], *, literal: bool) -> str:
    """An inline table ``{ key = value, … }``."""
    if not values:
        return "{}"
    pairs = ", ".join(f"{_key(key, DOUBLE)} = {render_value(inner, literal=literal)}"
                      for key, inner in values.items())
    return "{ " + pairs + " }"


# --- checks ---------------------------------------------------------------------------------


def _parse(text: str) -> dict[str, Any]:
    """The data of ``text`` (shared with the other readers of the same text: copied before any
    change)."""
    return loads_bounded(text, "<edited text>")


def _is_table(data: Mapping, path: KeyPath) -> bool:
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return isinstance(node, Mapping)


def _check_tables(data: Mapping, path: KeyPath) -> None:
    """Raise when a key on ``path`` holds a value that is not a table."""
    node: Any = data
    for depth, key in enumerate(path):
        if key not in node:
            return
        node = node[key]
        if not isinstance(node, Mapping):
            raise UneditableTableError(f"{render_key_path(path[: depth + 1])} is {_kind(node)}")


_KINDS = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array, not a table"
    name = _KINDS.get(type(value), "a date or time")
    return f"{name} value, not a table"


def _verify(before: str, data: dict, edit: Edit, path: KeyPath, value: Any) -> None:
    """The edited text must parse to the original data with exactly ``path`` set to ``value``."""
    expected = copy.deepcopy(data)
    node = expected
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = copy.deepcopy(value) if not isinstance(value, Mapping) else _plain(value)
    try:
        result = _parse(edit.text)
    except (tomllib.TOMLDecodeError, InputError) as error:
        raise UneditableTableError(
            f"adding {render_key_path(path)} here would not be valid TOML ({error})"
        ) from None
    if not _same(result, expected):
        raise UneditableTableError(
            f"adding {render_key_path(path)} here would change other settings"
        )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(inner) for key, inner in value.items()}
    return copy.deepcopy(value)


def _same(left: Any, right: Any) -> bool:
    """Equal as TOML data: same types (``1`` is not ``true``), NaN equal to NaN."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_same, left, right))
    if type(left) is not type(right):
        return False
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return left == right


def remove_empty_headers(text: str, paths: list[KeyPath], *, keep_blank_lines: bool = False
                         ) -> str:
    """Remove the ``[header]`` of each table in ``paths`` whose body holds nothing now but blank
    lines and comments (which stay): gpuready wrote it, and the table exists without it or not
    at all."""
    for path in sorted(paths, key=len, reverse=True):
        layout = scan(text)
        header = layout.header(path)
        if header is None:
            continue
        starts = sorted(h.start for h in layout.headers)
        end = next((start for start in starts if start > header.start), len(text))
        lines = text[header.end:end].splitlines(keepends=True)
        if any(line.strip() and not line.lstrip().startswith("#") for line in lines):
            continue
        kept = "".join(line for line in lines if line.strip())  # the operator's comments
        if keep_blank_lines:  # only where the header went (unconfigure)
            text = _trim_end(_joined(text[:header.start], kept + text[end:]))
        else:
            text = _trim_blank_lines(text[:header.start] + kept + text[end:])
    return text


def _joined(left: str, right: str) -> str:
    """``left`` and ``right`` where a part between them went: as many blank lines where they meet
    as there were on the larger side of the part, and every blank line elsewhere as it was."""
    head = left.rstrip("\n")
    tail = right.lstrip("\n")
    if not head:
        return tail
    before = left[len(head):].count("\n") - 1  # the blank lines above the part that went
    after = len(right) - len(tail)  # and below it
    return head + "\n" * (1 + max(before, after, 0)) + tail


def _trim_end(text: str) -> str:
    """No blank line at the end."""
    return text.rstrip("\n") + "\n" if text.strip() else text


def _trim_blank_lines(text: str) -> str:
    """No run of more than one blank line where tables went, and none at the end."""
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip("\n") + "\n" if text.strip() else text
