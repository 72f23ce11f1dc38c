"""CDI spec versions, the minimum ``cdiVersion`` a spec's content needs, and the newest each
containerd release reads.

The validator and the generator both call :func:`minimum_version`, so a generated spec declares
exactly the version the loader will ask of it.
"""

from __future__ import annotations

from typing import Any

from gpuready.records import Record

# Every version the loader knows. 0.1.0 and 0.2.0 are known but refused: the loader's floor is
# 0.3.0 and it reports them as "the spec version must be at least v0.3.0", not as unknown.
KNOWN_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0",
                  "1.0.0", "1.1.0")
EARLIEST_VERSION = "0.3.0"
LATEST_VERSION = "1.1.0"


# The newest ``cdiVersion`` each containerd release reads: the spec versions its vendored CDI
# library (container-device-interface, in containerd's go.mod) knows, by the first patch release
# that vendored it. Source: issue 29 (read from containerd's go.mod per tag). containerd 1.6 has
# no CDI; a later row holds from its release on, until the next row. A spec declaring a newer
# version is refused whole by the runtime's CDI cache: every device in it is "unresolvable".
CONTAINERD_READS: tuple[tuple[tuple[int, int, int], str], ...] = (
    ((1, 7, 0), "0.5.0"),
    ((1, 7, 12), "0.6.0"),
    ((1, 7, 16), "0.7.0"),
    ((1, 7, 27), "0.8.0"),
    ((2, 0, 0), "0.8.0"),
    ((2, 1, 0), "1.0.0"),
    ((2, 3, 0), "1.1.0"),
)


def containerd_reads(version: tuple[int, int, int]) -> str | None:
    """The newest ``cdiVersion`` containerd ``version`` (``(1, 7, 20)``) reads; None before 1.7
    (no CDI). Releases after the last row are taken to read at least what it reads."""
    found = None
    for since, newest in CONTAINERD_READS:
        if version >= since:
            found = newest
    return found


def containerd_reads_range(release: tuple[int, int]) -> tuple[str, str] | None:
    """The oldest and newest of what the patch releases of ``release`` (``(1, 7)``) read, for
    a node whose patch release is not known; None when the line has no CDI."""
    lowest = containerd_reads((*release, 0))
    highest = containerd_reads((*release, _ANY_PATCH))
    return (lowest, highest) if lowest and highest else None


def first_containerd_reading(cdi_version: str, *, major: int | None = None
                             ) -> tuple[int, int, int] | None:
    """The first containerd release that reads ``cdi_version`` (of major ``major`` when given,
    for an upgrade within the line); None when none does."""
    wanted = version_key(cdi_version)
    for since, newest in CONTAINERD_READS:
        if version_key(newest) >= wanted and (major is None or since[0] == major):
            return since
    return None


_ANY_PATCH = 1 << 30  # a patch number after every real one: the newest patch of a line


class Requirement(Record):
    """One reason a spec needs at least ``version``: the field that asks for it, and why."""

    version: str
    key_path: str
    reason: str


def version_key(version: str) -> tuple[int, ...]:
    """A sortable key for a known version (a leading ``v`` is accepted, as the loader does)."""
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def is_known_version(version: str) -> bool:
    """True when the loader knows ``version`` (``0.5.0`` or ``v0.5.0``)."""
    return version.removeprefix("v") in KNOWN_VERSIONS


