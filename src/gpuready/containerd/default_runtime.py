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
from gpuready.errors import ExitCode, GpureadyError, UsageError

CONFIRMATION_FLAG = "--confirm-every-pod-uses-it"
# (where the key lives, key): what decides how the runtime runs.
GUARDED_KEYS = (("runtime", "runtime_type"), ("options", "BinaryName"),
                ("options", "SystemdCgroup"))


class DefaultRuntimeChangeError(UsageError):
    """An edit would change how the default runtime runs, and nobody confirmed it."""


class DefaultRuntimeFindingError(GpureadyError):
    """The default runtime has a finding whose only fix changes how it runs, and nobody
    confirmed it: a finding (exit 1), not bad input; nothing was written."""

    exit_code = ExitCode.CHECK_FAILED


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
                       confirmed: bool, registering: str | None = None,
                       fixing: str | None = None) -> None:
    """Raise :class:`DefaultRuntimeChangeError` when the edit changes the default runtime.

    ``registering`` is the runtime name the edit registers (``configure --runtime-name``): the
    advice then fits a node whose default runtime already has that name. ``fixing`` names the
    findings a repair fixes (``lint --fix``): nothing is registered then, and the advice is the
    confirmation that lets the repair go ahead.
    """
    found = changes(before, after)
    if found is None or confirmed:
        return
    name, changed = found
    how = (fix_advice(fixing) if fixing is not None
           else advice(before, name, registering=registering))
    raise DefaultRuntimeChangeError(
        f"{path}: refusing to change how the default runtime {name!r} runs "
        f"({'; '.join(changed)}): every pod without a RuntimeClass uses it; nothing written. "
        + how
    )


def fix_advice(fixing: str) -> str:
    """What to do about a repair of the default runtime (``fixing``: its findings) that changes
    how it runs: confirm it, or edit the table by hand."""
    found = f" ({fixing})" if fixing else ""
    return (f"The fix{found} changes how every pod without a RuntimeClass runs: pass "
            f"{CONFIRMATION_FLAG} to apply it, or change the default runtime's table by hand")


NVIDIA_NAME = "nvidia"  # the name gpuready registers the NVIDIA runtime under by default


def advice(before: Mapping[str, Any], default: str, *, registering: str | None) -> str:
    """What to do instead of changing the default runtime ``default``.

    Registering the NVIDIA runtime under a name of its own is the way out, except where that
    name is taken: on a node whose platform made the NVIDIA runtime the default (AKS,
    Bottlerocket) and the runtime being registered is that default, the NVIDIA runtime already
    runs, and another name is the only way to register one beside it.
    """
    confirm = f"or pass {CONFIRMATION_FLAG}"
    other = NVIDIA_NAME if default != NVIDIA_NAME else f"{NVIDIA_NAME}-gpu"
    found = how_it_runs(before)
    binary = found[1].get("BinaryName") if found else None
    runs_nvidia = isinstance(binary, str) and binary.rsplit("/", 1)[-1].startswith(NVIDIA_NAME)
    if registering == default and runs_nvidia:
        return (f"This node's default runtime {default!r} already runs the NVIDIA runtime "
                f"(BinaryName {binary!r}), as its platform set it up: every pod, and a "
                f"RuntimeClass with handler {default!r}, goes through it, so there is nothing "
                f"to register. To register gpuready's runtime beside it, give it another name "
                f"(such as --runtime-name {other}, the RuntimeClass handler with it), "
                f"{confirm} to change the default runtime itself")
    if default == NVIDIA_NAME:
        return (f"The default runtime is already named {default!r}: register the NVIDIA runtime "
                f"under another name (such as --runtime-name {other}, the RuntimeClass handler "
                f"with it), {confirm} to change the default runtime itself")
    return f"Register the NVIDIA runtime under its own name (--runtime-name nvidia), {confirm}"
