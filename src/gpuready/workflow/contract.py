"""The registration contract: the toolkit files' exact contents and the checks that prove them.

Every value written to ``parsed.txt`` and ``report.txt`` is derived here by parsing the files on
disk (config.toml with ``tomllib``, the RuntimeClass and the CDI spec with YAML), so a wrong file
gives a wrong report and a failed check, never a constant that merely looks right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.document import parse_toml
from gpuready.containerd.model import Loaded
from gpuready.containerd.versions import render_key_path, spec_of
from gpuready.errors import InputError, MissingFileError
from gpuready.node import FileKind, Node
from gpuready.paths import CDI_SPEC, CONTAINERD_CONFIG
from gpuready.problems import Severity
from gpuready.records import Factory, MutableRecord, Record
from gpuready.yamlfile import load_mapping

NVIDIA_CDI_KIND = "nvidia.com/gpu"
EXPECTED_DEFAULT = "runc"
WHY_DEFAULT = "runtimeclass"


class NodeFiles(Record):
    """The host paths (on ``node``) of every file of the contract, and how to read each."""

    node: Node
    config: Path
    cdi_spec: Path
    toolkit: Path

    @classmethod
    def on(cls, node: Node, toolkit_dir: PurePosixPath | str) -> NodeFiles:
        """The contract's paths on ``node``."""
        return cls(
            node=node,
            config=node.path(CONTAINERD_CONFIG),
            cdi_spec=node.path(CDI_SPEC),
            toolkit=node.path(toolkit_dir),
        )

    def kind_of(self, path: Path) -> FileKind:
        """What the contract file at ``path`` is (its size limit)."""
        if path == self.config:
            return FileKind.CONFIG
        if path == self.cdi_spec:
            return FileKind.CDI_SPEC
        return FileKind.MANIFEST if path == self.runtimeclass else FileKind.TOOLKIT

    def read(self, path: Path) -> str:
        """The text of one contract file, read through the node."""
        return self.node.read_text(path, kind=self.kind_of(path))

    @property
    def default_txt(self) -> Path:
        """``default.txt``: the default runtime and why it stays."""
        return self.toolkit / "default.txt"

    @property
    def parsed_txt(self) -> Path:
        """``parsed.txt``: the config's version and registered runtimes."""
        return self.toolkit / "parsed.txt"

    @property
    def cdi_keys_txt(self) -> Path:
        """``cdi-keys.txt``: the CDI spec's top-level keys."""
        return self.toolkit / "cdi-keys.txt"

    @property
    def runtimeclass(self) -> Path:
        """``runtimeclass.yaml``: the RuntimeClass manifest."""
        return self.toolkit / "runtimeclass.yaml"

    @property
    def report_txt(self) -> Path:
        """``report.txt``: the five-line verification report."""
        return self.toolkit / "report.txt"


class Check(Record):
    """One verified statement about the node, with what to do when it fails.

    ``warning``: it passed, but with a warning whose advice is ``fix`` (the verdict ``doctor``
    gives as a warning).
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


class ConfigFacts(MutableRecord):
    """What the contract needs from config.toml, read with ``tomllib``."""

    version: int
    runtimes: list[str]
    default_runtime: str
    runtime_table: str
    runtime: Mapping[str, Any] | None
    runtime_name: str
    problems: list[str] = Factory(list)
    runtime_tables: Mapping[str, Mapping[str, Any]] = Factory(dict)


def read_config_facts(text: str, path: Path, runtime_name: str) -> ConfigFacts:
    """Parse config.toml's text and pick out what the contract checks."""
    data = parse_toml(text, path)
    spec = spec_of(data, path=path)
    return ConfigFacts(
        version=spec.number,
        runtimes=sorted(facts.runtimes(data, spec)),
        default_runtime=facts.default_runtime_name(data, spec),
        runtime_table=render_key_path(spec.runtimes_path),
        runtime=facts.runtime(data, spec, runtime_name),
        runtime_name=runtime_name,
        runtime_tables=facts.runtimes(data, spec),
    )


def default_txt(config: ConfigFacts) -> str:
    """``default.txt``: exactly two lines."""
    return f"DEFAULT={config.default_runtime}\nWHY={WHY_DEFAULT}\n"


def parsed_txt(config: ConfigFacts) -> str:
    """``parsed.txt``: the version, then the registered runtime names, sorted."""
    return f"VERSION={config.version}\nRUNTIMES={','.join(config.runtimes)}\n"


def cdi_keys_txt(spec: Mapping[str, Any]) -> str:
    """``cdi-keys.txt``: the CDI spec's top-level keys, one per line, in file order."""
    return "".join(f"{key}\n" for key in spec)


