"""CRI-O's drop-in: ``[crio.runtime.runtimes.NAME]`` in ``/etc/crio/crio.conf.d/99-nvidia.toml``.

Edits go through tomlkit, so an existing drop-in keeps its comments and layout. The new runtime
starts from the default runtime's table where crio.conf or an earlier drop-in has one (its
``runtime_type`` and conmon ``monitor_*`` settings), as nvidia-ctk builds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuready.compat import tomllib
from gpuready.containerd.document import toml_error
from gpuready.engines.crio import facts
from gpuready.errors import InputError, UsageError
from gpuready.node import HOST, FileKind, Node
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.textfile import restyle, without_bom


class CrioFile(Record):
    """One CRI-O config file: text as on disk (None when absent) and its data."""

    path: Path
    text: str | None
    data: dict[str, Any]


def read_crio_file(path: Path, *, missing_ok: bool, node: Node = HOST) -> CrioFile:
    """Read (through ``node``) and parse one CRI-O TOML file; syntax errors name file, line and
    column."""
    text = node.read_text_or_none(path, kind=FileKind.CRIO_CONFIG)
    if text is None:
        if missing_ok:
            return CrioFile(path, None, {})
        raise InputError(path, "no such file")
    try:
        data = tomllib.loads(without_bom(text))
    except tomllib.TOMLDecodeError as error:
        raise toml_error(str(error), without_bom(text), path) from None
    return CrioFile(path, text, data)


def read_text_data(text: str) -> dict[str, Any]:
    """The data of TOML text gpuready itself produced."""
    return tomllib.loads(without_bom(text))


def lookup(data: dict[str, Any], key_path: tuple[str, ...]) -> Any:
    """The value at ``key_path``, or None."""
    value: Any = data
    for key in key_path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def runtimes(data: dict[str, Any]) -> dict[str, Any]:
    """The runtime handler tables of one file (or of the merged config)."""
    value = lookup(data, facts.RUNTIMES_PATH)
    return value if isinstance(value, dict) else {}


def merge(files: list[CrioFile]) -> dict[str, Any]:
    """The configuration CRI-O uses: later files win key by key (crio.conf.d(5))."""
    merged: dict[str, Any] = {}
    for file in files:
        _merge_into(merged, file.data)
    return merged


def _merge_into(target: dict[str, Any], source: dict[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = value.copy() if isinstance(value, dict) else value


def node_files(main: Path, dropin_dir: Path, *, node: Node = HOST,
               skip: Path | None = None) -> list[CrioFile]:
    """crio.conf, then every ``*.conf``/``*.toml`` drop-in in lexical order (``skip`` left out)."""
    files = [read_crio_file(main, missing_ok=True, node=node)]
    for path in dropin_paths(dropin_dir, node=node):
        if path != skip:
            files.append(read_crio_file(path, missing_ok=False, node=node))
    return [file for file in files if file.text is not None]


def dropin_paths(dropin_dir: Path, *, node: Node = HOST) -> list[Path]:
    """The drop-ins CRI-O reads from ``dropin_dir``, in lexical order."""
    if not node.is_dir(dropin_dir):
        return []
    return [dropin_dir / name for name in node.listdir(dropin_dir)
            if node.is_file(dropin_dir / name) and name.endswith((".conf", ".toml"))]


class CrioRuntime(Record):
    """The runtime handler to register."""

    name: str
    path: str


def base_entry(others: list[CrioFile]) -> dict[str, Any]:
    """What the new runtime inherits from the default runtime in the rest of the config."""
    merged = merge(others)
    default = lookup(merged, facts.DEFAULT_RUNTIME_PATH) or facts.DEFAULT_RUNTIME
    base = runtimes(merged).get(default) or runtimes(merged).get("runc") or {}
    entry = {key: base[key] for key in facts.INHERITED_KEYS if key in base}
    entry.setdefault("runtime_type", "oci")
    return entry


def plan_add_runtime(dropin: CrioFile, runtime: CrioRuntime, *, base: dict[str, Any]) -> Plan:
    """Write ``[crio.runtime.runtimes.NAME]`` into the drop-in, keeping what it holds."""
    import tomlkit  # lazy: only edits pay for it, lint and doctor read with tomllib

    current = runtimes(dropin.data).get(runtime.name)
    if isinstance(current, dict) and current.get("runtime_path") == runtime.path:
        return _unchanged(dropin, f"runtime {runtime.name} already registered in "
                          f"[crio.runtime.runtimes.{runtime.name}]")
    document = tomlkit.parse(without_bom(dropin.text or ""))
    table = _ensure_tables(document, dropin.path)
    if isinstance(current, dict):
        table[runtime.name]["runtime_path"] = runtime.path
        summary = f"set runtime_path of runtime {runtime.name} to {runtime.path}"
    else:
        entry = tomlkit.table()
        entry["runtime_path"] = runtime.path
        for key, value in base.items():
            entry[key] = value
        table[runtime.name] = entry
        summary = f"register runtime {runtime.name} at [crio.runtime.runtimes.{runtime.name}]"
    return _plan(dropin, tomlkit.dumps(document), summary)


def plan_default_runtime(dropin: CrioFile, name: str) -> Plan:
    """Set ``crio.runtime.default_runtime``: every pod without a RuntimeClass then uses it."""
    import tomlkit  # lazy: only edits pay for it, lint and doctor read with tomllib

    if lookup(dropin.data, facts.DEFAULT_RUNTIME_PATH) == name:
        return _unchanged(dropin, f"{name} already the default runtime")
    document = tomlkit.parse(without_bom(dropin.text or ""))
    _ensure_tables(document, dropin.path)
    document["crio"]["runtime"]["default_runtime"] = name
    return _plan(dropin, tomlkit.dumps(document), f"set crio.runtime.default_runtime = {name!r}")


def plan_remove_runtime(dropin: CrioFile, name: str) -> Plan:
    """Remove ``[crio.runtime.runtimes.NAME]`` from the drop-in, and tables left empty."""
    import tomlkit  # lazy: only edits pay for it, lint and doctor read with tomllib

    if name not in runtimes(dropin.data):
        return _unchanged(dropin, f"runtime {name} is not registered in {dropin.path}")
    document = tomlkit.parse(without_bom(dropin.text or ""))
    table = document["crio"]["runtime"]["runtimes"]
    del table[name]
    notes: tuple[str, ...] = ()
    if lookup(dropin.data, facts.DEFAULT_RUNTIME_PATH) == name:
        del document["crio"]["runtime"]["default_runtime"]
        notes = (f"removed default_runtime = {name!r} too: it named the removed runtime",)
    _drop_empty(document)
    # tomlkit keeps the blank line it put before the table when it was added: drop it with it
    text = tomlkit.dumps(document).rstrip("\n")
    return _plan(dropin, text + "\n" if text else "", f"remove runtime {name}", notes)


def _ensure_tables(document, path: Path):
    import tomlkit

    node = document
    for key in facts.RUNTIMES_PATH:
        if key not in node:
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
        if not isinstance(node, dict):
            raise InputError(path, f"{'.'.join(facts.RUNTIMES_PATH)} is not a table; correct it "
                             "first")
    return node


def _drop_empty(document) -> None:
    for cut in range(len(facts.RUNTIMES_PATH), 0, -1):
        parent = document
        for key in facts.RUNTIMES_PATH[: cut - 1]:
            parent = parent[key]
        key = facts.RUNTIMES_PATH[cut - 1]
        if key in parent and not parent[key]:
            del parent[key]


def _plan(dropin: CrioFile, text: str, summary: str, notes: tuple[str, ...] = ()) -> Plan:
    tomllib.loads(text)  # what tomlkit wrote must parse; a failure is a bug, never written
    return Plan(dropin.path, dropin.text, restyle(dropin.text or "", text), summary, notes)


def _unchanged(dropin: CrioFile, summary: str) -> Plan:
    return Plan(dropin.path, dropin.text, dropin.text or "", summary)


def refuse_reserved(name: str) -> None:
    """Names CRI-O gives its own handlers are not replaced behind the operator's back."""
    if name in ("runc", "crun"):
        raise UsageError(f"{name!r} is CRI-O's own runtime: choose another --runtime-name")