def requirements(spec: dict[str, Any], *, as_loader: bool = False) -> list[Requirement]:
    """Every feature in ``spec`` that needs a version above the earliest, with its field path.

    ``spec`` is a decoded spec (missing fields absent or empty). Device names that start with a
    character other than a letter count from 0.5.0 on, exactly as the loader checks them.

    ``as_loader``: what the Go loader (container-device-interface v1.1.0, ``ValidateVersion``)
    actually sees. Its 0.4.0 (mount ``type``) and 0.5.0 (device node ``hostPath``) checks
    collect each device's edits through a pointer to the loop variable, which in Go modules
    declared before Go 1.22 is one variable: every pointer ends on the last device, so only the
    last device's edits (and the spec's own) count there. Without it: what the text needs.
    """
    found: list[Requirement] = []
    every = _all_edits(spec)
    captured = every
    if as_loader:
        devices = [item for item in every if item[0].startswith("devices[")]
        captured = devices[-1:] + [item for item in every if item[0] == "containerEdits"]
    for prefix, edits in every:
        found.extend(_edit_requirements(prefix, edits, captured=False))
    for prefix, edits in captured:
        found.extend(_edit_requirements(prefix, edits, captured=True))
    if _non_empty_map(spec.get("annotations")):
        found.append(Requirement("0.6.0", "annotations", "spec annotations"))
    vendor, class_ = parse_qualifier(_text(spec.get("kind")))
    if vendor and "." in class_:
        found.append(Requirement("0.6.0", "kind", "a '.' in the class part of kind"))
    for index, device in enumerate(_list(spec.get("devices"))):
        if not isinstance(device, dict):
            continue
        name = _text(device.get("name"))
        if name and not is_letter(name[0]):
            found.append(Requirement("0.5.0", f"devices[{index}].name",
                                     "a device name that does not start with a letter"))
        if _non_empty_map(device.get("annotations")):
            found.append(Requirement("0.6.0", f"devices[{index}].annotations",
                                     "device annotations"))
    return found


def minimum_version(spec: dict[str, Any], *, as_loader: bool = False) -> str:
    """The lowest ``cdiVersion`` ``spec``'s content needs (``as_loader``: that the loader
    asks; the generator declares what the text needs, which the loader always accepts)."""
    best = EARLIEST_VERSION
    for requirement in requirements(spec, as_loader=as_loader):
        if version_key(requirement.version) > version_key(best):
            best = requirement.version
    return best


def strongest_requirement(spec: dict[str, Any], *, as_loader: bool = False) -> Requirement | None:
    """The first requirement asking for :func:`minimum_version`, or None at the earliest."""
    needed = minimum_version(spec, as_loader=as_loader)
    return next(
        (r for r in requirements(spec, as_loader=as_loader) if r.version == needed), None
    )


def is_letter(char: str) -> bool:
    """An ASCII letter: what the loader calls a letter in kinds and device names."""
    return char.isascii() and char.isalpha()


def parse_qualifier(kind: str) -> tuple[str, str]:
    """Split ``vendor/class`` at the first ``/``; ``("", "")`` when either part is missing."""
    vendor, slash, class_ = kind.partition("/")
    if not slash or not vendor or not class_:
        return "", ""
    return vendor, class_


def _edit_requirements(
    prefix: str, edits: dict[str, Any], *, captured: bool
) -> list[Requirement]:
    """The requirements of one edits table: the loop-captured checks (0.4.0, 0.5.0) or the
    others."""
    found = []
    if captured:
        for index, mount in enumerate(_list(edits.get("mounts"))):
            if isinstance(mount, dict) and _text(mount.get("type")):
                found.append(
                    Requirement("0.4.0", f"{prefix}.mounts[{index}].type", "a mount type")
                )
        for index, node in enumerate(_list(edits.get("deviceNodes"))):
            if isinstance(node, dict) and _text(node.get("hostPath")):
                found.append(Requirement("0.5.0", f"{prefix}.deviceNodes[{index}].hostPath",
                                         "a device node hostPath"))
        return found
    if _list(edits.get("additionalGids")):
        found.append(Requirement("0.7.0", f"{prefix}.additionalGids", "additionalGids"))
    rdt = edits.get("intelRdt")
    if rdt is not None:
        found.append(Requirement("0.7.0", f"{prefix}.intelRdt", "intelRdt"))
        if isinstance(rdt, dict):
            if _list(rdt.get("schemata")):
                found.append(Requirement("1.1.0", f"{prefix}.intelRdt.schemata",
                                         "intelRdt.schemata"))
            if rdt.get("enableMonitoring"):
                found.append(Requirement("1.1.0", f"{prefix}.intelRdt.enableMonitoring",
                                         "intelRdt.enableMonitoring"))
    if _list(edits.get("netDevices")):
        found.append(Requirement("1.1.0", f"{prefix}.netDevices", "netDevices"))
    return found


def _all_edits(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    edits = []
    for index, device in enumerate(_list(spec.get("devices"))):
        if isinstance(device, dict) and isinstance(device.get("containerEdits"), dict):
            edits.append((f"devices[{index}].containerEdits", device["containerEdits"]))
    if isinstance(spec.get("containerEdits"), dict):
        edits.append(("containerEdits", spec["containerEdits"]))
    return edits


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _non_empty_map(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
