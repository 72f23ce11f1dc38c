"""The command line stays light: ``--help`` and argument errors import none of the heavy parts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO, run_cli

HEAVY = ("tomlkit", "yaml", "grpc", "google.protobuf", "hypothesis")

PROBE = """
import sys
sys.path.insert(0, {src!r})
sys.argv = ["gpuready", "--help"]
from gpuready.cli.main import build_parser
build_parser()
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})))
"""


def test_building_the_parser_imports_no_heavy_module() -> None:
    script = PROBE.format(src=str(REPO / "src"), heavy=[h.split(".")[0] for h in HEAVY])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_help_lists_every_command_and_the_exit_codes() -> None:
    result = run_cli("--help")
    assert result.code == 0
    for command in ("setup", "configure", "check"):
        assert command in result.out
    assert "exit codes (" in result.out and "default_runtime_name stays runc" in result.out


def test_unknown_option_is_a_usage_error_with_exit_2() -> None:
    result = run_cli("configure", "--no-such-option")
    assert result.code == 2
    assert "unrecognized arguments: --no-such-option" in result.err


def test_json_format_errors_still_print_a_status_document(tmp_path) -> None:
    import json

    result = run_cli("configure", "--config", str(tmp_path / "missing.toml"), "--format", "json")
    assert result.code == 2
    document = json.loads(result.out)
    assert document["status"] == "error" and document["exit_code"] == 2
    assert "no such file" in document["error"]


def test_a_closed_pipe_is_not_reported_as_success() -> None:
    script = (
        f"import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'gpuready', 'rules'],"
        f" stdout=subprocess.PIPE, env={{'PYTHONPATH': {str(REPO / 'src')!r}}})\n"
        f"p.stdout.close()\n"
        f"sys.exit(p.wait())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 141
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr


READ_PATH = """
import sys
sys.path.insert(0, {src!r})
from gpuready.cli.main import run
code = run(["{command}", {target!r}])
loaded = sorted(m for m in ("tomlkit", "difflib", "grpc") if m in sys.modules)
print(code, ",".join(loaded), file=sys.stderr)
"""


def test_the_read_path_loads_no_editor_no_diff_no_grpc(tmp_path) -> None:
    """lint, doctor and audit read with tomllib: tomlkit (edits), difflib (diffs, suggestions)
    and grpc (the live CRI) stay unloaded, so a read costs about a parse."""
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text((REPO / "tests" / "data" / "lab-base-registered.toml").read_text())
    for command, target in (("lint", config), ("doctor", "--root=" + str(tmp_path)),
                            ("audit", tmp_path)):
        script = READ_PATH.format(src=str(REPO / "src"), command=command, target=str(target))
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        code, _, loaded = result.stderr.strip().splitlines()[-1].partition(" ")
        assert code in ("0", "1"), (command, result.stderr)
        assert loaded == "", (command, loaded)


# The standard library's costly modules a light command does without: dataclasses compiles
# each class from source (about 0.7 ms a class on Python 3.13) and brings inspect.
WATCHED = ("dataclasses", "inspect")
LOADED_BY = """
import sys
sys.path.insert(0, {src!r})
from gpuready.cli.main import run
try:
    code = run({argv!r})
except SystemExit as stop:  # --help
    code = stop.code
print(code, ",".join(sorted(m for m in sys.modules
                            if m.startswith("gpuready") or m in {watched!r})), file=sys.stderr)
"""


def modules_loaded_by(*argv: str) -> set[str]:
    """The gpuready modules (and the ``WATCHED`` ones) a run of ``gpuready ARGV`` imports, in a
    fresh interpreter."""
    script = LOADED_BY.format(src=str(REPO / "src"), argv=list(argv), watched=WATCHED)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    code, _, loaded = result.stderr.strip().splitlines()[-1].partition(" ")
    assert code in ("0", "1"), result.stderr
    return set(loaded.split(","))


def test_help_imports_no_command_module() -> None:
    """``--help`` lists every command from the command table: no command's module loads."""
    loaded = modules_loaded_by("--help")
    assert not {m for m in loaded if m.startswith("gpuready.cli.cmd_")}
    assert "gpuready.rules" not in loaded


