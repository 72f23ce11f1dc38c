"""What the running containerd loaded, compared with the config file on disk.

containerd reports the CRI config it runs with in ``Status(verbose=true).info["config"]`` (what
``crictl info`` prints). That JSON does not use the TOML key names: containerd 1.6/1.7 write
``defaultRuntimeName``, ``runtimeType`` and ``enableCDI``, while a runtime's ``options`` table is
passed through with its TOML keys as written (``binaryName`` stays ``binaryName``): what the shim
gets is decided when a sandbox starts, by the line's decoding (:mod:`gpuready.containerd.decoding`),
so both sides are compared as decoded. containerd 1.6 has no ``enableCDI`` at all (CDI arrived in
1.7); 2.1 and 2.3 report ``enableCDI: true`` and ``cdiSpecDirs`` by default. 2.x reports no
sandbox image at all (1.6 has ``sandboxImage``): the pause image is in the images plugin's
``pinned_images.sandbox``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuready.compat import StrEnum
from gpuready.containerd import decoding, facts
from gpuready.containerd.decoding import Line, Verdict
from gpuready.containerd.document import ConfigFile
from gpuready.containerd.versions import ConfigVersion, spec_of
from gpuready.cri.process import ServingProcess
from gpuready.kubernetes import runtimeclass
from gpuready.kubernetes.runtimeclass import RuntimeClass
from gpuready.node import Node


class Outcome(StrEnum):
    """The result of one check; only ``failed`` fails the command."""

    OK = "ok"
    WARNING = "warning"
    FAILED = "failed"


@dataclass(frozen=True)
class CheckResult:
    """One comparison: its name, outcome, a one-line message, and both values when compared."""

    check: str
    outcome: Outcome
    message: str
    on_disk: Any = None
    live: Any = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data


def live_verdict(checks: list[CheckResult], probe: Any | None) -> bool:
    """A live verification passes when no check failed and the probe, when one ran (it has
    ``ok`` and ``removed``), came up and was cleaned up."""
    if any(check.outcome is Outcome.FAILED for check in checks):
        return False
    return probe is None or (probe.ok and probe.removed)


# The runc fields verify --live and the probe compare.
COMPARED_FIELDS = ("BinaryName", "SystemdCgroup")


@dataclass(frozen=True)
class Decoded:
    """One runc field as containerd decodes it: the value, and the key it came from.

    ``known`` is False when no recorded line tells what containerd does with these spellings;
    ``value`` is then None and means nothing.
    """

    value: Any
    key: str | None
    known: bool = True

    def show(self, field_name: str) -> str:
        """``/usr/bin/x`` (``(as binaryName)`` when another spelling is used), or unknown."""
        if not self.known:
            return "unknown (spellings never recorded together)"
        shown = _show(self.value)
        return f"{shown} (as {self.key})" if self.key not in (None, field_name) else shown


def decode_field(options: Mapping[str, Any], field_name: str, lines: tuple[Line, ...]) -> Decoded:
    """What ``lines`` decode ``field_name`` to; unknown when they disagree or never recorded."""
    readings = [decoding.read_field(options, field_name, line) for line in lines]
    if any(r.verdict is Verdict.UNKNOWN for r in readings) or len({r.key for r in readings}) > 1:
        return Decoded(None, None, known=False)
    key = readings[0].key
    return Decoded(options.get(key) if key else None, key)


@dataclass(frozen=True)
class LiveRuntime:
    """One runtime handler as the running containerd loaded it.

    ``options`` are the keys as loaded (containerd passes them through as written); ``decoded``
    holds the compared fields as the running line decodes them for the shim.
    """

    name: str
    runtime_type: str
    options: Mapping[str, Any] = field(default_factory=dict)
    decoded: Mapping[str, Decoded] = field(default_factory=dict)

    def field(self, field_name: str) -> Decoded:
        """The decoded value of a compared field (unset when not decoded)."""
        return self.decoded.get(field_name, Decoded(self.options.get(field_name), field_name))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "name": self.name,
            "runtime_type": self.runtime_type,
            "options": dict(self.options),
            "decoded": {
                name: {"value": d.value, "key": d.key, "known": d.known}
                for name, d in self.decoded.items()
            },
        }


@dataclass(frozen=True)
class LiveConfig:
    """The CRI settings gpuready compares, read from the running containerd."""

    runtimes: Mapping[str, LiveRuntime]
    default_runtime_name: str | None
    enable_cdi: bool | None  # None: this containerd does not report it (1.6)
    sandbox_image: str | None


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    """The value of the first of ``keys`` present (containerd releases spell keys differently)."""
    for key in keys:
        if key in mapping:
            return mapping[key]
    return None


def parse_live_config(
    config: Mapping[str, Any], *, lines: tuple[Line, ...] = decoding.LINES
) -> LiveConfig:
    """Read the runtimes, default runtime, enable_cdi and pause image from ``info["config"]``.

    ``lines`` are the containerd lines whose option decoding applies (the running one's).
    """
    containerd = _first(config, "containerd") or {}
    table = _first(containerd, "runtimes") or {}
    runtimes = {}
    for name, entry in table.items():
        if not isinstance(entry, Mapping):
            continue
        options = _first(entry, "options")
        options = options if isinstance(options, Mapping) else {}
        runtimes[name] = LiveRuntime(
            name=name,
            runtime_type=_first(entry, "runtimeType", "runtime_type", "Type") or "",
            options=options,
            decoded={f: decode_field(options, f, lines) for f in COMPARED_FIELDS},
        )
    return LiveConfig(
        runtimes=runtimes,
        default_runtime_name=_first(containerd, "defaultRuntimeName", "default_runtime_name"),
        enable_cdi=_first(config, "enableCDI", "enable_cdi"),
        sandbox_image=_first(config, "sandboxImage", "sandbox_image"),
    )


def disk_sandbox_image(data: Mapping[str, Any], spec: ConfigVersion) -> str | None:
    """The pause image the file names: ``sandbox_image`` in the CRI table (versions 1 and 2),
    ``pinned_images.sandbox`` of the images plugin (versions 3 and 4)."""
    value = facts.lookup(data, facts.sandbox_image_path(spec))
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Comparison:
    """Everything :func:`compare` needs besides the two configs."""

    runtime_name: str
    handler: str
    root: Path = Path("/")
    served_by: ServingProcess | None = None
    lines: tuple[Line, ...] = decoding.LINES  # whose option decoding applies


def why_not_live(disk: ConfigFile, context: Comparison) -> str:
    """The likeliest reason the file on disk and the running containerd disagree."""
    served = context.served_by
    if served is None:
        return "restart containerd, or check which file it reads (containerd --config)"
    read_path = Node(context.root).path(served.config_path)
    if os.path.abspath(read_path) != os.path.abspath(disk.path):
        return f"containerd (pid {served.pid}) reads {served.config_path}, not {disk.path}"
    try:
        changed = disk.path.stat().st_mtime
    except OSError:
        changed = None
    if changed is not None and changed > served.started_at:
        return (
            f"the file changed after containerd (pid {served.pid}) started: "
            "restart containerd (systemctl restart containerd)"
        )
    return f"containerd (pid {served.pid}) reads this file; check its imports (drop-ins)"


def compare_value(
    check: str, label: str, disk_value: Any, live_value: Any, reason: str
) -> CheckResult:
    """One key compared: equal is ok, different says both values and why."""
    if disk_value == live_value:
        return CheckResult(
            check, Outcome.OK, f"{label}: {_show(live_value)}", disk_value, live_value
        )
    return CheckResult(
        check,
        Outcome.FAILED,
        f"{label}: on disk {_show(disk_value)}, live {_show(live_value)} ({reason})",
        disk_value,
        live_value,
    )


def _show(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def compare_decoded(
    check: str, label: str, disk_value: Decoded, live_value: Decoded, reason: str
) -> CheckResult:
    """One runc field compared as containerd decodes it on both sides."""
    field_name = label.rsplit(" ", 1)[-1]
    if not (disk_value.known and live_value.known):
        return CheckResult(
            check,
            Outcome.WARNING,
            f"{label}: on disk {disk_value.show(field_name)}, live {live_value.show(field_name)}:"
            " which value containerd uses is not known (see option-spelled-twice)",
            None,
            None,
        )
    result = compare_value(check, label, disk_value.value, live_value.value, reason)
    if result.outcome is Outcome.OK and live_value.key not in (None, field_name):
        message = f"{label}: {live_value.show(field_name)}"
        return CheckResult(check, Outcome.OK, message, result.on_disk, result.live)
    return result


def runtime_checks(
    disk: ConfigFile, spec: ConfigVersion, live: LiveConfig, context: Comparison
) -> list[CheckResult]:
    """The runtime present in both, and its runtime_type, BinaryName and SystemdCgroup equal."""
    name = context.runtime_name
    entry = facts.runtime(disk.data, spec, name)
    loaded = live.runtimes.get(name)
    live_names = ", ".join(sorted(live.runtimes)) or "none"
    reason = why_not_live(disk, context)
    if entry is None and loaded is None:
        return [
            CheckResult(
                "runtime-loaded",
                Outcome.FAILED,
                f"runtime {name} is neither in {disk.path} nor loaded (live: {live_names})",
            )
        ]
    if loaded is None:
        return [
            CheckResult(
                "runtime-loaded",
                Outcome.FAILED,
                f"runtime {name}: on disk, not live: {disk.path} registers it but the running "
                f"containerd has not loaded it (live: {live_names}); {reason}",
                on_disk=True,
                live=False,
            )
        ]
    if entry is None:
        drop_ins = facts.imports(disk.data)
        return [
            CheckResult(
                "runtime-loaded",
                Outcome.WARNING if drop_ins else Outcome.FAILED,
                f"runtime {name}: live, not on disk: containerd loaded it but {disk.path} "
                + (
                    f"does not register it (a drop-in may: {', '.join(drop_ins)})"
                    if drop_ins
                    else f"does not register it; it will be gone after a restart ({reason})"
                ),
                on_disk=False,
                live=True,
            )
        ]
    options = facts.runtime_options(entry)
    results = [CheckResult("runtime-loaded", Outcome.OK, f"runtime {name} is loaded", True, True)]
    results.append(
        compare_value(
            "runtime-type",
            f"{name} runtime_type",
            entry.get("runtime_type"),
            loaded.runtime_type or None,
            reason,
        )
    )
    for key, check in (("BinaryName", "binary-name"), ("SystemdCgroup", "systemd-cgroup")):
        on_disk = decode_field(options, key, context.lines)
        results.append(compare_decoded(check, f"{name} {key}", on_disk, loaded.field(key), reason))
    return results


def default_runtime_check(
    disk: ConfigFile, spec: ConfigVersion, live: LiveConfig, context: Comparison
) -> list[CheckResult]:
    """The default runtime equal on disk and live, and not the GPU runtime."""
    result = compare_value(
        "default-runtime",
        "default runtime",
        facts.default_runtime_name(disk.data, spec),
        live.default_runtime_name or facts.CONTAINERD_DEFAULT_RUNTIME,
        why_not_live(disk, context),
    )
    if result.outcome is Outcome.OK and result.live == context.runtime_name:
        return [
            CheckResult(
                "default-runtime",
                Outcome.WARNING,
                f"default runtime is {context.runtime_name}: every pod, GPU or not, goes through "
                "it; keep runc and select the GPU runtime with a RuntimeClass",
                result.on_disk,
                result.live,
            )
        ]
    return [result]


def cdi_check(
    disk: ConfigFile, spec: ConfigVersion, live: LiveConfig, context: Comparison
) -> list[CheckResult]:
    """``enable_cdi`` equal on disk and live; a warning where this containerd has no CDI."""
    on_disk = facts.lookup(disk.data, (*spec.cri_path, "enable_cdi"))
    if live.enable_cdi is None:
        if on_disk:
            return [
                CheckResult(
                    "enable-cdi",
                    Outcome.WARNING,
                    "enable_cdi: on disk true, but this containerd does not report CDI support "
                    "(containerd 1.7 or newer is needed): CDI devices are not injected",
                    on_disk,
                    None,
                )
            ]
        return [CheckResult("enable-cdi", Outcome.OK, "enable_cdi: not set, not supported live")]
    return [
        compare_value(
            "enable-cdi",
            "enable_cdi",
            facts.cdi_enabled(disk.data, spec),  # unset means on in containerd 2.x
            bool(live.enable_cdi),
            why_not_live(disk, context),
        )
    ]


def cri_enabled_check(disk: ConfigFile) -> list[CheckResult]:
    """A file that disables the CRI plugin serves no handler once containerd restarts."""
    disabled = facts.disabled_cri_plugins(disk.data)
    if not disabled:
        return []
    return [
        CheckResult(
            "cri-enabled",
            Outcome.FAILED,
            f"{disk.path} disables the CRI plugin (disabled_plugins = {disabled}): after a "
            "restart containerd serves no runtime handler to the kubelet",
            on_disk=disabled,
        )
    ]


def handler_check(
    handler: str, live: LiveConfig, *, source: str, disk: ConfigFile, context: Comparison
) -> CheckResult:
    """A RuntimeClass handler (or --handler) is a runtime the running containerd loaded."""
    if handler in live.runtimes:
        return CheckResult(
            "runtimeclass-handler",
            Outcome.OK,
            f"{source}: handler {handler} is loaded",
            handler,
            handler,
        )
    live_names = ", ".join(sorted(live.runtimes)) or "none"
    message = f"{source}: handler {handler} is not a loaded runtime (live: {live_names})"
    if facts.runtime(disk.data, spec_of(disk.data, path=disk.path), handler) is not None:
        message += f"; on disk, not live: {disk.path} registers it ({why_not_live(disk, context)})"
    return CheckResult(
        "runtimeclass-handler",
        Outcome.FAILED,
        message + "; pods with this RuntimeClass fail with RunContainerError",
        handler,
        None,
    )


def compare(disk: ConfigFile, live: LiveConfig, context: Comparison) -> list[CheckResult]:
    """Every check of the file on disk against the running containerd, in report order."""
    spec = spec_of(disk.data, path=disk.path)
    results = cri_enabled_check(disk)
    results += runtime_checks(disk, spec, live, context)
    results += default_runtime_check(disk, spec, live, context)
    results += cdi_check(disk, spec, live, context)
    if context.handler != context.runtime_name:
        results.append(
            handler_check(context.handler, live, source="--handler", disk=disk, context=context)
        )
    return results


def load_runtimeclasses(path: Path) -> list[RuntimeClass]:
    """Every RuntimeClass in a YAML file; a file without one is bad input."""
    return runtimeclass.require_some(runtimeclass.load(path), path)


def runtimeclass_checks(
    classes: Iterable[RuntimeClass], disk: ConfigFile, live: LiveConfig, context: Comparison
) -> list[CheckResult]:
    """One handler check per RuntimeClass."""
    results = []
    for found in classes:
        source = f"{found.file}: RuntimeClass {found.name or '?'}"
        if not isinstance(found.handler, str) or not found.handler:
            results.append(
                CheckResult("runtimeclass-handler", Outcome.FAILED, f"{source} has no handler")
            )
        else:
            results.append(
                handler_check(found.handler, live, source=source, disk=disk, context=context)
            )
    return results
