"""Plans for Docker's daemon.json: add or remove a runtime, the default runtime, ``features.cdi``.

Each plan is computed on the text and proved by re-parsing (:func:`jsontext.checked_edit`);
the one safe writer (:mod:`gpuready.fsio`) applies it. A file that does not exist is planned as
``{}`` (dockerd's defaults) and created.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpuready.engines.docker import jsontext
from gpuready.engines.docker.facts import RESERVED_RUNTIMES, render_release, supports_cdi
from gpuready.errors import InputError, UsageError
from gpuready.node import HOST, FileKind, Node
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.textfile import restyle, without_bom

EMPTY = "{}\n"


class DaemonConfig(Record):
    """One daemon.json: its text as on disk (None when absent), the JSON body, data and spans."""

    path: Path
    original: str | None
    body: str
    data: dict[str, Any]
    spans: jsontext.Node

    def runtimes(self) -> dict[str, Any]:
        """The ``runtimes`` object (empty when absent or not an object)."""
        value = self.data.get("runtimes")
        return value if isinstance(value, dict) else {}


def load_daemon_config(path: Path, *, node: Node = HOST) -> DaemonConfig:
    """Read daemon.json through ``node`` (absent: dockerd's defaults, ``{}``) and parse it;
    JSON errors are ``file:line:column`` InputErrors."""
    return parse_daemon_config(node.read_text_or_none(path, kind=FileKind.DOCKER_CONFIG), path)


def parse_daemon_config(text: str | None, path: Path) -> DaemonConfig:
    """A :class:`DaemonConfig` from text (None: the file does not exist yet)."""
    body = without_bom(EMPTY if text is None else text)
    data = jsontext.load_json(body, path)
    if not isinstance(data, dict):
        raise InputError(path, f"not a JSON object but {type(data).__name__}: dockerd "
                         "needs {...} at the top", line=1, column=1)
    try:
        spans = jsontext.parse_spans(body)
    except ValueError as error:
        raise InputError(path, f"refused: {error}") from None
    return DaemonConfig(path, text, body, data, spans)


def _plan(config: DaemonConfig, body: str, expected: dict, summary: str,
          notes: tuple[str, ...] = ()) -> Plan:
    jsontext.checked_edit(config.body, body, expected, config.path)
    after = restyle(config.original or "", body)
    return Plan(config.path, config.original, after, summary, notes)


def _unchanged(config: DaemonConfig, summary: str, notes: tuple[str, ...] = ()) -> Plan:
    after = config.original if config.original is not None else EMPTY
    return Plan(config.path, config.original, after, summary, notes)


class DockerRuntime(Record):
    """The runtime to register: its name and the executable dockerd hands containers to."""

    name: str
    path: str
    runtime_args: tuple[str, ...] = ()

    def entry(self) -> dict[str, Any]:
        """The ``runtimes`` entry as daemon.json spells it."""
        return {"path": self.path, "runtimeArgs": list(self.runtime_args)}


def plan_add_runtime(config: DaemonConfig, runtime: DockerRuntime) -> Plan:
    """Add ``runtimes.NAME`` (or set its ``path``), keeping every other byte."""
    if runtime.name in RESERVED_RUNTIMES:
        raise UsageError(f"dockerd reserves the runtime name {runtime.name!r} for its built-in "
                         "runc and refuses the whole file with it: choose another --runtime-name")
    _require_object(config, "runtimes")
    existing = config.runtimes().get(runtime.name)
    if isinstance(existing, dict) and existing.get("path") == runtime.path:
        return _unchanged(config, f"runtime {runtime.name} already registered in runtimes")
    expected = copy.deepcopy(config.data)
    unit = jsontext.indent_unit(config.body, config.spans)
    found = jsontext.find(config.spans, ("runtimes",))
    if found is None or config.data.get("runtimes") is None:  # absent, or null: no runtimes
        expected["runtimes"] = {runtime.name: runtime.entry()}
        body = (jsontext.insert_member(config.body, config.spans, "runtimes",
                                       expected["runtimes"], unit=unit) if found is None else
                jsontext.replace_value(config.body, found.value, expected["runtimes"],
                                       indent=_indent_of(config, found), unit=unit))
    elif not isinstance(existing, dict):
        _refuse_duplicates(config, found.value, runtime.name)
        if existing is not None or runtime.name in config.runtimes():
            raise InputError(config.path, f"runtimes.{runtime.name} is "
                             f"{type(existing).__name__}, not an object: correct it first")
        expected["runtimes"][runtime.name] = runtime.entry()
        body = jsontext.insert_member(config.body, found.value, runtime.name, runtime.entry(),
                                      unit=unit)
    else:
        return _set_runtime_path(config, runtime, expected, unit)
    return _plan(config, body, expected, f"register runtime {runtime.name} in runtimes "
                 f"(path {runtime.path})")


def _indent_of(config: DaemonConfig, found: jsontext.Member) -> str:
    line_start = config.body.rfind("\n", 0, found.key_start) + 1
    line = config.body[line_start:found.key_start]
    return line if not line.strip() else ""


def _set_runtime_path(config: DaemonConfig, runtime: DockerRuntime, expected: dict,
                      unit: str) -> Plan:
    entry = jsontext.find(config.spans, ("runtimes", runtime.name))
    expected["runtimes"][runtime.name]["path"] = runtime.path
    path_member = jsontext.member(entry.value, "path")
    if path_member is None:
        body = jsontext.insert_member(config.body, entry.value, "path", runtime.path, unit=unit)
    else:
        body = jsontext.replace_value(config.body, path_member.value, runtime.path, indent="",
                                      unit=unit)
    return _plan(config, body, expected,
                 f"set runtimes.{runtime.name}.path to {runtime.path}")


def plan_remove_runtime(config: DaemonConfig, name: str) -> Plan:
    """Remove ``runtimes.NAME`` (and ``runtimes`` when it is left empty, and a
    ``default-runtime`` naming it, which dockerd would refuse)."""
    if name not in config.runtimes():
        return _unchanged(config, f"runtime {name} is not registered in runtimes")
    expected = copy.deepcopy(config.data)
    del expected["runtimes"][name]
    runtimes = jsontext.find(config.spans, ("runtimes",))
    _refuse_duplicates(config, runtimes.value, name)
    summary = [f"remove runtime {name} from runtimes"]
    if expected["runtimes"]:
        body = jsontext.remove_member(config.body, runtimes.value, name)
    else:
        del expected["runtimes"]
        body = jsontext.remove_member(config.body, config.spans, "runtimes")
    if config.data.get("default-runtime") == name:
        del expected["default-runtime"]
        body = jsontext.remove_member(body, jsontext.parse_spans(body), "default-runtime")
        summary.append("remove default-runtime (it named the removed runtime)")
    return _plan(config, body, expected, "; ".join(summary))


def plan_default_runtime(config: DaemonConfig, name: str) -> Plan:
    """Set ``default-runtime``: every container started without ``--runtime`` then uses it."""
    if config.data.get("default-runtime") == name:
        return _unchanged(config, f"{name} already the default runtime")
    expected = copy.deepcopy(config.data)
    expected["default-runtime"] = name
    found = jsontext.find(config.spans, ("default-runtime",))
    unit = jsontext.indent_unit(config.body, config.spans)
    if found is None:
        body = jsontext.insert_member(config.body, config.spans, "default-runtime", name,
                                      unit=unit)
    else:
        body = jsontext.replace_value(config.body, found.value, name, indent="", unit=unit)
    return _plan(config, body, expected, f"set default-runtime to {name}")


def plan_enable_cdi(config: DaemonConfig, *, release: tuple[int, int] | None) -> Plan:
    """Set ``features.cdi = true`` where the installed Docker reads it; else say why not."""
    supported = supports_cdi(release)
    if supported is False:
        return _unchanged(config, "features.cdi not set", (
            f"the installed Docker is {render_release(release)}: it does not read features.cdi "
            "(CDI needs Docker 25.0 or later); features.cdi was not written",))
    features = config.data.get("features")
    if isinstance(features, dict) and features.get("cdi") is True:
        return _unchanged(config, "CDI already enabled (features.cdi)")
    _require_object(config, "features")
    notes = () if supported else ("no dockerd found to ask: features.cdi needs Docker 25.0 or "
                                  "later, earlier releases ignore it",)
    expected = copy.deepcopy(config.data)
    unit = jsontext.indent_unit(config.body, config.spans)
    found = jsontext.find(config.spans, ("features",))
    if found is None:
        expected["features"] = {"cdi": True}
        body = jsontext.insert_member(config.body, config.spans, "features", {"cdi": True},
                                      unit=unit)
    else:
        expected["features"]["cdi"] = True
        cdi = jsontext.member(found.value, "cdi")
        body = (jsontext.replace_value(config.body, cdi.value, True, indent="", unit=unit)
                if cdi else jsontext.insert_member(config.body, found.value, "cdi", True,
                                                   unit=unit))
    return _plan(config, body, expected, "enable CDI (features.cdi = true)", notes)


def _require_object(config: DaemonConfig, key: str) -> None:
    _refuse_duplicates(config, config.spans, key)
    value = config.data.get(key)
    if value is not None and not isinstance(value, dict):
        found = jsontext.find(config.spans, (key,))
        line, column = jsontext.position(config.body, found.value.start)
        raise InputError(config.path, f"{key} is {type(value).__name__}, not an object: "
                         "dockerd refuses this file; correct it first", line=line, column=column)


def _refuse_duplicates(config: DaemonConfig, node: jsontext.Node, key: str) -> None:
    """Two members with one name: which one an edit should touch is a guess; refuse it."""
    same = [m for m in node.members if m.key == key]
    if len(same) > 1:
        line, column = jsontext.position(config.body, same[0].key_start)
        raise InputError(config.path, f"{key!r} is written {len(same)} times in this object; "
                         "remove all but one first", line=line, column=column)