def report_txt(config: ConfigFacts, handler: object) -> str:
    """``report.txt``: five lines, each value derived from the parsed files.

    A value that cannot be derived is written as ``INVALID: <why>`` so the report itself says
    what is wrong.
    """
    lines = [
        f"CONFIG_VERSION={config.version}",
        f"RUNTIME={_runtime_value(config)}",
        f"RUNTIME_TYPE={_runtime_type_value(config)}",
        f"SYSTEMD_CGROUP={_systemd_value(config)}",
        f"HANDLER={_handler_value(config, handler)}",
    ]
    return "\n".join(lines) + "\n"


def _runtime_value(config: ConfigFacts) -> str:
    if config.runtime is None:
        return f"INVALID: no runtime {config.runtime_name} in [{config.runtime_table}]"
    return config.runtime_name


def _runtime_type_value(config: ConfigFacts) -> str:
    value = (config.runtime or {}).get("runtime_type")
    if not isinstance(value, str) or not value:
        return f"INVALID: runtime {config.runtime_name} has no runtime_type"
    return value


def _systemd_value(config: ConfigFacts) -> str:
    value = facts.runtime_options(config.runtime).get("SystemdCgroup")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return f"INVALID: runtime {config.runtime_name} sets no options.SystemdCgroup"
    return f"INVALID: SystemdCgroup is {type(value).__name__} {value!r}, not a TOML boolean"


def _handler_value(config: ConfigFacts, handler: object) -> str:
    if not isinstance(handler, str) or not handler:
        return "INVALID: the RuntimeClass has no handler"
    if handler not in config.runtimes:
        registered = ", ".join(config.runtimes)
        return f"INVALID: handler {handler} names no registered runtime ({registered})"
    return handler


def check_runtimeclass(manifest: Mapping[str, Any], config: ConfigFacts) -> list[Check]:
    """The RuntimeClass has the four fields and its handler names a registered runtime."""
    metadata = manifest.get("metadata") if isinstance(manifest.get("metadata"), dict) else {}
    handler = manifest.get("handler")
    return [
        _equals("RuntimeClass apiVersion", manifest.get("apiVersion"), "node.k8s.io/v1"),
        _equals("RuntimeClass kind", manifest.get("kind"), "RuntimeClass"),
        _equals("RuntimeClass metadata.name", metadata.get("name"), config.runtime_name),
        Check(
            "RuntimeClass handler matches a runtime",
            handler in config.runtimes,
            f"handler {handler!r}; registered runtimes: {', '.join(config.runtimes) or 'none'}",
            f"set handler to the runtime's name in config.toml ({config.runtime_name}); a pod "
            "with a handler that names no runtime fails with RunContainerError",
        ),
    ]


def check_config(config: ConfigFacts, loaded: Loaded | None = None, *,
                 systemd=None) -> list[Check]:
    """runc and the NVIDIA runtime loaded, runc the default, SystemdCgroup a boolean true.

    ``loaded`` is what the node's containerd line loads from config.toml and its imports
    (:mod:`gpuready.containerd.model`): a runtime is loaded when the line's CRI plugin loads and
    holds it, the verdict ``lint``, ``doctor`` and the never-break gate give. Without it, the
    runtimes written in config.toml decide.

    ``systemd`` (:class:`gpuready.init_system.SystemdFact`): on a node that shows no systemd,
    SystemdCgroup must be a boolean, and false is the value to have (the cgroup check says so
    when it is true); elsewhere the contract's true.
    """
    node_systemd = systemd
    runtime = loaded.runtimes.get(config.runtime_name) if loaded else config.runtime
    options = facts.runtime_options(runtime)
    systemd_key = _systemd_cgroup_key(options, loaded)
    systemd = options.get(systemd_key)
    runtime_type = (runtime or {}).get("runtime_type")
    default = loaded.default_runtime if loaded else config.default_runtime
    return [
        _loaded_check("runc registered", "runc", config, loaded,
                      "keep the runc runtime: it runs every pod without a RuntimeClass"),
        _loaded_check(f"runtime {config.runtime_name} registered", config.runtime_name, config,
                      loaded, f"run 'gpuready configure' to add "
                      f"[{config.runtime_table}.{config.runtime_name}]"),
        Check(
            f"runtime {config.runtime_name} has a runtime_type",
            isinstance(runtime_type, str) and bool(runtime_type),
            f"runtime_type = {runtime_type!r}",
            'set runtime_type = "io.containerd.runc.v2"',
        ),
        Check(
            "default_runtime_name is runc",
            default == EXPECTED_DEFAULT,
            f"default_runtime_name = {default!r}",
            'set default_runtime_name = "runc"; GPU pods opt in with the RuntimeClass',
        ),
        _systemd_cgroup_check(systemd, node_systemd, key=systemd_key),
    ]


