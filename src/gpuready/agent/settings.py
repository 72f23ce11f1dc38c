"""The agent's settings: one YAML file (the DaemonSet's ConfigMap), read once at start.

Every key is checked before the agent looks at the node: a missing, unknown or badly typed key
is one line naming the file and the key (exit 2). The restart is this run's own option, as
``--restart-command`` is a command's: it is never read from the node.
"""

from __future__ import annotations

import math
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready.errors import InputError
from gpuready.records import Record

SYSTEMD, COMMAND = "systemd", "command"
CGROUP_MODES = ("true", "false", "inherit")
MAX_INTERVAL_S = 24 * 3600.0
SETTINGS_LIMIT = 64 * 1024  # bytes: a ConfigMap of a dozen keys


class Restart(Record):
    """How containerd is restarted: systemd's ``RestartUnit`` over D-Bus, or ``command`` (an
    argv, run without a shell)."""

    method: str
    command: tuple[str, ...] = ()

    def describe(self, unit: str | None = None) -> str:
        """One line for the reports: what runs."""
        if self.method == COMMAND:
            import shlex

            return shlex.join(self.command)
        return f"systemd RestartUnit {unit or '(the owner unit)'}"


class Settings(Record):
    """What the agent keeps on the node (see ``deploy/kubernetes/configmap.yaml``)."""

    runtime_name: str
    drop_in: bool
    enable_cdi: bool
    systemd_cgroup: str
    interval_seconds: float
    force: bool
    restart: Restart
    socket: str | None = None  # a node path; None: the owner's CRI socket

    @property
    def cgroup(self) -> str:
        """``systemd_cgroup`` as configure's ``--systemd-cgroup`` takes it."""
        return self.systemd_cgroup


REQUIRED = ("runtime_name", "drop_in", "enable_cdi", "systemd_cgroup", "interval_seconds",
            "force", "restart")
OPTIONAL = ("socket",)


def load_settings(path: Path) -> Settings:
    """The settings in ``path``; :class:`InputError` (exit 2) naming the key that is wrong."""
    import yaml

    try:
        with open(path, "rb") as handle:
            data = handle.read(SETTINGS_LIMIT + 1)
    except OSError as error:
        raise InputError(path, f"cannot read the agent's settings: {error.strerror or error}")\
            from None
    if len(data) > SETTINGS_LIMIT:
        raise InputError(path, f"the agent's settings are over {SETTINGS_LIMIT} bytes")
    try:
        document = yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise InputError(path, f"not YAML: {str(error).splitlines()[0]}") from None
    return settings_from(document, path)


def settings_from(document: Any, path: Path | str) -> Settings:
    """The settings a parsed document holds; :class:`InputError` for the first bad key."""
    if not isinstance(document, dict):
        raise InputError(path, "the agent's settings must be a mapping of keys "
                         f"({', '.join(REQUIRED)})")
    unknown = sorted(str(key) for key in document if key not in REQUIRED + OPTIONAL)
    if unknown:
        raise InputError(path, f"unknown key {unknown[0]!r} (the keys: "
                         f"{', '.join(REQUIRED + OPTIONAL)})")
    missing = [key for key in REQUIRED if key not in document]
    if missing:
        raise InputError(path, f"missing key {missing[0]!r}")

    def bad(key: str, what: str) -> InputError:
        return InputError(path, f"{key}: {what} (got {document[key]!r})")

    name = document["runtime_name"]
    if not isinstance(name, str) or _name_problem(name):
        raise bad("runtime_name", _name_problem(name) if isinstance(name, str) else
                  "a runtime name")
    for key in ("drop_in", "enable_cdi", "force"):
        if not isinstance(document[key], bool):
            raise bad(key, "true or false")
    cgroup = document["systemd_cgroup"]
    cgroup = str(cgroup).lower() if isinstance(cgroup, bool) else cgroup
    if cgroup not in CGROUP_MODES:
        raise bad("systemd_cgroup", "true, false or inherit")
    interval = document["interval_seconds"]
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (
            math.isfinite(interval) and 1 <= interval <= MAX_INTERVAL_S):
        raise bad("interval_seconds", f"seconds between resyncs, 1 to {MAX_INTERVAL_S:g}")
    socket = document.get("socket")
    if socket is not None and (not isinstance(socket, str) or not socket.startswith("/")
                               or _control(socket)):
        raise bad("socket", "the CRI socket's node path (absolute, such as "
                  "/run/containerd/containerd.sock)")
    return Settings(name, document["drop_in"], document["enable_cdi"], cgroup,
                    float(interval), document["force"], _restart(document["restart"], path),
                    None if socket is None else str(PurePosixPath(socket)))


def _restart(value: Any, path: Path | str) -> Restart:
    """``restart``: ``{method: systemd}`` or ``{method: command, command: [argv...]}``."""
    shape = "{method: systemd} or {method: command, command: [argv...]}"
    if not isinstance(value, dict) or value.get("method") not in (SYSTEMD, COMMAND):
        raise InputError(path, f"restart: {shape} (got {value!r})")
    if value["method"] == SYSTEMD:
        if set(value) != {"method"}:
            raise InputError(path, f"restart: method systemd takes no other key (got {value!r})")
        return Restart(SYSTEMD)
    command = value.get("command")
    if set(value) != {"method", "command"} or not isinstance(command, list) or not command \
            or not all(isinstance(part, str) and part and not _control(part) for part in command):
        raise InputError(path, f"restart.command: a non-empty list of strings, the argv run "
                         f"without a shell (got {command!r})")
    return Restart(COMMAND, tuple(command))


def _name_problem(value: str) -> str | None:
    """Why ``value`` cannot be the runtime's name and the RuntimeClass handler."""
    from gpuready.kubernetes.labels import label_problem

    if _control(value):
        return f"{value!r} holds a control character"
    return label_problem(value)


def _control(value: str) -> bool:
    return any(ord(char) < 32 or ord(char) == 127 for char in value)