def test_a_command_imports_its_own_module_only() -> None:
    loaded = modules_loaded_by("rules")
    assert {m for m in loaded if m.startswith("gpuready.cli.cmd_")} == {"gpuready.cli.cmd_rules"}


def test_linting_a_containerd_file_imports_no_other_engine_and_no_node_rule(tmp_path) -> None:
    """lint FILE runs the file and config rules: Docker's and CRI-O's support, the node rules
    (imports, RuntimeClass, CDI, owners, transactions) and the writers stay unloaded."""
    config = tmp_path / "config.toml"
    config.write_text((REPO / "tests" / "data" / "lab-base-registered.toml").read_text())
    loaded = modules_loaded_by("lint", str(config))
    assert {"gpuready.rules.structure", "gpuready.rules.options"} <= loaded  # the rules ran
    for unwanted in ("gpuready.engines.docker.rules", "gpuready.engines.crio.rules",
                     "gpuready.rules.node", "gpuready.rules.ownership",
                     "gpuready.rules.transaction", "gpuready.workflow.transaction",
                     "gpuready.cdi.validate", "gpuready.changeset",
                     # nor what only a syntax error or another command needs
                     "gpuready.containerd.hints", "gpuready.cli.cmd_configure", "dataclasses"):
        assert unwanted not in loaded, unwanted


def test_configuring_a_node_loads_no_drop_in_nor_unconfigure_code(tmp_path) -> None:
    """configure in place plans the edit and its record: the drop-in writer and unconfigure's
    planner stay unloaded, and so does every other command's module."""
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    (tmp_path / "etc" / "containerd" / "config.toml").write_text(
        (REPO / "tests" / "data" / "lab-base-registered.toml").read_text())
    loaded = modules_loaded_by("configure", "--dry-run", "--root", str(tmp_path),
                               "--containerd-version", "1.7")
    assert {m for m in loaded if m.startswith("gpuready.cli.cmd_")} == {
        "gpuready.cli.cmd_configure"}
    assert "gpuready.containerd.register" in loaded  # the plan was made
    for unwanted in ("gpuready.containerd.dropin", "gpuready.containerd.unconfigure"):
        assert unwanted not in loaded, unwanted


def test_linting_docker_config_imports_no_containerd_rule(tmp_path) -> None:
    """Docker's rules live with Docker's support: linting daemon.json loads none of
    containerd's rules and nothing of CRI-O's."""
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}\n')
    loaded = modules_loaded_by("lint", "--engine", "docker", str(daemon))
    assert "gpuready.engines.docker.rules" in loaded
    containerd_rules = {"gpuready.rules.structure", "gpuready.rules.keys",
                        "gpuready.rules.runtimes", "gpuready.rules.options",
                        "gpuready.rules.node", "gpuready.engines.crio.rules"}
    assert not containerd_rules & loaded


def test_the_catalogue_names_each_rule_where_it_is_defined() -> None:
    """The registry lists every rule without importing it; the name, scope and module it
    gives must be the rule's own, and every rule module's rules must be listed."""
    import importlib

    from gpuready.rules.registry import CATALOGUE

    listed = {name for name, _, _ in CATALOGUE}
    assert len(listed) == len(CATALOGUE)
    for module in {module for _, _, module in CATALOGUE}:
        defined = {rule.name for rule in importlib.import_module(module).RULES}
        assert defined == {name for name, _, m in CATALOGUE if m == module}, module
    for name, scope, module in CATALOGUE:
        rule = {r.name: r for r in importlib.import_module(module).RULES}[name]
        assert rule.scope is scope, name