def _systemd_cgroup_key(options: Mapping[str, Any], loaded: Loaded | None) -> str:
    """The key whose value the node's containerd line gives ``SystemdCgroup``.

    containerd matches option keys against the shim's field names case-insensitively, so a
    ``systemdCgroup = true`` (kubespray writes it; nvidia-ctk copies it from runc) is what the
    shim gets, measured on every line (:mod:`gpuready.containerd.decoding`). The exact key when
    no line is known, when no spelling reaches the shim, or when the lines disagree or were never
    recorded reading the spellings (option-spelling and option-spelled-twice say so).
    """
    if loaded is None:
        return "SystemdCgroup"
    from gpuready.containerd import decoding

    lines = decoding.lines_for(major=loaded.line.major, release=loaded.line.release)
    used = {decoding.read_field(options, "SystemdCgroup", line).key for line in lines}
    return used.pop() if len(used) == 1 and None not in used else "SystemdCgroup"


def _systemd_cgroup_check(value: object, node_systemd, *, key: str = "SystemdCgroup") -> Check:
    """SystemdCgroup (as spelled by ``key``) is the contract's boolean true; on a node without
    systemd, a boolean (the cgroup check judges its value there)."""
    shown = f"options.{key} = {value!r} ({type(value).__name__})"
    if node_systemd is not None and node_systemd.absent:
        return Check(
            "SystemdCgroup is a boolean",
            isinstance(value, bool),
            f"{shown} (systemd does not run on this node: false, the cgroupfs driver, "
            "replaces the contract's true; 'cgroup drivers agree' judges the value)",
            "write SystemdCgroup = false (a TOML boolean, without quotes) in the runtime's "
            "options",
        )
    return Check(
        "SystemdCgroup is the boolean true",
        value is True,
        shown,
        "write SystemdCgroup = true (a TOML boolean, without quotes) in the runtime's options",
    )


def _loaded_check(name: str, runtime: str, config: ConfigFacts, loaded: Loaded | None,
                  fix: str) -> Check:
    """``runtime`` is loaded (``loaded`` given) or written in config.toml (not given)."""
    if loaded is None:
        return Check(name, runtime in config.runtimes,
                     f"runtimes in [{config.runtime_table}]: "
                     f"{', '.join(config.runtimes) or 'none'}", fix)
    why = loaded.why_not_loaded(runtime)
    if why is None:
        return Check(name, True, f"{loaded.line.label} loads runtimes "
                                 f"{', '.join(sorted(loaded.runtimes))}")
    cause = loaded.cause
    if cause is not None and cause.fix and cause.kind != "disabled":
        fix = cause.fix  # the model's cause: the fix doctor and lint give for it
    elif loaded.cri_error and loaded.cri_error.startswith("disabled_plugins"):
        fix = ("take the CRI plugin out of disabled_plugins: 'gpuready configure --enable-cri' "
               "(or 'gpuready setup --enable-cri')")
    elif loaded.cri_error and loaded.default_runtime not in loaded.runtimes:
        fix = (f"add the runtime table of {loaded.default_runtime} (containerd 1.x drops its "
               "built-in runc once a file names any runtime): 'gpuready configure' writes it")
    return Check(name, False, why, fix)


def node_loaded(files: NodeFiles, text: str, line) -> Loaded | None:
    """What ``line`` (a :class:`~gpuready.containerd.lines.NodeLine`) loads from config.toml's
    ``text``, with the imports on the node; None when it cannot be read (the parse check says
    why)."""
    from gpuready.containerd.model import load_node
    from gpuready.errors import GpureadyError

    try:
        return load_node(files.config, node=files.node, line=line,
                         overrides={files.config: text})
    except GpureadyError:
        return None


