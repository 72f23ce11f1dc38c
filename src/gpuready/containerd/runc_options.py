"""The runc shim's ``options`` keys and the CRI config's boolean keys, as containerd reads them.

containerd decodes a runtime's ``options`` table into the runc shim's options message by field
name (2.x case-insensitively, 1.x exactly) and silently drops every key that matches no field;
a value of the wrong type is not caught when the config loads, only when a container is created.
"""

from __future__ import annotations

import re

RUNC_RUNTIME_TYPES = frozenset({"io.containerd.runc.v2", "io.containerd.runc.v1"})
DEPRECATED_RUNTIME_TYPES = frozenset({"io.containerd.runc.v1", "io.containerd.runtime.v1.linux"})
RECOMMENDED_RUNTIME_TYPE = "io.containerd.runc.v2"

# Field name -> TOML type, for containerd 2.x.
RUNC_OPTIONS: dict[str, type] = {
    "NoPivotRoot": bool,
    "NoNewKeyring": bool,
    "SystemdCgroup": bool,
    "ShimCgroup": str,
    "BinaryName": str,
    "Root": str,
    "CriuImagePath": str,
    "CriuWorkPath": str,
    "IoUid": int,
    "IoGid": int,
}
# containerd 1.x also has CriuPath (removed from the shim options in 2.0).
RUNC_OPTIONS_1X: dict[str, type] = {**RUNC_OPTIONS, "CriuPath": str}

# Boolean keys of a runtime table (not of its options).
RUNTIME_BOOL_KEYS = frozenset(
    {
        "privileged_without_host_devices",
        "privileged_without_host_devices_all_devices_allowed",
        "cgroup_writable",
    }
)

# Boolean keys of the CRI plugin table and of its ``containerd`` sub-table.
CRI_BOOL_KEYS = frozenset(
    {
        "enable_cdi",
        "systemd_cgroup",
        "enable_selinux",
        "disable_apparmor",
        "disable_cgroup",
        "disable_proc_mount",
        "disable_tcp_service",
        "enable_tls_streaming",
        "restrict_oom_score_adj",
        "tolerate_missing_hugetlb_controller",
        "disable_hugetlb_controller",
        "device_ownership_from_security_context",
        "ignore_image_defined_volumes",
        "netns_mounts_under_state_dir",
        "enable_unprivileged_ports",
        "enable_unprivileged_icmp",
    }
)
CONTAINERD_BOOL_KEYS = frozenset(
    {
        "disable_snapshot_annotations",
        "discard_unpacked_layers",
        "no_pivot",
        "ignore_rdt_not_enabled_errors",
        "ignore_blockio_not_enabled_errors",
    }
)

_BOOL_TEXT = re.compile(r"^\s*(true|false)\s*$", re.IGNORECASE)


def known_options(*, major: int) -> dict[str, type]:
    """The runc option fields of containerd ``major`` (1 or 2)."""
    return RUNC_OPTIONS_1X if major == 1 else RUNC_OPTIONS


def normalized(key: str) -> str:
    """A key with case and underscores removed: ``systemd_cgroup`` -> ``systemdcgroup``."""
    return key.replace("_", "").replace("-", "").lower()


def canonical_option(key: str, *, major: int) -> str | None:
    """The runc field a key was meant to be (``systemd_cgroup`` -> ``SystemdCgroup``), if any."""
    return _BY_NORMALIZED[1 if major == 1 else 2].get(normalized(key))


# normalized field name -> field name, per line (a rule asks this for every key of a runtime).
_BY_NORMALIZED = {
    major: {normalized(name): name for name in known_options(major=major)} for major in (1, 2)
}


def option_matches(key: str, *, major: int) -> bool:
    """True when containerd ``major`` maps ``key`` onto a runc option field."""
    fields = known_options(major=major)
    if key in fields:
        return True
    # 2.x matches field names case-insensitively; an underscore never matches.
    return major >= 2 and any(key.lower() == name.lower() for name in fields)


def binary_problem(value: str) -> str | None:
    """Why ``value`` cannot be a runtime's ``BinaryName``, or None when it can.

    The shim looks a relative name up in its own ``PATH`` (not the operator's), and a control
    character (a newline) cannot be part of a path anyone meant.
    """
    if not value:
        return "is empty: give the absolute path of the runtime executable"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return f"{value!r} contains a control character"
    if not value.startswith("/"):
        return f"{value!r} is not an absolute path"
    return None


def is_runc(entry: dict) -> bool:
    """True when a runtime entry uses the runc shim (or names no type, which defaults to it).

    A ``runtime_type`` that is not a string (valid TOML, refused by containerd) is not runc.
    """
    runtime_type = entry.get("runtime_type")
    if not runtime_type:
        return True
    return isinstance(runtime_type, str) and runtime_type in RUNC_RUNTIME_TYPES


def bool_text(value: object) -> bool | None:
    """``True``/``False`` for the strings ``"true"``/``"false"`` (any case), else None."""
    if isinstance(value, str):
        match = _BOOL_TEXT.match(value)
        if match:
            return match.group(1).lower() == "true"
    return None
