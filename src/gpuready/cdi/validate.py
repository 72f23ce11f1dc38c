"""Validate CDI specs exactly as the CDI loader does, and discover the devices of a node.

Every rule the loader enforces is an error under the rule ``cdi-spec-invalid``: required fields,
the kind, device names, unique names, non-empty device edits, ``KEY=VALUE`` environment entries,
device node types and permissions, mount and hook fields, hook names, unknown fields, and the
minimum ``cdiVersion`` the content needs. Where SPEC.md asks for more than the loader (an absolute
hook path, DNS vendor names, class names of 63 characters or less, a positive hook timeout) the
finding is a warning under ``cdi-spec-strict``. The loader stops at its first error; this module
reports them all.

Directories are read the way the CDI cache reads them (:func:`scan`): only ``*.json`` and
``*.yaml`` files directly inside, a later directory overriding an earlier one, and the same
device in two files of one directory refusing that device (``cdi-device-conflict``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready import sametext
from gpuready.cdi import names
from gpuready.cdi.document import (
    RULE_INVALID,
    Position,
    SpecDocument,
    child_path,
    first_document,
    load_spec_file,
    parse_spec_text,
)
from gpuready.cdi.schema import SPEC, Decoder
from gpuready.cdi.versions import (
    EARLIEST_VERSION,
    Requirement,
    is_known_version,
    requirements,
    version_key,
)
from gpuready.errors import InputError
from gpuready.node import HOST, FileKind, Node
from gpuready.paths import CDI_DIRS
from gpuready.problems import Problem, Severity, has_errors
from gpuready.records import Factory, MutableRecord, Record

RULE_STRICT = "cdi-spec-strict"
RULE_CONFLICT = "cdi-device-conflict"
RULE_IGNORED = "cdi-spec-ignored"
RULE_OVERRIDDEN = "cdi-device-overridden"
SPEC_SUFFIXES = (".json", ".yaml")
HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart",
              "poststop")
DEVICE_NODE_TYPES = ("", "b", "c", "u", "p")


class _Checker:
    """The loader's checks over one decoded spec; each finding becomes a Problem."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder

    def error(self, key_path: str, message: str, fix: str = "") -> None:
        self.decoder.problem(RULE_INVALID, Severity.ERROR, key_path, message, fix)

    def warning(self, key_path: str, message: str, fix: str = "") -> None:
        self.decoder.problem(RULE_STRICT, Severity.WARNING, key_path, message, fix)

    def spec(self, spec: dict[str, Any]) -> None:
        self.version(spec)
        self.kind(spec["kind"])
        self.annotations("annotations", spec["annotations"])
        self.edits("containerEdits", spec["containerEdits"])
        self.devices(spec["devices"])

    def version(self, spec: dict[str, Any]) -> None:
        declared = spec["cdiVersion"]
        if not declared:
            self.error("cdiVersion", "cdiVersion is required", fix="cdiVersion: \"0.5.0\"")
            return
        if not is_known_version(declared):
            self.error("cdiVersion", f"invalid version {declared!r}",
                       fix="use a published version such as \"0.5.0\"")
            return
        needed = _strongest(spec, as_loader=True)
        floor = needed.version if needed else EARLIEST_VERSION
        if _version_key(floor) > _version_key(declared):
            why = f" ({needed.reason} at {needed.key_path})" if needed else ""
            self.error(needed.key_path if needed else "cdiVersion",
                       f"the spec version must be at least v{floor}{why}, "
                       f"but cdiVersion is {declared!r}", fix=f"cdiVersion: \"{floor}\"")
            return
        text_needs = _strongest(spec)
        if text_needs and _version_key(text_needs.version) > _version_key(declared):
            # The loader's check sees only the last device's edits (see versions.requirements).
            self.warning(text_needs.key_path,
                         f"{text_needs.reason} needs cdiVersion v{text_needs.version}, but "
                         f"cdiVersion is {declared!r}; the CDI loader accepts it only because "
                         "its version check looks at the last device's edits (a loop-variable "
                         "capture in its Go code), and a fixed loader will refuse it",
                         fix=f"cdiVersion: \"{text_needs.version}\"")

    def kind(self, kind: str) -> None:
        reason = names.kind_problem(kind)
        if reason:
            self.error("kind", reason, fix="kind: nvidia.com/gpu")
        elif strict := names.kind_strict_problem(kind):
            self.warning("kind", f"{strict} (SPEC.md asks it; the loader accepts it)")

    def annotations(self, path: str, annotations: dict[str, str]) -> None:
        for key in annotations:
            reason = names.annotation_key_problem(key)
            if reason:
                self.error(child_path(path, key), reason)
        size = names.annotations_size(annotations)
        if size > names.ANNOTATIONS_SIZE_LIMIT:
            self.error(path, f"annotations are {size} bytes, more than the "
                       f"{names.ANNOTATIONS_SIZE_LIMIT} the loader allows")

    def devices(self, devices: list[dict[str, Any]]) -> None:
        if not devices:
            self.error("devices", "invalid spec, no devices: at least one device is required")
        seen: dict[str, int] = {}
        for index, device in enumerate(devices):
            path = f"devices[{index}]"
            name = device["name"]
            reason = names.device_name_problem(name)
            if reason:
                self.error(f"{path}.name", reason)
            elif name in seen:
                self.error(f"{path}.name", f"invalid spec, multiple device {name!r} (also "
                           f"devices[{seen[name]}])", fix="give every device its own name")
            seen.setdefault(name, index)
            self.annotations(f"{path}.annotations", device["annotations"])
            if _edits_empty(device["containerEdits"]):
                self.error(f"{path}.containerEdits", "invalid device, empty device edits",
                           fix="give the device at least one env, deviceNodes, mounts, hooks, "
                           "additionalGids or intelRdt entry")
            self.edits(f"{path}.containerEdits", device["containerEdits"])

    def edits(self, path: str, edits: dict[str, Any]) -> None:
        self.env(f"{path}.env", edits["env"])
        for index, node in enumerate(edits["deviceNodes"]):
            self.device_node(f"{path}.deviceNodes[{index}]", node)
        for index, hook in enumerate(edits["hooks"]):
            self.hook(f"{path}.hooks[{index}]", hook)
        for index, mount in enumerate(edits["mounts"]):
            self.mount(f"{path}.mounts[{index}]", mount)
        if edits["intelRdt"] is not None:
            self.intel_rdt(f"{path}.intelRdt", edits["intelRdt"])
        for index, device in enumerate(edits["netDevices"]):
            self.net_device(f"{path}.netDevices[{index}]", device)

    def env(self, path: str, env: list[str]) -> None:
        for index, entry in enumerate(env):
            if entry.find("=") <= 0:  # "=x" is refused too: the name must not be empty
                self.error(f"{path}[{index}]", f"invalid environment variable {entry!r}: "
                           "expected KEY=VALUE", fix="write it as KEY=VALUE")

    def device_node(self, path: str, node: dict[str, Any]) -> None:
        if not node["path"]:
            self.error(f"{path}.path", "invalid (empty) device path")
        if node["type"] not in DEVICE_NODE_TYPES:
            self.error(f"{path}.type", f"invalid device node type {node['type']!r}",
                       fix="use b, c, u, p, or leave it out")
        if set(node["permissions"]) - set("rwm"):
            self.error(f"{path}.permissions", f"invalid permissions {node['permissions']!r}",
                       fix="use only the letters r, w and m")

    def hook(self, path: str, hook: dict[str, Any]) -> None:
        if hook["hookName"] not in HOOK_NAMES:
            self.error(f"{path}.hookName", f"invalid hook name {hook['hookName']!r}",
                       fix="one of " + ", ".join(HOOK_NAMES))
        if not hook["path"]:
            self.error(f"{path}.path", "invalid hook with empty path")
        elif not PurePosixPath(hook["path"]).is_absolute():
            self.warning(f"{path}.path", f"hook path {hook['path']!r} is not absolute "
                         "(SPEC.md asks it; the loader accepts it)")
        self.env(f"{path}.env", hook["env"])
        if hook["timeout"] is not None and hook["timeout"] <= 0:
            self.warning(f"{path}.timeout", f"hook timeout {hook['timeout']} is not positive "
                         "(SPEC.md asks it; the loader accepts it)")

    def mount(self, path: str, mount: dict[str, Any]) -> None:
        if not mount["hostPath"]:
            self.error(f"{path}.hostPath", "invalid mount, empty host path")
        if not mount["containerPath"]:
            self.error(f"{path}.containerPath", "invalid mount, empty container path")

    def intel_rdt(self, path: str, rdt: dict[str, Any]) -> None:
        clos = rdt["closID"]
        if len(clos) >= 4096 or clos in (".", "..") or "/" in clos or "\n" in clos:
            self.error(f"{path}.closID", f"invalid closID {clos!r}: must be a file name")

    def net_device(self, path: str, device: dict[str, Any]) -> None:
        for key in ("hostInterfaceName", "name"):
            value = device[key]
            if not value:
                self.error(f"{path}.{key}", f"invalid (empty) {key}")
            elif len(value) > 15 or value in (".", "..") or any(
                char in "/:" or char.isspace() for char in value
            ):
                self.error(f"{path}.{key}", f"invalid network interface name {value!r}")