def check_cgroup_drivers(config: ConfigFacts, node: Node, *, systemd=None) -> list[Check]:
    """The GPU runtime, runc and the kubelet on one cgroup driver, one that the node runs: the
    verdict lint and doctor give (cgroup-driver-mismatch, systemd-cgroup-without-systemd), with
    the same severity and advice. ``systemd``: whether systemd runs on ``node``
    (:func:`gpuready.init_system.systemd_fact`, read here when not given)."""
    from gpuready.containerd import decoding
    from gpuready.containerd.semantics import from_config_version
    from gpuready.kubernetes import kubelet
    from gpuready.rules.options import cgroup_verdict

    name = "cgroup drivers agree"
    if systemd is None:
        from gpuready.init_system import systemd_fact

        systemd = systemd_fact(node)
    try:
        driver, kubelet_file = kubelet.cgroup_driver(node)
    except InputError as error:
        return [Check(name, False, error.message(), "fix the kubelet's config file")]
    major = from_config_version(config.version).major
    verdict = cgroup_verdict(
        config.runtime_tables,
        config.runtime_name,
        lines=decoding.lines_for(major=major),
        kubelet_driver=driver,
        kubelet_file=kubelet_file,
        systemd=systemd,
    )
    if verdict is None:
        where = f"the kubelet's is {driver} ({kubelet_file})" if driver else "kubelet unknown"
        if systemd.absent:
            where += f"; no systemd on this node ({systemd.evidence}), and none uses it"
        return [Check(name, True, f"runtime {config.runtime_name} and runc agree; {where}")]
    return [
        Check(
            name,
            verdict.severity is not Severity.ERROR,
            f"{verdict.rule}: {verdict.message}",
            verdict.fix,
            warning=verdict.severity is Severity.WARNING,
        )
    ]


def check_file_content(name: str, path: Path, expected: str, read: Callable[[Path], str]) -> Check:
    """A toolkit file holds exactly what the parsed sources say it should."""
    try:
        actual = read(path)
    except InputError as error:
        return Check(name, False, error.message(), "run 'gpuready setup' to write it")
    detail = "matches" if actual == expected else f"expected {expected!r}, found {actual!r}"
    return Check(name, actual == expected, f"{path}: {detail}", "run 'gpuready setup' again")


def _equals(name: str, actual: object, expected: str) -> Check:
    return Check(name, actual == expected, f"{actual!r}", f"set it to {expected!r}")


def contract_checks(
    files: NodeFiles, runtime_name: str, read: Callable[[Path], str], *,
    containerd_version: str | None = None, detection: Any = None,
) -> list[Check]:
    """Every check of the contract, reading each file through ``read``; the runtimes are judged
    on the node's containerd line (``containerd_version``, else as the node tells,
    :func:`gpuready.containerd.lines.node_line`). ``detection``: who owns containerd
    (:class:`gpuready.owners.detect.Detection`; None: detected here), for doctor's checks."""
    from gpuready.containerd.lines import node_line

    pending = check_no_transaction(files)
    try:
        text = read(files.config)
        config = read_config_facts(text, files.config, runtime_name)
    except MissingFileError:
        raise  # nothing to check: bad input (exit 2), the message says what writes it
    except InputError as error:
        return [*pending, Check("config.toml parses", False, error.message(),
                                "fix the file as the message says (at its line and column), or "
                                "write it with 'gpuready setup'; then run 'gpuready check' "
                                "again")]
    line = node_line(root=files.node.root, flag=containerd_version,
                     config_version=config.version)
    checks = [*pending,
              Check("config.toml parses", True, f"{files.config}: version {config.version}")]
    from gpuready.init_system import systemd_fact

    systemd = systemd_fact(files.node)
    checks += check_config(config, node_loaded(files, text, line), systemd=systemd)
    checks += check_cgroup_drivers(config, files.node, systemd=systemd)
    try:
        manifest = load_mapping(read(files.runtimeclass), files.runtimeclass)
    except InputError as error:
        manifest = {}
        checks.append(
            Check("RuntimeClass readable", False, error.message(), "run 'gpuready setup'")
        )
    else:
        checks += check_runtimeclass(manifest, config)
    checks += cdi_checks(files, read)
    checks += _toolkit_checks(files, config, read, handler=manifest.get("handler"))
    checks += doctor_checks(files, runtime_name, read, containerd_version=containerd_version,
                            detection=detection)
    return checks


# doctor's findings that a contract check above already gives, with the same verdict: each is
# said once, by the contract's own check.
SAID_BY_THE_CONTRACT = frozenset({
    "toml-syntax", "transaction-pending", "runtime-not-registered", "default-runtime-missing",
    "cri-disabled", "cgroup-driver-mismatch", "systemd-cgroup-without-systemd",
    "handler-mismatch", "handler-invalid", "cdi-spec-invalid",
    # an owner's input gpuready wrote that the owner renders on its next start: the restart it
    # needs is the owner's note (setup and configure name the command); the contract's checks
    # read what the owner will render
    "owner-template-stale",
})


