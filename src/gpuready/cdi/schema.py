"""The shape of a CDI spec (up to 1.1.0) and a decoder that reads data the way the loader does.

The loader turns YAML into JSON and decodes that strictly into typed fields. Three things follow
that a plain schema check would get wrong, so :func:`decode` reproduces them:

- an unknown field refuses the spec, but field names match *ignoring case* (``CDIVersion`` is
  read as ``cdiVersion``), as Go's JSON decoder matches them;
- a number or boolean where a string belongs is read as its text (``name: 0`` is device ``"0"``);
- ``null`` is the field's zero value (an empty string, an empty list, no struct).
"""

from __future__ import annotations

import re
from typing import Any

from gpuready.cdi.document import RULE_INVALID, Position, child_path
from gpuready.problems import Problem, Severity
from gpuready.records import Record

RULE_UNQUOTED = "cdi-spec-unquoted-scalar"
RULE_FIELD_CASE = "cdi-spec-field-case"

STRING, INT64, UINT32, BOOLEAN = "string", "int64", "uint32", "boolean"
_INT_RANGE = {INT64: (-(2**63), 2**63 - 1), UINT32: (0, 2**32 - 1)}


class ListOf(Record):
    """A list whose items all have type ``item``."""

    item: Any


class MapOf(Record):
    """A string-keyed map whose values all have type ``value``."""

    value: Any


class Struct(Record):
    """A struct with its fields; a ``pointer`` struct (or scalar) is None when absent."""

    name: str
    fields: dict[str, Any]
    pointer: bool = False


class Pointer(Record):
    """A pointer to a scalar: None when absent, so 0 and absent differ (``uid: 0``)."""

    scalar: str


DEVICE_NODE = Struct("DeviceNode", {
    "path": STRING, "hostPath": STRING, "type": STRING, "major": INT64, "minor": INT64,
    "fileMode": Pointer(UINT32), "permissions": STRING, "uid": Pointer(UINT32),
    "gid": Pointer(UINT32)}, pointer=True)
MOUNT = Struct("Mount", {"hostPath": STRING, "containerPath": STRING,
                         "options": ListOf(STRING), "type": STRING}, pointer=True)
HOOK = Struct("Hook", {"hookName": STRING, "path": STRING, "args": ListOf(STRING),
                       "env": ListOf(STRING), "timeout": Pointer(INT64)}, pointer=True)
INTEL_RDT = Struct("IntelRdt", {"closID": STRING, "l3CacheSchema": STRING,
                                "memBwSchema": STRING, "schemata": ListOf(STRING),
                                "enableMonitoring": BOOLEAN}, pointer=True)
NET_DEVICE = Struct("LinuxNetDevice", {"hostInterfaceName": STRING, "name": STRING},
                    pointer=True)
CONTAINER_EDITS = Struct("ContainerEdits", {
    "env": ListOf(STRING), "deviceNodes": ListOf(DEVICE_NODE), "hooks": ListOf(HOOK),
    "mounts": ListOf(MOUNT), "intelRdt": INTEL_RDT, "additionalGids": ListOf(UINT32),
    "netDevices": ListOf(NET_DEVICE)})
DEVICE = Struct("Device", {"name": STRING, "annotations": MapOf(STRING),
                           "containerEdits": CONTAINER_EDITS})
SPEC = Struct("Spec", {"cdiVersion": STRING, "kind": STRING, "annotations": MapOf(STRING),
                       "devices": ListOf(DEVICE), "containerEdits": CONTAINER_EDITS})

_LAST_SEGMENT = re.compile(r"(\.[^.\[]+|\[[^\]]*\])$")


def position_of(lines: dict[str, Position], key_path: str) -> Position | None:
    """The position of ``key_path``, or of its nearest parent that has one."""
    path = key_path
    while path:
        if path in lines:
            return lines[path]
        shorter = _LAST_SEGMENT.sub("", path)
        path = shorter if shorter != path else ""
    return None


def zero_value(kind: Any) -> Any:
    """The value the loader gives an absent or ``null`` field of type ``kind``."""
    if isinstance(kind, Struct):
        return None if kind.pointer else {name: zero_value(t) for name, t in kind.fields.items()}
    if isinstance(kind, ListOf):
        return []
    if isinstance(kind, MapOf):
        return {}
    if isinstance(kind, Pointer):
        return None
    return {STRING: "", INT64: 0, UINT32: 0, BOOLEAN: False}[kind]


