"""One containerd config file as read: its text, its ``tomllib`` data (or the syntax error), and
the options it is read with.

The effective model (:mod:`gpuready.containerd.model`) reads the node's files through these, and
so do the rules (:mod:`gpuready.rules.context`), which import them from here: the model sits
below the rules. A file's positions are computed only when a problem needs one, so a clean file
costs a ``tomllib`` parse and a few dictionary look-ups.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gpuready import sametext
from gpuready.compat import tomllib
from gpuready.containerd.document import loads_bounded, toml_error
from gpuready.containerd.semantics import Semantics
from gpuready.containerd.versions import VERSIONS, ConfigVersion, KeyPath, render_key_path
from gpuready.errors import InputError
from gpuready.node import Node
from gpuready.problems import Problem, Severity
from gpuready.rules.locate import Locator, Position
from gpuready.textfile import without_bom

# Config texts (by hash) parsed once and not kept yet. A parse is kept for other nodes with the
# same text (:mod:`gpuready.sametext`) the second time its text is seen: where every node's text
# differs, none is kept alive, where it would only cost memory and garbage collection. Bounded:
# forgotten whole at the limit (a text then waits for a third sighting).
_SEEN_ONCE: set[int] = set()
_SEEN_ONCE_LIMIT = 65536
# The last texts parsed: one command parses each config text once.
_RECENT = sametext.Recent()


class Options:
    """What the user asked to check against: the runtime's name and the node's root. Equal
    options compare and hash equal; they are not changed once made."""

    def __init__(self, runtime_name: str = "nvidia", root: Path = Path("/")) -> None:
        self.runtime_name = runtime_name
        self.root = root

    def _key(self) -> tuple[str, Path]:
        return (self.runtime_name, self.root)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Options(runtime_name={self.runtime_name!r}, root={self.root!r})"

    @functools.cached_property
    def node(self) -> Node:
        """The node the root names: every file is read through it (one :class:`Node` per
        ``Options``, so what a read-only pass remembers about the node is shared by every rule)."""
        return Node(self.root)


class ParsedText:
    """What a config text alone gives: its ``tomllib`` data, where its keys are, and which keys
    containerd does not read. Files with the same text may share one (:mod:`gpuready.sametext`),
    so nothing here names the file, and nothing changes it after it is made."""

    def __init__(self, text: str, data: dict[str, Any] | None) -> None:
        self.text = text
        self.data = data
        self._locator: Locator | None = None
        self._unknown_keys: dict[int, list[Any]] = {}

    @property
    def locator(self) -> Locator:
        """The positions of the text's keys, computed on first use."""
        if self._locator is None:
            self._locator = Locator(self.text)
        return self._locator

    def unknown_keys(self, version: int) -> list[Any]:
        """The keys the line reading config ``version`` ignores, computed once."""
        found = self._unknown_keys.get(version)
        if found is None:
            from gpuready.containerd.keyschema import unknown_keys

            found = self._unknown_keys[version] = unknown_keys(self.data or {}, version)
        return found


class FileContext:
    """One containerd config file as written: text, ``tomllib`` data (or the syntax error)."""

    def __init__(self, path: Path, text: str, *, options: Options, display: str | None = None):
        self.path = path
        self.display = display or str(path)
        # What the parsers see: containerd accepts a leading byte order mark, tomllib does not,
        # and an editor does not show it, so lines and columns are those of the text without it.
        self.text = without_bom(text)
        self.options = options
        self.semantics: Semantics | None = None
        self.syntax_error: InputError | None = None
        self.parsed: ParsedText = sametext.get("toml", self.text) or self._recent() or self._parse()
        self.data: dict[str, Any] | None = self.parsed.data

    def _recent(self) -> ParsedText | None:
        """The parse of this text kept from a moment ago; seen twice now, so also shared."""
        parsed = _RECENT.get(self.text)
        if parsed is not None:
            sametext.put("toml", self.text, parsed, size=len(self.text))
        return parsed

    def _parse(self) -> ParsedText:
        try:
            parsed = ParsedText(self.text, loads_bounded(self.text, self.display))
        except InputError as error:  # nested too deep; names the file: never shared
            self.syntax_error = error
            return ParsedText(self.text, None)
        except tomllib.TOMLDecodeError as error:
            self.syntax_error = toml_error(str(error), self.text, self.display)
            return ParsedText(self.text, None)
        _RECENT.put(self.text, parsed)
        seen = hash(self.text)
        if seen in _SEEN_ONCE:
            sametext.put("toml", self.text, parsed, size=len(self.text))
        else:
            if len(_SEEN_ONCE) >= _SEEN_ONCE_LIMIT:
                _SEEN_ONCE.clear()
            _SEEN_ONCE.add(seen)
        return parsed

    @property
    def has_version(self) -> bool:
        """True when the file has a top-level ``version`` key."""
        return self.data is not None and "version" in self.data

    @property
    def version(self) -> int | None:
        """The file's config version as containerd reads it (1 when absent), None when invalid."""
        if self.data is None:
            return None
        value = self.data.get("version", 1)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value

    @property
    def spec(self) -> ConfigVersion | None:
        """The version table entry, or None when the version is not one containerd has."""
        version = self.version
        return VERSIONS.get(version) if version is not None else None

    def unknown_keys(self) -> list[Any]:
        """The keys containerd does not read here (:func:`gpuready.containerd.keyschema.
        unknown_keys`), computed once for the rules that ask."""
        spec = self.spec
        if self.data is None or spec is None:
            return []
        return self.parsed.unknown_keys(spec.number)

    @property
    def locator(self) -> Locator:
        """The positions of this file's keys, computed on first use."""
        return self.parsed.locator

    def position(self, key_path: KeyPath) -> Position | None:
        """Where ``key_path`` is (or belongs) in this file."""
        return self.locator.locate(key_path) if key_path else None

    def report(
        self,
        rule: Any,
        message: str,
        key_path: KeyPath = (),
        *,
        fix: str = "",
        severity: Severity | None = None,
        position: Position | None = None,
    ) -> Problem:
        """A problem of ``rule`` in this file at ``key_path`` (or an explicit position)."""
        where = position or self.position(key_path)
        return Problem(
            rule=rule.name,
            severity=severity or rule.severity,
            message=message,
            file=self.display,
            key_path=render_key_path(tuple(key_path)) if key_path else "",
            line=where[0] if where else None,
            column=where[1] if where else None,
            fix=fix,
        )