def doctor_checks(files: NodeFiles, runtime_name: str, read: Callable[[Path], str], *,
                  containerd_version: str | None = None, detection: Any = None) -> list[Check]:
    """A failed check for each error ``doctor`` reports on the node, besides the contract's own
    checks: the default runtime counts as much as the GPU runtime (runc's ``SystemdCgroup =
    "true"`` fails every pod without a RuntimeClass), so ``check``, ``setup`` and ``doctor``
    give one verdict. Each check is named after doctor's rule. No check when doctor finds no
    error (the count of checks on a sound node stays the contract's).

    The config and the CDI spec are read through ``read`` (what ``setup`` is about to write, or
    the config an owner will generate); the rest of the node from disk.
    """
    from gpuready.containerd.gate import planned_node
    from gpuready.errors import GpureadyError
    from gpuready.rules.context import Options
    from gpuready.rules.engine import doctor
    from gpuready.rules.registry import NAMES

    texts: dict[Path, str | None] = {}
    for path in (files.config, files.cdi_spec):
        try:
            texts[path] = read(path)
        except InputError:
            continue  # doctor reads it as the node has it, and the contract's check says why
    options = Options(runtime_name=runtime_name, root=files.node.root)
    options.node = planned_node(files.node.root, texts)  # one node for every rule, as planned
    try:
        report = doctor(options=options, selected=frozenset(NAMES) - SAID_BY_THE_CONTRACT,
                        config_path=files.config, containerd_version=containerd_version,
                        detection=detection)
    except GpureadyError:
        return []  # the config cannot be read as containerd does: the checks above say why
    return [_doctor_check(problem) for problem in report.problems
            if problem.severity is Severity.ERROR]


def _doctor_check(problem) -> Check:
    """One of doctor's errors (:class:`gpuready.problems.Problem`) as a failed check."""
    where = problem.file + (f":{problem.line}:{problem.column}" if problem.line else "")
    return Check(f"doctor: {problem.rule}", False,
                 f"{where}: error {problem.rule}: {problem.message}",
                 problem.fix or f"run 'gpuready rules {problem.rule}'")


def check_no_transaction(files: NodeFiles) -> list[Check]:
    """The failed check "no transaction pending" when a killed ``--restart`` left its journal
    beside config.toml (read only: never finished here); no check when none is pending."""
    from gpuready.workflow import journal

    message = journal.pending_message(files.node, files.config)
    if message is None:
        return []
    return [Check("no transaction pending", False, message, journal.PENDING_FIX)]


def cdi_checks(files: NodeFiles, read) -> list[Check]:
    """The CDI spec's kind, the loader's verdict, and cdi-keys.txt."""
    try:
        text = read(files.cdi_spec)
        spec = load_mapping(text, files.cdi_spec)
    except InputError as error:
        return [Check("CDI spec readable", False, error.message(), "run 'gpuready cdi generate'")]
    kind = spec.get("kind")
    return [
        Check(
            f"CDI spec kind is {NVIDIA_CDI_KIND}",
            kind == NVIDIA_CDI_KIND,
            f"{files.cdi_spec}: kind {kind!r}",
            f"set kind: {NVIDIA_CDI_KIND} (or regenerate with 'gpuready cdi generate --force')",
        ),
        _cdi_loader_check(files.cdi_spec, text),
        check_file_content("cdi-keys.txt matches the spec", files.cdi_keys_txt,
                           cdi_keys_txt(spec), read),
    ]


def _cdi_loader_check(path: Path, text: str) -> Check:
    """The spec is one the CDI loader accepts (the same rules as ``gpuready cdi validate``)."""
    from gpuready.cdi.document import parse_yaml
    from gpuready.cdi.validate import validate_document

    errors = [
        problem
        for problem in validate_document(parse_yaml(text, str(path)))
        if problem.severity is Severity.ERROR
    ]
    if not errors:
        return Check("CDI spec accepted by the CDI loader", True, f"{path}: valid")
    first = errors[0]
    where = f"{path}:{first.line}" if first.line else str(path)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return Check(
        "CDI spec accepted by the CDI loader",
        False,
        f"{where}: {first.key_path}: {first.message}{more}",
        f"run 'gpuready cdi validate {path}' for every problem, or regenerate the spec with "
        "'gpuready cdi generate --force'",
    )


def _toolkit_checks(
    files: NodeFiles, config: ConfigFacts, read, *, handler: object
) -> list[Check]:
    return [
        check_file_content("default.txt matches config.toml", files.default_txt,
                           default_txt(config), read),
        check_file_content("parsed.txt matches config.toml", files.parsed_txt,
                           parsed_txt(config), read),
        check_file_content("report.txt matches the files", files.report_txt,
                           report_txt(config, handler), read),
    ]
