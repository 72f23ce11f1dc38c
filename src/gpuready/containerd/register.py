"""Plan the registration of a runtime in containerd's config, keeping every byte it does not own.

The new runtime starts as a copy of an existing runc-style runtime (so it inherits
``runtime_type``, ``privileged_without_host_devices``, ``base_runtime_spec`` and the runc
``options``, the cgroup driver above all), then gets ``options.BinaryName`` and
``options.SystemdCgroup``. The edit is made with ``tomlkit`` on the table this file's ``version``
reads, and the result is parsed again with ``tomllib`` before it is offered as a plan.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gpuready.compat import StrEnum
from gpuready.containerd import default_runtime, facts
from gpuready.containerd.document import ConfigFile, load_config_text
from gpuready.containerd.edit import Edit, UneditableTableError, add_table, set_value
from gpuready.containerd.runc_options import RUNC_OPTIONS, bool_text
from gpuready.containerd.versions import ConfigVersion, render_key_path, spec_of
from gpuready.errors import InputError
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.textfile import restyle, without_bom

RUNC_SHIM = "io.containerd.runc.v2"
# Runtimes whose table a new runtime may start from, in order of preference (after the default).
TEMPLATE_CANDIDATES = ("runc", "crun")
# The keys of the template runtime that carry over; everything else is the template's own.
INHERITED_KEYS = ("runtime_type", "privileged_without_host_devices", "base_runtime_spec")
# The TOML type containerd decodes each inherited key into; a value of another type is not copied.
INHERITED_TYPES: dict[str, type] = {"runtime_type": str, "privileged_without_host_devices": bool,
                                    "base_runtime_spec": str}


class CgroupMode(StrEnum):
    """What ``--systemd-cgroup`` asks for the new runtime's ``SystemdCgroup``."""

    TRUE = "true"
    FALSE = "false"
    INHERIT = "inherit"


class RuntimeRequest(Record):
    """The runtime to register: its name, executable and cgroup driver.

    ``default_confirmed``: the operator confirmed that changing how the default runtime runs
    (registering under its name) is meant; without it such a plan is refused.
    """

    name: str = "nvidia"
    binary: str = "/usr/bin/nvidia-container-runtime"
    systemd_cgroup: CgroupMode = CgroupMode.TRUE
    default_confirmed: bool = False


def plan_registration(
    config: ConfigFile, request: RuntimeRequest, *, context: Mapping[str, Any] | None = None
) -> Plan:
    """The plan that registers ``request`` in ``config`` (a no-op with a reason if it is there).

    ``context`` is the effective config the runtime's template (runc's table) is taken from
    when ``config`` is a drop-in that holds no runtime of its own; by default ``config`` itself.
    """
    spec = spec_of(config.data, path=config.path)
    seen = config.data if context is None else context
    template_name, template = _template(seen, spec, request.name)
    desired = desired_runtime(template, request)
    current = facts.runtime(config.data, spec, request.name)
    notes = cgroup_notes(seen, spec, request, desired) + skipped_notes(template_name, template)
    header = render_key_path(spec.runtime_path(request.name))
    if current is not None and _satisfies(current, desired):
        return Plan(config.path, config.text, config.text,
                    f"runtime {request.name} already registered at [{header}]", notes)
    text = without_bom(config.text)
    try:
        if current is None:
            edits = [_insert_runtime(text, config.data, spec, request.name, desired)]
        else:
            edits = _update_runtime(text, current, spec, request.name, desired)
    except UneditableTableError as error:
        raise InputError(
            config.path, f"cannot register runtime {request.name} at [{header}]: {error}"
        ) from None
    if current is None:
        summary = f"register runtime {request.name} at [{header}]"
        summary += f" (from {template_name}'s table)" if template_name else ""
    else:
        summary = f"update runtime {request.name} at [{header}]"
    after = restyle(config.text, edits[-1].text if edits else text)
    edited = _verify(after, config, spec, request.name, desired)
    default_runtime.refuse_unconfirmed(config.data, edited, config.path,
                                       confirmed=request.default_confirmed,
                                       registering=request.name)
    notes += tuple(edit.note for edit in edits if edit.note)
    return Plan(config.path, config.text, after, summary, notes)


def desired_runtime(template: Mapping[str, Any] | None, request: RuntimeRequest) -> dict[str, Any]:
    """The runtime table to register: the template's inherited keys plus the NVIDIA binary."""
    entry: dict[str, Any] = {}
    for key in INHERITED_KEYS:
        if template and key in template and _well_typed(template[key], INHERITED_TYPES[key]):
            entry[key] = copy.deepcopy(template[key])
    if not entry.get("runtime_type"):
        entry["runtime_type"] = RUNC_SHIM
    options: dict[str, Any] = {"BinaryName": request.binary}
    options.update(
        (key, copy.deepcopy(value))
        for key, value in facts.runtime_options(template).items()
        if key != "BinaryName" and _well_typed(value, RUNC_OPTIONS.get(key))
    )
    if request.systemd_cgroup is CgroupMode.TRUE:
        options["SystemdCgroup"] = True
    elif request.systemd_cgroup is CgroupMode.FALSE:
        options["SystemdCgroup"] = False
    entry["options"] = options
    return entry