class Decoder:
    """Decodes parsed data into the loader's typed shape, collecting problems on the way."""

    def __init__(self, file: str, lines: dict[str, Position] | None = None) -> None:
        self.file = file
        self.lines = lines or {}
        self.problems: list[Problem] = []

    def problem(self, rule: str, severity: Severity, key_path: str, message: str,
                fix: str = "") -> None:
        """Record one problem at ``key_path`` with the best position known."""
        line, column = position_of(self.lines, key_path) or (None, None)
        self.problems.append(Problem(rule, severity, message, self.file, key_path, line, column,
                                     fix))

    def decode(self, value: Any, kind: Any, path: str) -> Any:
        """``value`` as the loader reads it into type ``kind`` (the zero value on a mismatch)."""
        if value is None:
            return zero_value(kind)
        if isinstance(kind, Struct):
            return self._struct(value, kind, path)
        if isinstance(kind, ListOf):
            return self._list(value, kind, path)
        if isinstance(kind, MapOf):
            return self._map(value, kind, path)
        if isinstance(kind, Pointer):
            return self._scalar(value, kind.scalar, path)
        return self._scalar(value, kind, path)

    def _mismatch(self, path: str, expected: str, value: Any) -> None:
        self.problem(RULE_INVALID, Severity.ERROR, path,
                     f"expected {expected}, found {_describe(value)}")

    def _struct(self, value: Any, kind: Struct, path: str) -> Any:
        if not isinstance(value, dict):
            self._mismatch(path, "a mapping", value)
            return zero_value(kind)
        result = {name: zero_value(t) for name, t in kind.fields.items()}
        by_folded = {name.lower(): name for name in kind.fields}
        for raw_key, item in value.items():
            key = str(raw_key)
            here = child_path(path, key)
            name = key if key in kind.fields else by_folded.get(key.lower())
            if name is None:
                self.problem(RULE_INVALID, Severity.ERROR, here,
                             f"unknown field {key!r} in {kind.name} (the loader decodes "
                             f"strictly)", fix="known fields: " + ", ".join(kind.fields))
                continue
            if name != key:
                self.problem(RULE_FIELD_CASE, Severity.WARNING, here,
                             f"{key!r} is read as {name!r} only because the loader ignores "
                             "the case of field names", fix=f"write {name!r}")
            result[name] = self.decode(item, kind.fields[name], child_path(path, name))
        return result

    def _list(self, value: Any, kind: ListOf, path: str) -> list[Any]:
        if not isinstance(value, list):
            self._mismatch(path, "a list", value)
            return []
        items = []
        for index, item in enumerate(value):
            here = f"{path}[{index}]"
            if item is None and isinstance(kind.item, Struct):
                self.problem(RULE_INVALID, Severity.ERROR, here, "empty list entry")
                continue
            decoded = self.decode(item, kind.item, here)
            if decoded is None and isinstance(kind.item, Struct):
                continue  # not a mapping (already reported): nothing the checks can look into
            items.append(decoded)
        return items

    def _map(self, value: Any, kind: MapOf, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self._mismatch(path, "a mapping of strings", value)
            return {}
        return {str(key): self.decode(item, kind.value, child_path(path, str(key)))
                for key, item in value.items()}

    def _scalar(self, value: Any, kind: str, path: str) -> Any:
        if kind == STRING:
            return self._string(value, path)
        if kind == BOOLEAN:
            if isinstance(value, bool):
                return value
            self._mismatch(path, "true or false", value)
            return False
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = _INT_RANGE[kind]
            if low <= value <= high:
                return value
            self._mismatch(path, f"an integer from {low} to {high}", value)
            return 0
        self._mismatch(path, "an integer", value)
        return 0

    def _string(self, value: Any, path: str) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, (bool, int, float)):
            text = _as_go_text(value)
            self.problem(RULE_UNQUOTED, Severity.WARNING, path,
                         f"{value!r} is not a string; the loader reads it as "
                         f"{text!r}", fix=f"quote it: {text!r}")
            return text
        if isinstance(value, (list, dict)):
            self._mismatch(path, "a string", value)
            return ""
        return str(value)  # a YAML date or timestamp: its text


def _as_go_text(value: bool | int | float) -> str:
    """The text the loader gives a YAML number or boolean read into a string field."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return format(value, "g")


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
