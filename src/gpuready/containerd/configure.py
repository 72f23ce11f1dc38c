"""``gpuready configure``: the registration plus the optional CDI switch, as one plan.

Each part is planned on the text the previous part produced, and the parts are combined into a
single plan from the file as it is to the file as it will be, so one diff shows everything and one
safe write applies it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.document import ConfigFile, load_config_text
from gpuready.containerd.edit import UneditableTableError, remove_items, set_value
from gpuready.containerd.register import RuntimeRequest, plan_registration
from gpuready.containerd.versions import render_key_path, spec_of
from gpuready.errors import InputError
from gpuready.paths import CDI_DIRS
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.textfile import restyle, without_bom

CDI_SPEC_DIRS = [str(directory) for directory in CDI_DIRS]


class ConfigureRequest(Record):
    """What ``configure`` should make true of the config."""

    runtime: RuntimeRequest
    enable_cdi: bool = False
    set_as_default: bool = False
    enable_cri: bool = False


def plan_configure(
    config: ConfigFile, request: ConfigureRequest, *, context: Mapping[str, Any] | None = None
) -> Plan:
    """One plan for the whole request; a no-op whose summary gives every reason.

    ``context``: the effective config a drop-in's runtime takes its template from.
    """
    parts: list[Callable[[ConfigFile], Plan]] = [
        lambda current: plan_registration(current, request.runtime, context=context)
    ]
    if request.enable_cri:
        parts.append(plan_enable_cri)
    if request.enable_cdi:
        parts.append(plan_enable_cdi)
    if request.set_as_default:
        parts.append(lambda current: plan_default_runtime(current, request.runtime.name))
    return chain(config, parts)


def plan_enable_cdi(config: ConfigFile) -> Plan:
    """Set ``enable_cdi = true`` (and ``cdi_spec_dirs`` when absent) on this version's CRI table.

    containerd before 1.7 has no CDI support and drops both keys without a word.
    """
    spec = spec_of(config.data, path=config.path)
    cri = facts.lookup(config.data, spec.cri_path) or {}
    wanted = {"enable_cdi": True}
    if "cdi_spec_dirs" not in cri:
        wanted["cdi_spec_dirs"] = CDI_SPEC_DIRS
    header = render_key_path(spec.cri_path)
    if cri.get("enable_cdi") is True and len(wanted) == 1:
        return Plan(config.path, config.text, config.text, f"CDI already enabled in [{header}]")
    after = _set_values(config, spec.cri_path, wanted, what="enable CDI")
    return Plan(config.path, config.text, after, f"enable CDI in [{header}]")


def plan_enable_cri(config: ConfigFile) -> Plan:
    """Take the CRI plugin's IDs out of ``disabled_plugins``; every other entry stays."""
    disabled = facts.disabled_cri_plugins(config.data)
    if not disabled:
        return Plan(config.path, config.text, config.text, "CRI plugin already enabled")
    try:
        edit = remove_items(without_bom(config.text), ("disabled_plugins",),
                            frozenset(disabled))
    except UneditableTableError as error:
        raise InputError(config.path, f"cannot enable the CRI plugin: {error}") from None
    shown = ", ".join(repr(item) for item in dict.fromkeys(disabled))
    return Plan(config.path, config.text, restyle(config.text, edit.text),
                f"enable the CRI plugin (removed {shown} from disabled_plugins)")


def plan_default_runtime(config: ConfigFile, name: str) -> Plan:
    """Make ``name`` the default runtime: every pod without a RuntimeClass will then use it."""
    spec = spec_of(config.data, path=config.path)
    header = render_key_path(spec.containerd_path)
    if facts.default_runtime_name(config.data, spec) == name:
        return Plan(config.path, config.text, config.text, f"{name} already the default runtime")
    after = _set_values(config, spec.containerd_path, {"default_runtime_name": name},
                        what=f"set the default runtime to {name}")
    return Plan(config.path, config.text, after,
                f"set default_runtime_name = {name!r} in [{header}]")


def _set_values(config: ConfigFile, table: tuple[str, ...], values: dict, *, what: str) -> str:
    """The config's text with ``values`` set in ``table`` (a one-line error when it cannot)."""
    text = without_bom(config.text)
    try:
        for key, value in values.items():
            text = set_value(text, (*table, key), value).text
    except UneditableTableError as error:
        raise InputError(config.path, f"cannot {what}: {error}") from None
    return restyle(config.text, text)


def chain(config: ConfigFile, parts: list[Callable[[ConfigFile], Plan]]) -> Plan:
    """Plan each part on the text the previous part produced; one plan for all of them."""
    current = config
    plans = []
    for part in parts:
        plan = part(current)
        plans.append(plan)
        if plan.changes:
            current = load_config_text(plan.after, config.path)
    changed = [plan.summary for plan in plans if plan.changes]
    summary = "; ".join(changed or [plan.summary for plan in plans])
    notes = tuple(note for plan in plans for note in plan.notes)
    return Plan(config.path, config.text, current.text, summary, notes)