def _strongest(spec: dict[str, Any], *, as_loader: bool = False) -> Requirement | None:
    """:func:`gpuready.cdi.versions.strongest_requirement`, with the spec's requirements listed
    once (it lists them twice: for the minimum version, then for the first that asks it)."""
    found = requirements(spec, as_loader=as_loader)
    needed = EARLIEST_VERSION
    for requirement in found:
        if _version_key(requirement.version) > _version_key(needed):
            needed = requirement.version
    return next((r for r in found if r.version == needed), None)


# version_key of the few versions there are (the known ones, and those requirements name).
_version_key = functools.lru_cache(maxsize=64)(version_key)


def _edits_empty(edits: dict[str, Any]) -> bool:
    return not any(edits[key] for key in ("env", "deviceNodes", "hooks", "mounts",
                                          "additionalGids", "netDevices")) and (
        edits["intelRdt"] is None)


def decode_spec(data: Any, *, file: str, lines: dict[str, Position] | None = None
                ) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The spec as the loader reads it (None when it reads nothing) and the decoding problems."""
    decoder = Decoder(file, lines)
    if data is None:
        decoder.problem(RULE_INVALID, Severity.ERROR, "", "no spec data (the file is empty)")
        return None, decoder.problems
    if not isinstance(data, dict):
        decoder.problem(RULE_INVALID, Severity.ERROR, "",
                        "a spec must be a mapping with cdiVersion, kind and devices")
        return None, decoder.problems
    return decoder.decode(data, SPEC, ""), decoder.problems


def validate_spec(data: Any, *, file: str, lines: dict[str, Position] | None = None
                  ) -> list[Problem]:
    """Every problem the loader (errors) and SPEC.md (warnings) find in parsed spec ``data``.

    ``lines`` maps field paths (``devices[0].name``) to 1-based (line, column) positions, as
    :mod:`gpuready.cdi.document` records them; problems then carry their line.
    """
    return _checked(data, file=file, lines=lines)[1]


def _checked(data: Any, *, file: str, lines: dict[str, Position] | None
             ) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The spec as the loader decodes it (None when it reads nothing) and every problem."""
    spec, problems = decode_spec(data, file=file, lines=lines)
    if spec is None:
        return None, problems
    checker = _Checker(Decoder(file, lines))
    checker.spec(spec)
    return spec, _in_file_order(problems + checker.decoder.problems)


