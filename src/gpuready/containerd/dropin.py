"""``configure --drop-in``: the runtime in a file of its own, imported by the main config.

What the drop-in holds depends on how the node's containerd merges imports (measured on 1.6.20,
2.1.9 and 2.3.4):

- 2.x merges plugin tables key by key, so the drop-in holds only what gpuready owns: the runtime
  table (and ``enable_cdi`` or ``default_runtime_name`` when asked for).
- 1.x replaces a whole plugin table from an imported file: a drop-in with only the runtime would
  make runc, the sandbox image and the CNI settings vanish. There the drop-in carries a copy of
  the effective CRI table, and shadows the main file's CRI section from then on.

The main file gets an ``imports`` entry naming the drop-in only when no existing entry (a glob
such as ``conf.d/*.toml``) covers it; every other byte of it stays. The drop-in's ``version`` is
the main file's: containerd 2.3 refuses a drop-in whose version is higher.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from gpuready.containerd import facts
from gpuready.containerd.configure import (
    ConfigureRequest,
    chain,
    plan_configure,
    plan_enable_cri,
)
from gpuready.containerd.document import ConfigFile, load_config_text, parse_for_edit, render_edit
from gpuready.containerd.effective import EffectiveConfig, load_effective
from gpuready.containerd.versions import render_key_path
from gpuready.engines.crio import facts as crio_facts
from gpuready.engines.docker import facts as docker_facts
from gpuready.errors import InputError, UsageError
from gpuready.node import FileKind, Node
from gpuready.paths import CDI_DIRS, CONTAINERD_CONFIG, CONTAINERD_DROPIN_DIR, READ_WHOLE_FOLDERS
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.terminal import has_control

DEFAULT_DROP_IN = CONTAINERD_DROPIN_DIR / "99-nvidia.toml"
# The first line of every drop-in gpuready writes: how a later run knows the file is its own.
MARKER = "# Written by gpuready"
_GLOB_CHARS = ("*", "?", "[")


class DropIn(Record):
    """Where the drop-in goes: its host path, and the ``imports`` entry that names it."""

    path: Path
    entry: str


def drop_in_target(path: str | None, *, root: Path, main: Path | None = None) -> DropIn:
    """The drop-in for ``--drop-in [PATH]``: a node path (under ``--root``), by default
    ``/etc/containerd/conf.d/99-nvidia.toml``.

    Refused (:class:`UsageError`, nothing written): a path with control or glob characters, one
    that names a folder (a trailing ``/``, or an existing folder), and any file containerd must
    not take as a drop-in (:func:`_require_drop_in_place`). ``main`` is the config the drop-in is
    imported by (``--config``; by default the node's ``/etc/containerd/config.toml``).
    """
    if path:
        _require_plain_file_name(path)
    node = PurePosixPath(path or DEFAULT_DROP_IN)
    if node.is_absolute():
        target = DropIn(Node(root).path(node), str(node))
    elif Path(root) != Path("/"):
        raise UsageError(f"--drop-in {path}: give the node path (absolute) with --root")
    else:
        host = Path(os.path.abspath(node))
        target = DropIn(host, str(host))
    if path:
        _require_drop_in_place(path, target, root=root, main=main)
    return target


def _require_plain_file_name(path: str) -> None:
    """Refuse a ``--drop-in`` that cannot name one ordinary file of the node."""
    from gpuready.containerd.record import RECORD_SUFFIX
    from gpuready.fsio import BACKUP_SUFFIX

    problem = None
    if has_control(path):
        problem = "holds a control character"
    elif any(char in path for char in _GLOB_CHARS):
        problem = ("holds a glob character (*, ? or [): containerd would read it as a pattern; "
                   "give the one file to write")
    elif path.rsplit("/", 1)[-1] in ("", ".", ".."):
        problem = "names a folder: give the file to write in it (such as 99-nvidia.toml)"
    elif path.endswith((BACKUP_SUFFIX, RECORD_SUFFIX)):
        problem = "is the name of gpuready's own backup or record: choose another file name"
    if problem is not None:
        raise UsageError(f"--drop-in {path!r}: {problem}; nothing written")


# Where a drop-in must never go: folders another reader takes every file of as its own.
# CDI: every spec in /etc/cdi and /var/run/cdi is read (/work/shared/reference/cdi.md); /run/cdi
# is the same folder on a node where /var/run links to /run (FHS 3.0, 5.13), even when the link
# is missing from a sandbox tree. CRI-O: every file in crio.conf.d (crio.conf.d(5)).
_FOREIGN_FOLDERS: tuple[tuple[PurePosixPath, str], ...] = (
    *((folder, "where CDI specs are read") for folder in (*CDI_DIRS, PurePosixPath("/run/cdi"))),
    (crio_facts.DROPIN_DIR, "CRI-O's drop-in folder, every file of which CRI-O reads"),
)
_FOREIGN_FILES: tuple[tuple[PurePosixPath, str], ...] = (
    (docker_facts.DAEMON_JSON, "Docker's config"),
    (crio_facts.MAIN_CONFIG, "CRI-O's config"),
)
_GOOD_PATH_HINT = f"give a .toml file containerd imports, such as {DEFAULT_DROP_IN}"


def _require_drop_in_place(path: str, target: DropIn, *, root: Path, main: Path | None) -> None:
    """Refuse a drop-in that is not a TOML file of containerd's own: the main config, one of
    gpuready's files beside a config (its journal), another engine's config, or a file in a
    folder CDI or CRI-O read whole. Judged on the node path as named and as its links lead."""
    node = Node(root)
    named, resolved = _node_paths(node, target.path)
    mains = {CONTAINERD_CONFIG, *(_node_paths(node, main) if main is not None else ())}
    problem = None
    for candidate in dict.fromkeys((named, resolved)):
        problem = problem or _misplaced(candidate, mains=mains)
    if problem is None and not _is_toml_name(named.name):
        problem = "is not a file name ending in .toml: containerd reads a drop-in as TOML"
    if problem is not None:
        raise UsageError(f"--drop-in {path!r}: {problem}; {_GOOD_PATH_HINT}; nothing written")


def _node_paths(node: Node, host: Path) -> tuple[PurePosixPath, PurePosixPath]:
    """The node path of ``host`` as named, and where its links lead."""
    absolute = Path(os.path.abspath(host))
    return (PurePosixPath(node.node_path(absolute)),
            PurePosixPath(node.node_path(node.resolve(absolute))))


def _misplaced(candidate: PurePosixPath, *, mains: set[PurePosixPath]) -> str | None:
    """Why ``candidate`` (a node path) is no place for a drop-in, or None."""
    if candidate in mains:
        return f"is the main config {candidate} itself"
    if ".gpuready." in candidate.name:
        return f"{candidate.name} is a name gpuready keeps for its own files (journal, record)"
    for file, what in _FOREIGN_FILES:
        if candidate == file:
            return f"{candidate} is {what}"
    for folder, what in _FOREIGN_FOLDERS:
        if candidate == folder or folder in candidate.parents:
            return f"lies in {folder}, {what}"
    if candidate.parent.name in READ_WHOLE_FOLDERS:
        return f"lies in {candidate.parent}, a folder another engine reads every file of"
    return None


def _is_toml_name(name: str) -> bool:
    return name.endswith(".toml") and len(name) > len(".toml")


def plan_drop_in(
    main: ConfigFile, target: DropIn, request: ConfigureRequest, *, root: Path, major: int
) -> list[Plan]:
    """The drop-in's plan, then the main file's (its ``imports`` entry, or a no-op saying which
    entry already covers the drop-in)."""
    existing = Node(root).read_text_or_none(target.path, kind=FileKind.CONFIG)
    if existing is not None and not existing.startswith(MARKER):
        raise InputError(
            target.path,
            "exists and was not written by gpuready; nothing written (choose another "
            "--drop-in PATH, or register in the file itself with --config)",
        )
    effective = load_effective(main.path, root=root, major=major, exclude=target.path)
    shown_main = Node(root).node_path(main.path)  # the comment must hold on the node
    base = load_config_text(drop_in_base(effective, shown_main, major=major), target.path)
    # disabled_plugins is the main file's: --enable-cri edits it there, never in the drop-in
    planned = plan_configure(base, request._replace(enable_cri=False), context=effective.data)
    text = planned.after.rstrip("\n") + "\n"  # the table's trailing blank line: none at the end
    name = request.runtime.name
    if existing == text:
        summary = f"drop-in already holds runtime {name}"
    else:
        summary = f"{'update' if existing else 'write'} drop-in with runtime {name}"
    notes = planned.notes + _shadow_notes(effective, main.path, major=major)
    drop = Plan(target.path, existing, text, summary, notes)
    parts = [lambda current: plan_import(current, target, effective=effective, root=root)]
    if request.enable_cri:
        parts.append(plan_enable_cri)
    return [drop, chain(main, parts)]


def drop_in_base(effective: EffectiveConfig, main: PurePosixPath | Path, *, major: int) -> str:
    """The drop-in before the runtime goes in: the marker, a word on what it is, ``version``,
    and on 1.x the copy of the effective CRI table."""
    spec = effective.spec
    lines = [f"{MARKER} (configure --drop-in): the NVIDIA runtime for containerd,",
             f"# imported by {main}. 'gpuready unconfigure' removes it."]
    cri = facts.lookup(effective.data, spec.cri_path)
    if major == 1 and isinstance(cri, dict):
        header = render_key_path(spec.cri_path)
        lines += [
            "# containerd 1.x replaces a whole plugin table from an imported file, so this",
            f"# file carries a copy of [{header}]",
            "# as the main file and its other imports build it, and shadows that section of",
            "# the main file: after editing it there, run 'gpuready configure --drop-in' again.",
        ]
    text = "\n".join(lines) + f"\nversion = {spec.number}\n"
    if major == 1 and isinstance(cri, dict):
        import tomlkit

        document = tomlkit.document()
        plugins = tomlkit.table(is_super_table=True)
        plugins.add(spec.cri_plugin, tomlkit.item(cri))
        document.add("plugins", plugins)
        text += "\n" + document.as_string()
    return text


def _shadow_notes(effective: EffectiveConfig, main: Path, *, major: int) -> tuple[str, ...]:
    if major != 1 or facts.lookup(effective.data, effective.spec.cri_path) is None:
        return ()
    header = render_key_path(effective.spec.cri_path)
    return (
        f"containerd 1.x replaces a whole plugin table from an import: the drop-in carries a copy "
        f"of [{header}] and shadows it in {main}; after editing that section there, run "
        "'gpuready configure --drop-in' again",
    )


def covering_entry(effective: EffectiveConfig, target: DropIn, *, root: Path) -> str | None:
    """The ``imports`` entry of the main file or its imports that already loads the drop-in."""
    wanted = Path(os.path.abspath(target.path))
    for file in effective.files:
        for entry in facts.imports(file.data):
            pattern = Node(root).path(entry) if entry.startswith("/") else file.path.parent / entry
            pattern = Path(os.path.abspath(pattern))
            if any(char in entry for char in _GLOB_CHARS):
                # containerd globs like Go's filepath.Glob: '*' stops at '/', as here.
                if wanted.match(str(pattern)):
                    return entry
            elif pattern == wanted:
                return entry
    return None


def plan_import(
    main: ConfigFile, target: DropIn, *, effective: EffectiveConfig, root: Path
) -> Plan:
    """Add ``target.entry`` to the main file's top-level ``imports`` unless it is covered."""
    covering = covering_entry(effective, target, root=root)
    if covering is not None:
        return Plan(main.path, main.text, main.text,
                    f"drop-in already imported (imports entry {covering!r})")
    document = parse_for_edit(main)
    entries = document.get("imports")
    if entries is None:
        document.add("imports", [target.entry])
    elif isinstance(entries, list) and all(isinstance(entry, str) for entry in entries):
        entries.append(target.entry)
    else:
        # containerd reads imports as a list of strings: nothing else can be made to name the
        # drop-in, and a drop-in no imports entry names is never loaded.
        raise InputError(main.path, f"'imports' is not an array of paths, so no entry can import "
                                    f"the drop-in {target.entry}; nothing written (make it an "
                                    "array such as imports = [\"/etc/containerd/conf.d/*.toml\"], "
                                    "or register in the file itself without --drop-in)")
    return Plan(main.path, main.text, render_edit(main, document),
                f"import {target.entry}")