def test_checking_a_node_without_a_cdi_spec_loads_no_cdi_reader(tmp_path) -> None:
    """A node whose CDI folders hold no spec: lint, check and doctor run the CDI rules, which
    return at once; the spec reader, the generator and the refresh stay unloaded."""
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text((REPO / "tests" / "data" / "lab-base-registered.toml").read_text())
    (tmp_path / "etc" / "cdi").mkdir()
    (tmp_path / "etc" / "cdi" / "README").write_text("not a spec\n")
    for command in ("lint", "check", "doctor"):
        loaded = modules_loaded_by(command, "--root", str(tmp_path), "--containerd-version", "1.7")
        assert command != "doctor" or "gpuready.rules.cdi_node" in loaded
        for unwanted in ("gpuready.cdi.validate", "gpuready.cdi.generate", "gpuready.cdi.nvml",
                         "gpuready.cdi.refresh", "gpuready.cdi.story", "gpuready.cdi.document"):
            assert unwanted not in loaded, (command, unwanted)


def test_judging_a_spec_reads_its_intent_without_the_generator(tmp_path) -> None:
    """doctor judges a spec with its intent record: the generator and the refresh stay
    unloaded."""
    root = tmp_path / "node"
    assert modules_loaded_by("setup", "--root", str(root), "--containerd-version", "1.7",
                             "--gpus", "1")
    loaded = modules_loaded_by("doctor", "--root", str(root), "--containerd-version", "1.7")
    assert {"gpuready.cdi.staleness", "gpuready.cdi.intent"} <= loaded
    assert not {"gpuready.cdi.generate", "gpuready.cdi.refresh", "gpuready.cdi.nvml"} & loaded


# The gpuready modules each command that benchmarks/bench_startup.py measures may import, on the
# benchmark's own inputs (containerd 1.7.34's default config; a node ``setup`` made; the same
# node before any edit). A module that lands on one of these paths makes every run of that
# command pay for it: make it lazy where the command does not need it, or add it here with the
# reason. A module that no longer loads is taken off, so the lists stay exact.
HELP_PATH = {"gpuready", "gpuready.cli", "gpuready.cli.commands", "gpuready.cli.formatting",
             "gpuready.cli.main", "gpuready.errors", "gpuready.terminal"}
# What every command that reads a containerd config loads: its parser, the model, the file rules.
CONFIG_READERS = HELP_PATH | {f"gpuready.{name}" for name in (
    "cli.common", "cli.requests", "compat", "records", "paths", "problems", "node", "sametext",
    "suggest", "textfile", "kubernetes", "kubernetes.labels",
    "containerd", "containerd.decoding", "containerd.document", "containerd.facts",
    "containerd.files", "containerd.imports", "containerd.lines", "containerd.model",
    "containerd.runc_options", "containerd.semantics", "containerd.versions",
    "rules", "rules.base", "rules.context", "rules.engine", "rules.locate", "rules.options",
    "rules.placement", "rules.registry", "rules.runtimes", "rules.shape")}
FILE_RULES = {"containerd.keyschema", "data", "rules.keys", "rules.structure"}
NODE_VERDICT = FILE_RULES | {
    "cdi", "cdi.document", "cdi.intent", "cdi.inventory", "cdi.names", "cdi.node", "cdi.present",
    "cdi.schema", "cdi.staleness", "cdi.story", "cdi.validate", "cdi.versions",
    "containerd.nri", "init_system", "kubernetes.dra", "kubernetes.kubelet",
    "kubernetes.runtimeclass", "owners", "owners.detect", "owners.state", "owners.table", "plan",
    "rules.cdi_node", "rules.gpu_paths", "rules.node", "rules.ownership", "workflow",
    "workflow.journal", "yamlfile"}
# A node with containerd on it: Docker's and CRI-O's facts are never looked at.
ENGINE_DETECTION = {"engines", "engines.containerd_facts", "engines.detection", "engines.facts"}
CONFIGURE = ENGINE_DETECTION | {
    "atfile", "changeset", "cli.cmd_configure", "cli.daytwo", "cli.report",
    "containerd.configure", "containerd.default_runtime", "containerd.edit",
    "containerd.effective", "containerd.gate", "containerd.keep_default", "containerd.layout",
    "containerd.provenance", "containerd.record", "containerd.register", "fsio", "init_system",
    "owners", "owners.configure", "owners.detect", "owners.records", "owners.table",
    "owners.template", "plan", "reporting", "reporting.text", "rules.effect", "workflow",
    "workflow.daytwo", "workflow.journal", "workflow.owner_change"}