def validate_document(document: SpecDocument) -> list[Problem]:
    """Problems of a parsed file: its parse problems, else those of its content."""
    return _document_checked(document)[1]


def _document_checked(document: SpecDocument) -> tuple[dict[str, Any] | None, list[Problem]]:
    if document.problems and has_errors(document.problems) and document.data is None:
        return None, document.problems
    spec, problems = _checked(document.data, file=document.path, lines=document.lines)
    return spec, _in_file_order(document.problems + problems)


def validate_file(path: Path | str) -> list[Problem]:
    """Every problem in the spec file at ``path``; raises InputError when it cannot be read."""
    return validate_document(load_spec_file(Path(path)))


def _in_file_order(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.line or 0, p.column or 0))


class SpecFile(MutableRecord):
    """One spec file found by a scan: its problems and, when the loader accepts it, its kind,
    devices and declared ``cdiVersion``."""

    path: Path
    problems: list[Problem] = Factory(list)
    kind: str = ""
    devices: list[str] = Factory(list)
    version: str = ""

    @property
    def accepted(self) -> bool:
        """True when the loader accepts the file on its own (conflicts aside)."""
        return not has_errors(self.problems)


class CdiDevice(Record):
    """A fully-qualified device (``nvidia.com/gpu=0``) and the spec file that defines it."""

    name: str
    file: Path


