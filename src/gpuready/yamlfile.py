"""Reading YAML safely and within bounds, with errors that name file, line and column.

Only the safe schema is used (no tag ever runs code). Before a document is composed, its events
are walked once to bound the work: nesting deeper than :data:`MAX_DEPTH` levels, or aliases that
expand to more than :data:`MAX_EXPANDED_NODES` nodes (a "billion laughs" document: a few lines
whose aliases expand to billions of nodes for every walk over the data), are refused with one
line. That walk and the composing use libyaml's parser when PyYAML has it (an order of magnitude
faster); a text libyaml refuses is composed again by PyYAML's own parser, whose error messages
are the ones users see. With libyaml, a text is first composed and its nodes counted: one
without aliases, shallow and small, is within both bounds as the walk would find, and is parsed
once; any other takes the walk.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gpuready.errors import InputError

MAX_DEPTH = 100
MAX_EXPANDED_NODES = 1_000_000


def yaml_error(error: Exception, path: Path | str) -> InputError:
    """A PyYAML error as a one-line :class:`InputError` at the problem's line and column."""
    mark = getattr(error, "problem_mark", None)
    reason = getattr(error, "problem", None) or str(error).splitlines()[0]
    reason = reason if is_bound_error(error) else f"invalid YAML: {reason}"
    if mark is None:
        return InputError(path, reason)
    return InputError(path, reason, line=mark.line + 1, column=mark.column + 1)


@functools.cache
def _bound_error_type() -> type:
    import yaml  # lazy: the command line starts without it

    class BoundError(yaml.MarkedYAMLError):
        """A document refused for its nesting depth or its alias expansion."""

        bound = True

    return BoundError


def is_bound_error(error: Exception) -> bool:
    """True for the error :func:`check_bounds` raises (not a syntax error: the YAML is valid)."""
    return getattr(error, "bound", False)


def _event_loader():
    import yaml  # lazy: the command line starts without it

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _loader():
    import yaml

    return yaml.SafeLoader


def check_bounds(text: str) -> None:
    """Raise a ``yaml.MarkedYAMLError`` when the text nests too deep or its aliases expand too far.

    Walks the parser's events (no recursion): each node's expanded size is one plus its
    children's, an alias counts as the full size of the node its anchor names. A syntax error
    ends the walk: composing the text reports it, with PyYAML's message.
    """
    problem = _first_bound_problem(text)
    if problem is not None:
        raise _bound_error_type()(problem=problem[0], problem_mark=problem[1])


def _first_bound_problem(text: str) -> tuple[str, Any] | None:
    import yaml

    try:
        return _walk_for_bounds(_events(text, _event_loader()))
    except yaml.YAMLError:
        # libyaml (0.2.5 and later) refuses nesting past 1,000 levels while it scans ahead, before
        # the walk counts 100: walk again with PyYAML's own parser (iterative, no such limit), which
        # reaches the bound or the real syntax error
        pass
    try:
        return _walk_for_bounds(_events(text, _loader()))
    except yaml.YAMLError:
        return None


def _walk_for_bounds(events) -> tuple[str, Any] | None:
    import yaml

    anchors: dict[str, int] = {}
    stack: list[list[Any]] = []  # [expanded size so far, anchor] per open collection
    expanded = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                return f"YAML nested deeper than {MAX_DEPTH} levels; refused", event.start_mark
            stack.append([1, event.anchor])
            expanded += 1
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            size, anchor = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            size, anchor = 1, event.anchor
            expanded += 1
        elif isinstance(event, yaml.AliasEvent):
            size, anchor = anchors.get(event.anchor, 1), None
            expanded += size
        else:
            continue
        if anchor is not None:
            anchors[anchor] = size
        if stack:
            stack[-1][0] += size
        if expanded > MAX_EXPANDED_NODES:
            return (f"YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (an "
                    "alias bomb); refused", event.start_mark)
    return None


def _events(text: str, loader_type):
    loader = loader_type(text)
    try:
        while loader.check_event():
            yield loader.get_event()
    finally:
        loader.dispose()


def compose_all(text: str) -> list[Any]:
    """The node of every document, after :func:`check_bounds`."""
    import yaml

    plain = _plainly_bounded(text)
    if plain is not None:
        return plain
    check_bounds(text)
    try:
        try:  # libyaml composes an order of magnitude faster, with the same nodes and marks
            return list(yaml.compose_all(text, Loader=_event_loader()))
        except yaml.YAMLError:  # PyYAML's own parser says what is wrong, as users know it
            return list(yaml.compose_all(text, Loader=_loader()))
    except RecursionError:  # only where libyaml stopped early and PyYAML read on: still refused
        raise _bound_error_type()(problem=f"YAML nested deeper than {MAX_DEPTH} levels; "
                                  "refused") from None