ALLOWED_MODULES = {
    "--help": HELP_PATH,
    "lint FILE": FILE_RULES | {"cli.cmd_lint", "reporting", "reporting.text"},
    "check": NODE_VERDICT | {"cli.cmd_check", "containerd.gate", "workflow.contract"},
    "doctor": NODE_VERDICT | ENGINE_DETECTION | {"cli.cmd_doctor", "cli.cmd_lint", "reporting",
                                                 "reporting.text", "rules.transaction"},
    "configure, configured node": CONFIGURE,
    "configure, first edit": CONFIGURE,
}


@pytest.fixture(scope="module")
def benchmark_inputs(tmp_path_factory) -> dict[str, list[str]]:
    """bench_startup.py's commands on its inputs, by the names of :data:`ALLOWED_MODULES`."""
    folder = tmp_path_factory.mktemp("startup")
    default = REPO / "tests" / "data" / "containerd" / "containerd-1.7.34-default.toml"
    config = folder / "config.toml"
    config.write_text(default.read_text())
    for node in ("set-up", "fresh"):
        (folder / node / "etc" / "containerd").mkdir(parents=True)
        (folder / node / "etc" / "containerd" / "config.toml").write_text(default.read_text())
    assert run_cli("setup", "--root", str(folder / "set-up"),
                   "--containerd-version", "1.7").code == 0
    set_up, fresh = str(folder / "set-up"), str(folder / "fresh")
    return {"--help": ["--help"], "lint FILE": ["lint", str(config)],
            "check": ["check", "--root", set_up], "doctor": ["doctor", "--root", set_up],
            "configure, configured node": ["configure", "--dry-run", "--root", set_up,
                                           "--containerd-version", "1.7"],
            "configure, first edit": ["configure", "--dry-run", "--root", fresh,
                                      "--containerd-version", "1.7"]}


@pytest.mark.parametrize("command", list(ALLOWED_MODULES))
def test_each_benchmarked_command_imports_only_its_listed_modules(benchmark_inputs, command):
    """Start-up is mostly imports: each benchmarked command loads exactly the gpuready modules
    listed for it (and never ``dataclasses``, which brings ``inspect``)."""
    listed = ALLOWED_MODULES[command] | (CONFIG_READERS if command != "--help" else set())
    allowed = {name if name.startswith("gpuready") else f"gpuready.{name}" for name in listed}
    everything = modules_loaded_by(*benchmark_inputs[command])
    watched, loaded = everything & set(WATCHED), everything - set(WATCHED) - {""}
    if command != "configure, first edit":  # tomlkit, the editor, is made of dataclasses
        assert not watched, f"{command} imports {sorted(watched)}"
    assert not loaded - allowed, (
        f"{command} imports modules outside its list: {sorted(loaded - allowed)}")
    assert not allowed - loaded, (
        f"{command} no longer imports {sorted(allowed - loaded)}: take them off its list")


COLLECTOR = """
import atexit, gc, runpy, sys
sys.path.insert(0, {src!r})
atexit.register(lambda: print("collector on" if gc.isenabled() else "collector off",
                              file=sys.stderr))
sys.argv = ["gpuready", *{argv!r}]
runpy.run_module("gpuready", run_name="__main__")
"""


@pytest.mark.parametrize(("argv", "said"), [
    (["check", "--root", "{root}"], "collector off"),
    (["audit", "{root}"], "collector on"),
])
def test_only_a_command_whose_work_is_unbounded_collects_cyclic_garbage(tmp_path, argv, said):
    """A short run leaves the cyclic collector off (its passes over what the imports made cost
    a tenth of a ``check``); ``audit`` of a fleet and the agent turn it back on."""
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    (tmp_path / "etc" / "containerd" / "config.toml").write_text(
        (REPO / "tests" / "data" / "lab-base-registered.toml").read_text())
    argv = [word.format(root=tmp_path) for word in argv]
    script = COLLECTOR.format(src=str(REPO / "src"), argv=argv)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert said in result.stderr.splitlines()[-1], result.stderr
