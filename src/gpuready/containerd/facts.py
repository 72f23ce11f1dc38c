"""Facts about a parsed config: read-only questions answered from ``tomllib`` data.

Nothing here changes anything; edits are planned in :mod:`gpuready.containerd.register`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuready.containerd.versions import CRI_IMAGES, CRI_PLUGIN_IDS, ConfigVersion, KeyPath

RUNC_DEFAULT_NAME = "runc"
# containerd's built-in value when ``default_runtime_name`` is not set at all.
CONTAINERD_DEFAULT_RUNTIME = "runc"


def lookup(data: Mapping[str, Any], path: KeyPath) -> Any | None:
    """The value at ``path``, or None where any step is missing or not a table."""
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def runtimes(data: Mapping[str, Any], spec: ConfigVersion) -> dict[str, Mapping[str, Any]]:
    """The runtime handlers registered at this version's table, by name."""
    table = lookup(data, spec.runtimes_path)
    if not isinstance(table, Mapping):
        return {}
    return {name: entry for name, entry in table.items() if isinstance(entry, Mapping)}


def runtime(data: Mapping[str, Any], spec: ConfigVersion, name: str) -> Mapping[str, Any] | None:
    """The table of the runtime ``name``, or None when it is not registered."""
    return runtimes(data, spec).get(name)


def runtime_options(entry: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A runtime's ``options`` table (empty when absent)."""
    options = entry.get("options") if entry else None
    return options if isinstance(options, Mapping) else {}


def default_runtime_name(data: Mapping[str, Any], spec: ConfigVersion) -> str:
    """The runtime every pod without a RuntimeClass uses (containerd's default when unset)."""
    value = lookup(data, spec.default_runtime_path)
    return value if isinstance(value, str) and value else CONTAINERD_DEFAULT_RUNTIME


def disabled_cri_plugins(data: Mapping[str, Any]) -> list[str]:
    """The entries of top-level ``disabled_plugins`` that switch the CRI plugin off."""
    disabled = data.get("disabled_plugins", [])
    if not isinstance(disabled, list):
        return []
    return [item for item in disabled if isinstance(item, str) and item in CRI_PLUGIN_IDS]


def imports(data: Mapping[str, Any]) -> list[str]:
    """The top-level ``imports`` patterns, as written."""
    value = data.get("imports", [])
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def cdi_enabled(data: Mapping[str, Any], spec: ConfigVersion) -> bool:
    """Whether containerd's CRI resolves CDI devices with this config.

    ``enable_cdi`` when it is set; otherwise containerd 2.x (config version 3 and later) turns CDI
    on by default, and 1.7 leaves it off.
    """
    value = lookup(data, (*spec.cri_path, "enable_cdi"))
    return value if isinstance(value, bool) else spec.number >= 3


# The pause image a release uses when the file names none: what its `config default` prints
# (1.6.20, 2.1.9 and 2.3.4, kept in tests/data/containerd/).
DEFAULT_SANDBOX_IMAGE: Mapping[tuple[int, int], str] = {
    (1, 6): "registry.k8s.io/pause:3.6",
    (2, 1): "registry.k8s.io/pause:3.10",
    (2, 3): "registry.k8s.io/pause:3.10.2",
}


def sandbox_image_path(spec: ConfigVersion) -> KeyPath:
    """Where the file names the pause image: the CRI table's ``sandbox_image`` (versions 1 and
    2), the images plugin's ``pinned_images.sandbox`` (versions 3 and 4)."""
    if spec.number >= 3:
        return ("plugins", CRI_IMAGES, "pinned_images", "sandbox")
    return (*spec.cri_path, "sandbox_image")


def sets_nothing(value: Any) -> bool:
    """True for a value that sets nothing, Go's zero value: an empty string, false, 0, an empty
    list, or a table holding only such values."""
    if isinstance(value, Mapping):
        return all(sets_nothing(inner) for inner in value.values())
    return value is None or value is False or value in ("", 0, [])
