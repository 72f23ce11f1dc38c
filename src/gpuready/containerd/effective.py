"""The effective config: what one containerd line builds from a main file and its imports.

The files are found and merged by :mod:`gpuready.containerd.imports` (the one merge model: 1.x
replaces a whole plugin table from a later file, 2.x merges key by key); this module adds where
each runtime came from, and :func:`staged` puts candidate files at their final import paths in a
temporary folder, so gpuready (and the node's own ``containerd config dump``) can read the
configuration as it will be before anything is written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.files import FileContext, Options
from gpuready.containerd.imports import entry_path, load_imports, merge
from gpuready.containerd.versions import ConfigVersion, spec_of
from gpuready.node import FileKind, Node
from gpuready.records import MutableRecord, Record


class EffectiveConfig(MutableRecord):
    """The merged config, the files it was read from (main first) and the merge rule used."""

    main: Path
    files: list[FileContext]
    missing: list[tuple[FileContext, str]]
    major: int
    data: dict[str, Any]
    spec: ConfigVersion

    def runtime_sources(self) -> dict[str, list[Path]]:
        """For each runtime containerd loads, the files whose tables make it up, in load order.

        On 1.x a file holding the CRI plugin table replaces the whole table, so only the runtimes
        of the last such file survive; on 2.x every file naming the runtime contributes keys.
        """
        sources: dict[str, list[Path]] = {}
        for file in self.files:
            if facts.lookup(file.data, self.spec.cri_path) is None:
                continue
            if self.major == 1:
                sources = {}
            for name in facts.runtimes(file.data, self.spec):
                sources.setdefault(name, []).append(file.path)
        loaded = facts.runtimes(self.data, self.spec)
        return {name: paths for name, paths in sources.items() if name in loaded}


def load_effective(
    main: Path, *, root: Path, major: int, exclude: Path | None = None
) -> EffectiveConfig:
    """Read ``main`` and everything it imports and merge them as containerd ``major``.x does.

    ``exclude`` leaves one file out (the drop-in gpuready is about to rewrite). A file that is
    not valid TOML raises its one-line error.
    """
    options = Options(root=root)
    first = FileContext(main, _read(main, root), options=options)
    if first.syntax_error:
        raise first.syntax_error
    files, missing = load_imports(first, options=options)
    for file in files:
        if file.syntax_error:
            raise file.syntax_error
    if exclude is not None:
        files = [f for f in files if f is first or not same_file(f.path, exclude)]
    data, _ = merge(files, major=major)
    return EffectiveConfig(main, files, missing, major, data, spec_of(first.data, path=main))


def same_file(one: Path, other: Path) -> bool:
    """True when both paths name one file, links followed."""
    return os.path.realpath(one) == os.path.realpath(other)


def _read(path: Path, root: Path) -> str:
    return Node(root).read_text(path, kind=FileKind.CONFIG)


@contextlib.contextmanager
def staged(
    main: Path, *, root: Path, candidates: Mapping[Path, str | None]
) -> Iterator[Stage]:
    """Copies of ``main`` and every file it imports, as they will be once ``candidates`` are
    written (None: the file is removed), in a temporary folder that mirrors the node.

    Each copy's ``imports`` entries are rewritten to the copies in the folder, relative ones as
    gpuready resolves them (inside the root), so no copy reaches a file outside the folder. The
    folder is removed afterwards.
    """
    import tempfile  # only a pre-flight through containerd's binary stages the files

    with tempfile.TemporaryDirectory(prefix="gpuready-stage-") as folder:
        stage = Stage(Path(folder), root)
        texts: dict[Path, str] = {}
        with contextlib.suppress(Exception):  # an unreadable current file: candidates decide
            options = Options(root=root)
            current = FileContext(main, _read(main, root), options=options)
            for file in load_imports(current, options=options)[0]:
                texts[file.path] = file.text
        for path, text in candidates.items():
            if text is None:
                texts.pop(Path(path), None)
            else:
                texts[Path(path)] = text
        for path, text in texts.items():
            stage.put(path, text)
        yield stage


class Stage(Record):
    """A temporary folder holding copies of node files at their host paths."""

    folder: Path
    root: Path

    def path(self, host_path: Path) -> Path:
        """Where the copy of ``host_path`` lies in the folder."""
        return self.folder.joinpath(*Path(os.path.abspath(host_path)).parts[1:])

    def host(self, staged_path: Path) -> Path:
        """The host path a copy stands for."""
        return Path("/") / Path(staged_path).relative_to(self.folder)

    def put(self, host_path: Path, text: str) -> None:
        """Write the copy of ``host_path``, its absolute imports pointing into the folder."""
        target = self.path(host_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self._redirected(text, host_path), encoding="utf-8")

    def _redirected(self, text: str, host_path: Path) -> str:
        import tomlkit

        try:
            document = tomlkit.parse(text)
        except Exception:  # not TOML: containerd will say so when it reads the copy
            return text
        entries = document.get("imports")
        if not isinstance(entries, list) or not entries:
            return text
        node = Node(self.root)
        if not node.is_host and not node.contains(host_path):
            return text  # the user's own file outside the root: its entries resolve beside it
        document["imports"] = [
            str(self.path(entry_path(entry, Path(host_path), node=node)))
            if isinstance(entry, str) else entry
            for entry in entries
        ]
        return document.as_string()


def render_effective(effective: EffectiveConfig) -> str:
    """The effective config as TOML, headed by how it was built, each runtime's header marked
    with the file(s) it came from.

    Written in one pass over the data (time linear in its keys): values first, then each table
    under its full header, as ``tomlkit`` lays out a document built from the same data.
    """
    rule = ("an import replaces a whole plugin table" if effective.major == 1
            else "imports merge key by key")
    lines = [f"# effective config of {effective.main}, as containerd {effective.major}.x "
             f"builds it ({rule})", "# files, in load order:"]
    lines += [f"#   {file.path}" for file in effective.files]
    lines += [f"# import {entry!r} in {file.path} names no file" for file, entry in
              effective.missing]
    comments = {(*effective.spec.runtimes_path, name): "from " + ", ".join(map(str, paths))
                for name, paths in effective.runtime_sources().items()}
    body: list[str] = []
    _write_table(body, effective.data, (), comments)
    if body and body[0].startswith("\n"):
        body[0] = body[0][1:]  # no blank line above a first header
    return "\n".join(lines) + "\n" + "".join(body)


def _write_table(out: list[str], table: Mapping[str, Any], path: tuple[str, ...],
                 comments: Mapping[tuple[str, ...], str]) -> None:
    """Append ``table``'s values as ``key = value`` lines, then its tables and arrays of
    tables under their headers (a table holding only tables gets no header of its own)."""
    import tomlkit

    for key, value in table.items():
        if not _is_table(value) and not _is_table_array(value):
            out.append(f"{tomlkit.key(key).as_string()} = {tomlkit.item(value).as_string()}\n")
    for key, value in table.items():
        below = (*path, key)
        if _is_table(value):
            if _has_header(value, below, comments):
                out.append(_header(below, comments.get(below), array=False))
            _write_table(out, value, below, comments)
        elif _is_table_array(value):
            for element in value:
                out.append(_header(below, None, array=True))
                _write_table(out, element, below, comments)


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(map(_is_table, value))


def _has_header(table: Mapping[str, Any], path: tuple[str, ...],
                comments: Mapping[tuple[str, ...], str]) -> bool:
    return (not table or path in comments
            or not all(_is_table(v) or _is_table_array(v) for v in table.values()))


def _header(path: tuple[str, ...], comment: str | None, *, array: bool) -> str:
    import tomlkit

    name = ".".join(tomlkit.key(part).as_string() for part in path)
    line = f"[[{name}]]" if array else f"[{name}]"
    return f"\n{line}" + (f" # {comment}" if comment else "") + "\n"
