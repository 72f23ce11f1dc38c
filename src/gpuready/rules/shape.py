"""Questions about a runtime entry that hold for any shape of valid TOML.

A config can be valid TOML and still hold a table where a string belongs (``runtime_type =
{}``) or a number where a list belongs. containerd refuses such a file when it decodes it;
the rules must still report everything else, so they ask these guarded questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.runc_options import is_runc


def runtime_type(entry: Mapping[str, Any]) -> str | None:
    """The runtime's ``runtime_type`` when it is a string, else None."""
    value = entry.get("runtime_type")
    return value if isinstance(value, str) else None


def runs_runc(entry: Mapping[str, Any]) -> bool:
    """True when the runtime uses the runc shim; False when its ``runtime_type`` is no string."""
    value = entry.get("runtime_type")
    if value and not isinstance(value, str):
        return False
    return is_runc(entry)


def disabled_cri_plugins(data: Mapping[str, Any]) -> list[str]:
    """The CRI plugin IDs in ``disabled_plugins``, ignoring entries that are not strings."""
    entries = data.get("disabled_plugins")
    if not isinstance(entries, list):
        return []
    names = [entry for entry in entries if isinstance(entry, str)]
    return facts.disabled_cri_plugins({"disabled_plugins": names})
