"""What a containerd patch release has that its line's config does not show: the facts that
differ between patch releases (``X.Y.Z``), as data with their source.

- injects the CDI devices an NRI plugin adds: 1.7.30 and later 1.7 releases, 2.1.0 and later
  (containerd#12650, #11675: older releases drop them without a word; gpu-operator#2382);
- passes the CDI devices the kubelet names (CRI ``CDIDevices``, what DRA asks with): 1.7.2 and
  later (KEP-4009; as gpuready issue 29 records it).

A node's release comes from :func:`gpuready.containerd.lines.node_line` (``--containerd-version``,
the root's package database, ``containerd --version``); when only ``1.7`` is known, a feature
whose patch releases differ is not known either (:func:`has` says None).
"""

from __future__ import annotations

from gpuready.records import Record

Version = tuple[int, int, int]
_ANY_PATCH = 1 << 30  # a patch number after every real one: the newest patch of a line


class Feature(Record):
    """Something some containerd releases do: the ranges ``[first, until)`` that do it
    (``until`` None: every later release), and where that is known from."""

    what: str
    ranges: tuple[tuple[Version, Version | None], ...]
    source: str

    def upgrade_to(self, major: int | None = None) -> str:
        """The releases to upgrade to, for messages: ``2.1.0 or later`` for a node of major
        ``major`` that has a range of its own, else every range's first release."""
        firsts = [first for first, _ in self.ranges]
        own = [first for first in firsts if first[0] == major]
        shown = [".".join(map(str, first)) for first in (own[-1:] or firsts)]
        return " or later, or ".join(shown) + " or later"


NRI_CDI_INJECTION = Feature(
    "injects the CDI devices an NRI plugin adds",
    (((1, 7, 30), (2, 0, 0)), ((2, 1, 0), None)),
    "containerd#12650, #11675; gpu-operator#2382")

CRI_CDI_DEVICES = Feature(
    "passes the CDI devices the kubelet names (CRI CDIDevices, which DRA uses)",
    (((1, 7, 2), None),),
    "CRI CDIDevices, KEP-4009 (as gpuready issue 29 records it)")


def _in(feature: Feature, version: Version) -> bool:
    return any(first <= version and (until is None or version < until)
               for first, until in feature.ranges)


def has(feature: Feature, *, release: tuple[int, int] | None,
        version: Version | None) -> bool | None:
    """Whether a containerd of ``version`` (else of any patch of ``release``) has ``feature``;
    None when the release is not known, or its patch releases differ and the patch is not."""
    if version is not None:
        return _in(feature, version)
    if release is None:
        return None
    first, last = _in(feature, (*release, 0)), _in(feature, (*release, _ANY_PATCH))
    return first if first == last else None