class Scan(MutableRecord):
    """What a runtime would see: every spec file, the devices it resolves, what went wrong."""

    specs: list[SpecFile] = Factory(list)
    devices: dict[str, CdiDevice] = Factory(dict)
    unreadable: list[InputError] = Factory(list)

    @property
    def problems(self) -> list[Problem]:
        """Every problem of every file, file by file."""
        return [problem for spec in self.specs for problem in spec.problems]


# The decoded specs of the last texts without a problem: a run reads a node's spec for its
# problems and again for its staleness (:func:`gpuready.cdi.staleness.read_decoded`).
_RECENT_SPECS = sametext.Recent()


def recent_spec(text: str, *, as_json: bool) -> dict[str, Any] | None:
    """The decoded spec :func:`load_spec` made a moment ago from ``text`` (read as JSON or
    YAML) when it had not a single problem; None otherwise."""
    return _RECENT_SPECS.get((text, as_json))


def load_spec(path: Path, *, node: Node = HOST) -> SpecFile:
    """Validate one file and, when the loader accepts it, read its kind and device names.

    A text without a single problem gives the same kind and devices wherever it is: while
    :mod:`gpuready.sametext` shares, files with that text (read the same way: JSON or YAML) reuse
    them.
    """
    text = node.read_text(path, kind=FileKind.CDI_SPEC)
    as_json = path.suffix == ".json"
    key = (text, as_json)
    clean = sametext.get("cdi-spec", key)
    if clean is not None:
        kind, devices, version = clean
        return SpecFile(path, [], kind, list(devices), version)
    spec = None if as_json else _clean_yaml_spec(text, str(path))
    if spec is not None:
        problems: list[Problem] = []
    else:  # a problem to report (or a text the short way does not take): read with positions
        spec, problems = _document_checked(parse_spec_text(text, path))
    found = SpecFile(path, problems)
    if found.accepted and spec is not None:  # decoded once: for the problems, and here
        found.kind = spec["kind"]
        found.devices = [names.qualified_name(spec["kind"], d["name"]) for d in spec["devices"]]
        found.version = spec["cdiVersion"]
    if not problems:
        sametext.put("cdi-spec", key, (found.kind, tuple(found.devices), found.version),
                     size=len(text))
        if spec is not None:
            _RECENT_SPECS.put(key, spec)
    return found


def _clean_yaml_spec(text: str, file: str) -> dict[str, Any] | None:
    """The decoded spec of a YAML text that has not a single problem, else None.

    Problems are where positions are needed: a text without any is decoded without recording
    where each field is. None (the text has a problem, or is one this short way does not take:
    a ``...`` end marker, more than one document, a repeated key) leaves the text to
    :func:`parse_spec_text`, which records the positions and reports what it finds.
    """
    import yaml

    from gpuready import yamlfile

    if first_document(text)[1] is not None:
        return None
    try:
        nodes = yamlfile.compose_all(text)
        if len(nodes) != 1:
            return None
        data = yamlfile.construct(nodes[0])
    except yaml.YAMLError:
        return None
    if _has_repeated_key(nodes[0]):  # after constructing: merge keys are flattened by then
        return None
    spec, problems = _checked(data, file=file, lines=None)
    return spec if spec is not None and not problems else None


def _has_repeated_key(root: Any) -> bool:
    """True when a mapping below ``root`` repeats a key (the loader refuses the file)."""
    import yaml

    scalar, mapping = yaml.ScalarNode, yaml.MappingNode
    seen_nodes: set[int] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, scalar) or id(node) in seen_nodes:
            continue  # a scalar; or an alias, its node looked at where its anchor is
        seen_nodes.add(id(node))
        if isinstance(node, mapping):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                key = key_node.value if type(key_node.value) is str else str(key_node.value)
                if key in keys and key != "<<":
                    return True
                keys.add(key)
                pending.append(value_node)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
    return False


