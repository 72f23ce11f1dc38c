"""Detect the owner of containerd on a node from its files (no running cluster needed).

Every owner row of :mod:`gpuready.owners.table` lists marker files; the first row (in table order)
with a marker present under the root owns the containerd the kubelet uses. The result keeps the
evidence, so ``doctor`` can say what it found and why, and the other owners that left traces.
"""

from __future__ import annotations

import functools
from typing import Any

from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.owners.table import OWNERS, PLAIN, Marker, Owner, owner_named
from gpuready.records import Record

# A marker that looks inside a file reads at most this much of it: the signatures are in the
# first lines, and a hostile or huge file must not cost more.
MARKER_READ_LIMIT = 64 * 1024


class Detection(Record):
    """The owner chosen for a node, why, and which other owners left traces."""

    owner: Owner
    evidence: tuple[str, ...]
    others: tuple[tuple[Owner, tuple[str, ...]], ...] = ()
    overridden: bool = False

    def reasons(self) -> str:
        """The evidence as one line."""
        return "; ".join(self.evidence)

    def describe(self) -> list[str]:
        """What ``doctor`` prints: the owner, why, its files, and the other owners found."""
        owner = self.owner
        lines = [f"owner: {owner.title} ({owner.name}): {self.reasons()}"]
        lines.append(f"  containerd reads: {owner.config}")
        if owner.regenerated:
            lines.append(f"  regenerated: {owner.regenerated}")
        if owner.edit_paths and not owner.owns_runtime_config:
            shown = ", ".join(str(p) for p in owner.edit_paths)
            lines.append(f"  edit instead ({owner.edit.value}): {shown}")
        elif not owner.owns_runtime_config:
            lines.append(f"  edit instead ({owner.edit.value}): the inventory variables")
        lines.append(f"  CRI socket: {owner.socket}")
        for other, evidence in self.others:
            lines.append(f"  also found: {other.name} ({'; '.join(evidence)})")
        return lines

    def to_dict(self) -> dict:
        """The detection for JSON output."""
        owner = self.owner
        return {
            "name": owner.name,
            "why": list(self.evidence),
            "config": str(owner.config),
            "edit": owner.edit.value,
            "edit_paths": [str(p) for p in owner.edit_paths],
            "socket": str(owner.socket),
            "regenerated": owner.regenerated or None,
            "also_found": [other.name for other, _ in self.others],
        }


def marker_found(node: Node, marker: Marker) -> bool:
    """True when the marker's file is on the node (and holds its text, when it names one)."""
    path = node.path_text(marker.path)
    if marker.contains is None:
        return node.lexists(path)
    if not node.is_file(path):
        return False
    try:
        head = node.read_bytes(path, kind=FileKind.CONFIG)[:MARKER_READ_LIMIT]
    except InputError:  # too large, unreadable: not the owner's file as it writes it
        return False
    return marker.contains.encode() in head


def evidence_for(node: Node, owner: Owner, *, absent: frozenset[str] = frozenset()
                 ) -> tuple[str, ...]:
    """What on the node points at ``owner`` (empty when nothing does); markers whose node path
    is in ``absent`` are known to name nothing (:func:`absent_markers`) and are not looked up."""
    return tuple(
        f"{marker.why}: {marker.path}" for marker in owner.markers
        if str(marker.path) not in absent and marker_found(node, marker)
    )


def absent_markers(node: Node) -> frozenset[str]:
    """The node paths of markers that surely name nothing on ``node``, found by listing the
    folders on their way: one listing per folder that is there, instead of one lookup per marker.

    A name missing from the listing of its folder (resolved on the node, as every lookup is)
    cannot be looked up either, nor anything below it. A folder that cannot be listed rules out
    nothing, and names are compared without case (a case-insensitive file system finds
    ``Etc`` as ``etc``): what is not ruled out is looked up as before.
    """
    absent: set[str] = set()
    pending: list[tuple[str, dict[str, Any]]] = [(node.path_text("/"), _marker_tree())]
    while pending:
        folder, below = pending.pop()
        try:
            names = set(node.listdir(folder))
        except (OSError, InputError):
            continue
        folded = {name.casefold() for name in names}
        for name, (paths, children) in below.items():
            if name not in names and name.casefold() not in folded:
                absent.update(paths)
            elif children:
                pending.append((folder.rstrip("/") + "/" + name, children))
    return frozenset(absent)


@functools.lru_cache(maxsize=1)
def _marker_tree() -> dict[str, Any]:
    """Every marker's node path as a tree of names: ``{name: (paths below it, {name: ...})}``."""
    tree: dict[str, Any] = {}
    for owner in OWNERS:
        for marker in owner.markers:
            level = tree
            for name in marker.path.parts[1:]:
                paths, children = level.setdefault(name, (set(), {}))
                paths.add(str(marker.path))
                level = children
    return tree


def detect(node: Node, *, distribution: str | None = None, engine: str = "containerd") -> Detection:
    """The owner of ``engine`` on ``node``; ``distribution`` overrides the search."""
    absent = absent_markers(node)
    found = [
        (owner, evidence)
        for owner in OWNERS
        if owner.engine == engine and (evidence := evidence_for(node, owner, absent=absent))
    ]
    if distribution and distribution != "auto":
        chosen = owner_named(distribution)
        others = tuple((o, e) for o, e in found if o is not chosen)
        return Detection(chosen, (f"--distribution {distribution}",), others, overridden=True)
    if not found:
        return Detection(PLAIN, ("nothing else found: containerd's own defaults",))
    (owner, evidence), rest = found[0], found[1:]
    # Debian's containerd package or a leftover config beside a distribution is common; it is
    # reported as also found, and multiple-containerd says whether two daemons may run.
    return Detection(owner, evidence, tuple(rest))
