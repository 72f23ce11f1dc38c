"""A minimal CDI spec check, used until the full validator (``gpuready.cdi.validate``) is wired in.

It checks what the CDI loader refuses most often: the version, the kind, the devices and their
names, empty edits, unknown fields, and the required fields of each edit. Each reason comes with
the field path it is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

KNOWN_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
_NAME_PART = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_KIND = re.compile(rf"^{_NAME_PART}/{_NAME_PART}$")
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_TOP_FIELDS = {"cdiVersion", "kind", "devices", "containerEdits", "annotations"}
_DEVICE_FIELDS = {"name", "containerEdits", "annotations"}
_EDIT_FIELDS = {
    "env",
    "deviceNodes",
    "mounts",
    "hooks",
    "intelRdt",
    "additionalGids",
    "netDevices",
}
_HOOK_NAMES = {
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
}

Finding = tuple[str, str]


def _version_tuple(text: str) -> tuple[int, ...] | None:
    match = re.match(r"^v?(\d+)\.(\d+)\.(\d+)$", text)
    return tuple(int(part) for part in match.groups()) if match else None


def spec_problems(spec: Any) -> list[Finding]:
    """``(field path, reason)`` for every reason a CDI loader would refuse ``spec``."""
    if not isinstance(spec, dict):
        return [("", "a CDI spec must be a mapping")]
    found: list[Finding] = []
    found += _unknown(spec, _TOP_FIELDS, "")
    found += _version(spec)
    kind = spec.get("kind")
    if not isinstance(kind, str) or not _KIND.match(kind):
        found.append(("kind", f"kind {kind!r} is not vendor/class (e.g. nvidia.com/gpu)"))
    found += _devices(spec.get("devices"))
    if "containerEdits" in spec:
        found += _edits(spec["containerEdits"], "containerEdits")
    return found


def _unknown(mapping: dict, known: set[str], prefix: str) -> list[Finding]:
    return [(f"{prefix}{key}", f"unknown field {key!r}") for key in mapping if key not in known]


def _version(spec: dict) -> list[Finding]:
    version = spec.get("cdiVersion")
    if not isinstance(version, str):
        return [("cdiVersion", "cdiVersion is required and must be a string")]
    parsed = _version_tuple(version)
    if parsed is None or version.lstrip("v") not in KNOWN_VERSIONS:
        return [("cdiVersion", f"cdiVersion {version!r} is not a published CDI version")]
    needed = _minimum_version(spec)
    if parsed < _version_tuple(needed):
        return [("cdiVersion", f"the spec's content needs cdiVersion {needed} or later")]
    return []


def _minimum_version(spec: dict) -> str:
    devices = spec.get("devices") if isinstance(spec.get("devices"), list) else []
    edits = [spec.get("containerEdits")] + [
        d.get("containerEdits") for d in devices if isinstance(d, dict)
    ]
    edits = [e for e in edits if isinstance(e, dict)]
    if any(e.get("intelRdt") or e.get("additionalGids") for e in edits):
        return "0.7.0"
    kind = spec.get("kind") if isinstance(spec.get("kind"), str) else ""
    annotated = spec.get("annotations") or any(
        isinstance(d, dict) and d.get("annotations") for d in devices
    )
    if annotated or "." in kind.partition("/")[2]:
        return "0.6.0"
    digit_name = any(isinstance(d, dict) and str(d.get("name", "x"))[:1].isdigit() for d in devices)
    host_path = any(
        isinstance(n, dict) and n.get("hostPath")
        for e in edits
        for n in (e.get("deviceNodes") or [])
    )
    if digit_name or host_path:
        return "0.5.0"
    if any(isinstance(m, dict) and m.get("type") for e in edits for m in (e.get("mounts") or [])):
        return "0.4.0"
    return "0.3.0"


def _devices(devices: Any) -> Iterator[Finding]:
    if not isinstance(devices, list) or not devices:
        yield ("devices", "a spec needs at least one device")
        return
    seen: set[str] = set()
    for index, device in enumerate(devices):
        where = f"devices[{index}]"
        if not isinstance(device, dict):
            yield (where, "a device must be a mapping")
            continue
        yield from _unknown(device, _DEVICE_FIELDS, f"{where}.")
        name = device.get("name")
        if not isinstance(name, str) or not _DEVICE_NAME.match(name):
            yield (f"{where}.name", f"invalid device name {name!r}")
        elif name in seen:
            yield (f"{where}.name", f"device name {name!r} is used twice")
        else:
            seen.add(name)
        edits = device.get("containerEdits")
        if not isinstance(edits, dict) or not any(edits.values()):
            yield (f"{where}.containerEdits", "invalid device, empty device edits")
        else:
            yield from _edits(edits, f"{where}.containerEdits")


def _edits(edits: Any, where: str) -> Iterator[Finding]:
    if not isinstance(edits, dict):
        yield (where, "containerEdits must be a mapping")
        return
    yield from _unknown(edits, _EDIT_FIELDS, f"{where}.")
    for index, env in enumerate(edits.get("env") or []):
        if not isinstance(env, str) or env.find("=") < 1:
            yield (f"{where}.env[{index}]", f"invalid environment variable {env!r} (KEY=VALUE)")
    for index, node in enumerate(edits.get("deviceNodes") or []):
        if not isinstance(node, dict) or not node.get("path"):
            yield (f"{where}.deviceNodes[{index}].path", "a device node needs a path")
    for index, mount in enumerate(edits.get("mounts") or []):
        for field in ("hostPath", "containerPath"):
            if not isinstance(mount, dict) or not mount.get(field):
                yield (f"{where}.mounts[{index}].{field}", f"a mount needs {field}")
    for index, hook in enumerate(edits.get("hooks") or []):
        hook = hook if isinstance(hook, dict) else {}
        if hook.get("hookName") not in _HOOK_NAMES:
            yield (
                f"{where}.hooks[{index}].hookName",
                f"invalid hook name {hook.get('hookName')!r}",
            )
        if not hook.get("path"):
            yield (f"{where}.hooks[{index}].path", "a hook needs a path")
