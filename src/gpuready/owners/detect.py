"""Detect the owner of containerd on a node from its files (no running cluster needed).

Every owner row of :mod:`gpuready.owners.table` lists marker files; the first row (in table order)
with a marker present under the root owns the containerd the kubelet uses. The result keeps the
evidence, so ``doctor`` can say what it found and why, and the other owners that left traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.owners.table import OWNERS, PLAIN, Marker, Owner, owner_named

# A marker that looks inside a file reads at most this much of it: the signatures are in the
# first lines, and a hostile or huge file must not cost more.
MARKER_READ_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Detection:
    """The owner chosen for a node, why, and which other owners left traces."""

    owner: Owner
    evidence: tuple[str, ...]
    others: tuple[tuple[Owner, tuple[str, ...]], ...] = field(default=())
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


def evidence_for(node: Node, owner: Owner) -> tuple[str, ...]:
    """What on the node points at ``owner`` (empty when nothing does)."""
    return tuple(
        f"{marker.why}: {marker.path}" for marker in owner.markers if marker_found(node, marker)
    )


def detect(node: Node, *, distribution: str | None = None, engine: str = "containerd") -> Detection:
    """The owner of ``engine`` on ``node``; ``distribution`` overrides the search."""
    found = [
        (owner, evidence)
        for owner in OWNERS
        if owner.engine == engine and (evidence := evidence_for(node, owner))
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