def _well_typed(value: Any, expected: type | None) -> bool:
    if expected is None:
        return True  # not a key containerd types: the operator's own, copied as it is
    if expected is bool and bool_text(value) is not None:
        return True  # a misspelt boolean (bool-as-string): copied as the operator wrote it
    return isinstance(value, expected) and (expected is bool or not isinstance(value, bool))


def skipped_notes(template_name: str | None, template: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Notes on the template's values of the wrong type, which the new runtime does not copy."""
    if not template:
        return ()
    found = [(key, template[key]) for key in INHERITED_KEYS
             if key in template and not _well_typed(template[key], INHERITED_TYPES[key])]
    found += [(f"options.{key}", value) for key, value in facts.runtime_options(template).items()
              if not _well_typed(value, RUNC_OPTIONS.get(key))]
    return tuple(f"{template_name}'s {key} = {value!r} has the wrong type for containerd; not "
                 "copied to the new runtime (run 'gpuready lint')" for key, value in found)


CGROUP_NOTE = "cgroup-driver-mismatch: "


def cgroup_notes(
    data: Mapping[str, Any], spec: ConfigVersion, request: RuntimeRequest, desired: Mapping
) -> tuple[str, ...]:
    """The cgroup verdict lint gives (the kubelet's driver unknown here) once the runtime is in.

    The same verdict and advice as ``doctor``'s cgroup-driver-mismatch.
    """
    from gpuready.containerd import decoding
    from gpuready.containerd.semantics import from_config_version
    from gpuready.rules.options import cgroup_verdict

    runtimes = {**facts.runtimes(data, spec), request.name: desired}
    verdict = cgroup_verdict(
        runtimes,
        request.name,
        lines=decoding.lines_for(major=from_config_version(spec.number).major),
        kubelet_driver=None,
        kubelet_file=None,
    )
    if verdict is None:
        return ()
    return (f"{CGROUP_NOTE}{verdict.message}; {verdict.fix}",)


def _template(
    data: Mapping[str, Any], spec: ConfigVersion, new_name: str
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The runtime to copy: the default runtime unless it is an NVIDIA one, else runc, else crun."""
    registered = facts.runtimes(data, spec)
    default = facts.default_runtime_name(data, spec)
    candidates = [default] if not default.startswith("nvidia") else []
    candidates += [name for name in TEMPLATE_CANDIDATES if name not in candidates]
    for name in candidates:
        if name != new_name and name in registered:
            return name, registered[name]
    return None, None


def _satisfies(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when the registered runtime already has every key gpuready would set."""
    if current.get("runtime_type") != desired["runtime_type"]:
        return False
    options = facts.runtime_options(current)
    wanted = desired["options"]
    return all(options.get(key) == wanted[key] for key in ("BinaryName", "SystemdCgroup")
               if key in wanted)


def _verify(
    after: str, config: ConfigFile, spec: ConfigVersion, name: str, desired: Mapping[str, Any]
) -> dict[str, Any]:
    """Parse the edited text again, make sure containerd will read what was meant; its data."""
    edited = load_config_text(after, config.path)
    entry = facts.runtime(edited.data, spec, name)
    if entry is None or not _satisfies(entry, desired):
        raise InputError(
            config.path,
            f"cannot register runtime {name}: the table "
            f"[{render_key_path(spec.runtime_path(name))}] is written in a way gpuready cannot "
            "edit safely (run 'gpuready lint' on it)",
        )
    return edited.data


def _insert_runtime(
    text: str, data: Mapping[str, Any], spec: ConfigVersion, name: str, desired: Mapping
) -> Edit:
    """Add the runtime next to the other runtimes, written as they are."""
    registered = facts.runtimes(data, spec)
    sibling = next((key for key in TEMPLATE_CANDIDATES if key in registered), None)
    sibling = sibling or next((key for key in registered if key != name), None)
    return add_table(text, spec.runtime_path(name), desired, sibling=sibling)


def _update_runtime(
    text: str, current: Mapping[str, Any], spec: ConfigVersion, name: str, desired: Mapping
) -> list[Edit]:
    """Set the values gpuready owns on an existing runtime; the operator's others stay."""
    wanted = {("runtime_type",): desired["runtime_type"]}
    wanted.update({("options", key): value for key, value in _owned_options(desired).items()})
    edits: list[Edit] = []
    for key, value in wanted.items():
        present = facts.lookup(current, key)
        if type(present) is type(value) and present == value:
            continue
        edit = set_value(edits[-1].text if edits else text, (*spec.runtime_path(name), *key),
                         value)
        edits.append(edit)
    return edits


def _owned_options(desired: Mapping) -> dict[str, Any]:
    """The options gpuready sets on an existing runtime; the operator's other options stay."""
    return {key: desired["options"][key] for key in ("BinaryName", "SystemdCgroup")
            if key in desired["options"]}