def spec_files_in(directory: Path, *, node: Node = HOST) -> tuple[list[Path], list[Problem]]:
    """The files the CDI cache reads in ``directory`` (sorted), and notes on what it skips."""
    files: list[Path] = []
    notes: list[Problem] = []
    for entry in (directory / name for name in node.listdir(directory)):
        if node.is_dir(entry):
            continue  # the cache does not descend into folders
        if entry.suffix in SPEC_SUFFIXES:
            files.append(entry)
        elif entry.suffix == ".yml":
            notes.append(Problem(RULE_IGNORED, Severity.WARNING, "the CDI cache reads only "
                                 "*.yaml and *.json files; this one is ignored", str(entry),
                                 fix=f"rename it to {entry.with_suffix('.yaml').name}"))
    return files, notes


def scan(paths: Sequence[Path | str], *, missing_ok: bool = False, node: Node = HOST) -> Scan:
    """Read spec files and folders as the CDI cache does; a later path has higher priority.

    A folder contributes its ``*.json`` and ``*.yaml`` files; a file stands alone. Paths that do
    not exist are skipped with ``missing_ok`` and otherwise recorded in ``unreadable``.
    """
    result = Scan()
    groups: list[list[SpecFile]] = []
    for path in (path if isinstance(path, Path) else Path(path) for path in paths):
        group = _read_group(path, result, missing_ok=missing_ok, node=node)
        if group is not None:
            groups.append(group)
            result.specs.extend(group)
    result.devices = _resolve(groups)
    return result


def discover(node: Node = HOST) -> Scan:
    """The specs and devices a runtime on ``node`` would load from the CDI dirs."""
    return scan([node.path(directory) for directory in CDI_DIRS], missing_ok=True, node=node)


def _read_group(path: Path, result: Scan, *, missing_ok: bool, node: Node) -> list[SpecFile] | None:
    try:
        if node.is_dir(path):
            files, notes = spec_files_in(path, node=node)
        elif node.exists(path) or not missing_ok:
            files, notes = [path], []
        else:
            return None
    except OSError as error:
        result.unreadable.append(InputError(path, error.strerror or str(error)))
        return None
    group = [SpecFile(note_path, [note]) for note, note_path in
             ((n, Path(n.file)) for n in notes)]
    for file in files:
        try:
            group.append(load_spec(file, node=node))
        except InputError as error:
            result.unreadable.append(error)
    return group


def _resolve(groups: Iterable[list[SpecFile]]) -> dict[str, CdiDevice]:
    """Resolve devices across groups the way the CDI cache does.

    A later group (folder) overrides an earlier one. The same device in two files of one group
    is a conflict: both files get an error and the device is dropped -- and, as in the cache, it
    stays dropped even when a later folder defines it again.
    """
    devices: dict[str, tuple[int, SpecFile]] = {}
    conflicts: set[str] = set()
    for priority, group in enumerate(groups):
        for spec in group:
            if not spec.accepted:
                continue
            for name in spec.devices:
                previous = devices.get(name)
                if previous and previous[0] == priority:
                    _record_conflict(name, spec, previous[1])
                    conflicts.add(name)
                    continue
                if previous:
                    spec.problems.append(_overridden(name, previous[1], spec))
                devices[name] = (priority, spec)
    return {name: CdiDevice(name, spec.path) for name, (_, spec) in sorted(devices.items())
            if name not in conflicts}


def _record_conflict(name: str, spec: SpecFile, other: SpecFile) -> None:
    for here, there in ((spec, other), (other, spec)):
        here.problems.append(Problem(
            RULE_CONFLICT, Severity.ERROR, f"conflicting device {name!r}: also defined in "
            f"{there.path}; the runtime drops the device", str(here.path),
            fix="define each device in one file of the folder"))


def _overridden(name: str, earlier: SpecFile, later: SpecFile) -> Problem:
    return Problem(RULE_OVERRIDDEN, Severity.INFO, f"device {name!r} of {earlier.path} is "
                   f"overridden by this later folder", str(later.path))
