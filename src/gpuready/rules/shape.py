"""Questions about a runtime entry that hold for any shape of valid TOML.

A config can be valid TOML and still hold a table where a string belongs (``runtime_type =
{}``) or a number where a list belongs. containerd refuses such a file when it decodes it;
the rules must still report everything else, so they ask these guarded questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def runtime_type(entry: Mapping[str, Any]) -> str | None:
    """The runtime's ``runtime_type`` when it is a string, else None."""
    value = entry.get("runtime_type")
    return value if isinstance(value, str) else None
