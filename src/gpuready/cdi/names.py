"""Names in a CDI spec: the kind's vendor and class, device names, and annotation keys.

Each check returns the loader's reason as a sentence, or None when the name is accepted. The
loader's own rules are ASCII-only: "letter" means ``A-Z a-z`` and "digit" means ``0-9``.
"""

from __future__ import annotations

import re

from gpuready.cdi.versions import is_letter, parse_qualifier

ANNOTATIONS_SIZE_LIMIT = 256 * 1024
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_alphanumeric(char: str) -> bool:
    """An ASCII letter or digit."""
    return is_letter(char) or "0" <= char <= "9"


def kind_problem(kind: str) -> str | None:
    """Why the loader refuses ``kind`` (``vendor/class``), or None."""
    if not kind:
        return "kind is required (vendor/class, e.g. nvidia.com/gpu)"
    vendor, class_ = parse_qualifier(kind)
    if not vendor:
        return f"invalid kind {kind!r}: expected vendor/class, e.g. nvidia.com/gpu"
    return _label_problem("vendor", vendor) or _label_problem("class", class_)


def _label_problem(what: str, label: str) -> str | None:
    """Vendor and class: start with a letter, end with a letter or digit, inside ``_ . -``."""
    if not is_letter(label[0]):
        return f"invalid {what} {label!r}: must start with a letter"
    for char in label[1:-1]:
        if not (is_alphanumeric(char) or char in "_-."):
            return f"invalid character {char!r} in {what} {label!r}"
    if not is_alphanumeric(label[-1]):
        return f"invalid {what} {label!r}: must end with a letter or digit"
    return None


def kind_strict_problem(kind: str) -> str | None:
    """SPEC.md's stricter text (not enforced by the loader): DNS vendor, class of 63 or less."""
    vendor, class_ = parse_qualifier(kind)
    if not vendor:
        return None
    if len(vendor) > 253 or not _DNS_SUBDOMAIN.fullmatch(vendor):
        return f"vendor {vendor!r} is not a DNS subdomain (lowercase, at most 253 characters)"
    if len(class_) > 63:
        return f"class {class_!r} is longer than 63 characters"
    return None


def device_name_problem(name: str) -> str | None:
    """Why the loader refuses a device name, or None (``0``, ``GPU-1234``, ``0:1`` are fine)."""
    if not name:
        return "device name is required"
    if not is_alphanumeric(name[0]):
        return f"invalid device name {name!r}: must start with a letter or digit"
    for char in name[1:-1]:
        if not (is_alphanumeric(char) or char in "_-.:"):
            return f"invalid character {char!r} in device name {name!r}"
    if not is_alphanumeric(name[-1]):
        return f"invalid device name {name!r}: must end with a letter or digit"
    return None


def annotation_key_problem(key: str) -> str | None:
    """Kubernetes qualified-name rules, applied (as the loader does) to the lowercased key."""
    lowered = key.lower()
    prefix, slash, name = lowered.rpartition("/")
    if lowered.count("/") > 1:
        return f"invalid annotation key {key!r}: at most one '/'"
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"invalid annotation key {key!r}: the prefix must be a DNS subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME_PART.fullmatch(name):
        return (f"invalid annotation key {key!r}: the name must be 1-63 characters of "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
    return None


def annotations_size(annotations: dict[str, str]) -> int:
    """The size the loader limits: every key's and value's length in bytes, added up."""
    return sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())


def qualified_name(kind: str, name: str) -> str:
    """The fully-qualified device name, ``nvidia.com/gpu=0``."""
    return f"{kind}={name}"


def natural_key(text: str) -> list[object]:
    """Sort key that puts ``gpu=2`` before ``gpu=10``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", text)]
