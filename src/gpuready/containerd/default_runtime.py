"""The default runtime is not gpuready's to change without an explicit confirmation.

Every pod without a RuntimeClass runs through the runtime ``default_runtime_name`` names (runc
when unset). An edit that changes how that runtime runs -- its ``runtime_type``, its
``options.BinaryName`` or its cgroup driver ``options.SystemdCgroup`` -- reaches every pod on the
node: registering "the NVIDIA runtime" under the default runtime's own name (``--runtime-name
runc``) would put every pod through the NVIDIA runtime. Every edit of a containerd config is
compared here, before and after, and refused unless the operator gave the confirmation that
``--set-as-default`` needs.

Not such a change: a spelling fix that keeps what containerd decodes (``SystemdCgroup = "true"``
to ``true``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.runc_options import bool_text
from gpuready.containerd.versions import VERSIONS
from gpuready.errors import UsageError

CONFIRMATION_FLAG = "--confirm-every-pod-uses-it"
# (where the key lives, key): what decides how the runtime runs.
GUARDED_KEYS = (("runtime", "runtime_type"), ("options", "BinaryName"),
                ("options", "SystemdCgroup"))


class DefaultRuntimeChangeError(UsageError):
    """An edit would change how the default runtime runs, and nobody confirmed it."""


def how_it_runs(data: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The default runtime's name and its guarded values (None when the version is unknown)."""
    version = data.get("version", 1)
    spec = VERSIONS.get(version) if isinstance(version, int) else None
    if spec is None:
        return None
    name = facts.default_runtime_name(data, spec)
    entry = facts.runtime(data, spec, name) or {}
    tables = {"runtime": entry, "options": facts.runtime_options(entry)}
    values = {key: decoded(tables[where].get(key)) for where, key in GUARDED_KEYS}
    return name, values


def decoded(value: Any) -> Any:
    """``value`` as containerd decodes it for a runc option: ``"true"``/``"false"`` as booleans."""
    as_bool = bool_text(value)
    return as_bool if as_bool is not None else value


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """The default runtime's name and what the edit changes in how it runs; None when nothing.

    When the edit makes another runtime the default, that is the change.
    """
    old, new = how_it_runs(before), how_it_runs(after)
    if old is None or new is None:
        return None
    if old[0] != new[0]:
        return old[0], [f"default_runtime_name: {old[0]!r} -> {new[0]!r}"]
    changed = [f"{key}: {_shown(old[1][key])} -> {_shown(new[1][key])}"
               for _, key in GUARDED_KEYS if old[1][key] != new[1][key]]
    return (old[0], changed) if changed else None


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def refuse_unconfirmed(before: Mapping[str, Any], after: Mapping[str, Any], path: object, *,
                       confirmed: bool) -> None:
    """Raise :class:`DefaultRuntimeChangeError` when the edit changes the default runtime."""
    found = changes(before, after)
    if found is None or confirmed:
        return
    name, changed = found
    raise DefaultRuntimeChangeError(
        f"{path}: refusing to change how the default runtime {name!r} runs "
        f"({'; '.join(changed)}): every pod without a RuntimeClass uses it; nothing written. "
        f"Register the NVIDIA runtime under its own name (--runtime-name nvidia), or pass "
        f"{CONFIRMATION_FLAG}"
    )