def _plainly_bounded(text: str) -> list[Any] | None:
    """libyaml's nodes of every document when they plainly keep both bounds, else None.

    Plainly: libyaml composes the text, no node is reached twice (no alias), no collection nests
    near :data:`MAX_DEPTH` and there are at most :data:`MAX_EXPANDED_NODES` nodes. Then the
    event walk of :func:`check_bounds` finds nothing (its counts are these, for a text without
    aliases) and composing gives these nodes: the text is parsed once instead of twice. Anything
    else (no libyaml, an alias, a syntax error, a deep or large text) returns None, and the full
    check decides as it always does.
    """
    import yaml

    loader = _event_loader()
    if loader is _loader():
        return None  # no libyaml: the check's walk is the one parse
    try:
        nodes = list(yaml.compose_all(text, Loader=loader))
    except (yaml.YAMLError, RecursionError):
        return None
    seen: set[int] = set()
    count, depth, level = 0, 1, nodes
    while level:  # one nesting level at a time
        below: list[Any] = []
        for node in level:
            if isinstance(node, yaml.MappingNode):
                for pair in node.value:
                    below += pair
            elif isinstance(node, yaml.SequenceNode):
                below += node.value
            else:
                continue
            if depth >= MAX_DEPTH:
                return None
        count += len(level)
        seen.update(map(id, level))
        if len(seen) != count or count > MAX_EXPANDED_NODES:
            return None  # an alias (the check's walk counts what it expands to), or too many
        level, depth = below, depth + 1
    return nodes


def safe_compose(text: str) -> Any:
    """The node of the single document in ``text`` (None when empty), after the bounds check."""
    import yaml

    nodes = compose_all(text)
    if len(nodes) > 1:
        raise yaml.MarkedYAMLError(problem="expected a single document, found more",
                                   problem_mark=nodes[1].start_mark)
    return nodes[0] if nodes else None


def construct(node: Any) -> Any:
    """The Python data of a composed node (safe schema)."""
    if node is None:
        return None
    if _stock_constructors():
        import yaml

        try:
            return _plain(node, set(), 0, yaml)
        except _NotPlain:
            pass
    # A loader that constructed a document to its end is as new (construct_document clears
    # what it kept): kept for the next call instead of setting up another for an empty text.
    try:
        loader = _spare_loaders.pop()
    except IndexError:
        loader = _loader()("")
    data = loader.construct_document(node)  # an error drops the loader, half-way as it is
    _spare_loaders.append(loader)
    return data


# Loaders that finished a document; at most one per caller constructing at the same time.
_spare_loaders: list[Any] = []

_STR, _SEQ, _MAP, _NULL, _BOOL = (f"tag:yaml.org,2002:{name}"
                                  for name in ("str", "seq", "map", "null", "bool"))


class _NotPlain(Exception):
    """A node :func:`_plain` leaves to the safe constructor."""


def _stock_constructors() -> bool:
    """True when the safe loader builds strings, nulls, booleans, lists and mappings with
    PyYAML's own constructors (nothing registered in their place)."""
    from yaml.constructor import SafeConstructor as Stock

    found = _loader().yaml_constructors
    return (found.get(_STR) is Stock.construct_yaml_str
            and found.get(_SEQ) is Stock.construct_yaml_seq
            and found.get(_MAP) is Stock.construct_yaml_map
            and found.get(_NULL) is Stock.construct_yaml_null
            and found.get(_BOOL) is Stock.construct_yaml_bool)


def _plain(node: Any, seen: set[int], depth: int, yaml: Any) -> Any:
    """What the safe constructor makes of a document of strings, nulls, booleans, lists and
    mappings with string keys, built directly (the constructor's generic machinery costs more
    than the data); raises :class:`_NotPlain` at anything else: another tag, a key that is not
    a string (a merge key among them), a node reached twice (an alias), or deep nesting.
    ``yaml``: the module (imported once by the caller, not at every node)."""
    kind = type(node)
    if kind is yaml.ScalarNode:
        if node.tag == _STR:
            return node.value
        if node.tag == _NULL:
            return None
        if node.tag == _BOOL:
            found = _loader().bool_values.get(node.value.lower())
            if found is not None:
                return found
        raise _NotPlain
    if depth >= MAX_DEPTH or id(node) in seen:
        raise _NotPlain
    seen.add(id(node))
    if kind is yaml.SequenceNode and node.tag == _SEQ:
        return [_plain(item, seen, depth + 1, yaml) for item in node.value]
    if kind is yaml.MappingNode and node.tag == _MAP:
        data: dict[str, Any] = {}
        for key, value in node.value:
            if type(key) is not yaml.ScalarNode or key.tag != _STR:
                raise _NotPlain
            data[key.value] = _plain(value, seen, depth + 1, yaml)
        return data
    raise _NotPlain


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` within bounds (None for an empty text)."""
    return construct(safe_compose(text))


def load(text: str, path: Path | str) -> Any:
    """The document's data; every YAML error (bounds included) an :class:`InputError`."""
    import yaml

    try:
        return safe_load(text)
    except yaml.YAMLError as error:
        raise yaml_error(error, path) from None


def load_mapping(text: str, path: Path | str) -> dict[str, Any]:
    """A YAML document that must be a mapping at the top level."""
    data = load(text, path)
    if not isinstance(data, dict):
        raise InputError(path, "expected a YAML mapping at the top level")
    return data
