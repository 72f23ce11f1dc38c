"""The command line stays light: ``--help`` and argument errors import none of the heavy parts."""

from __future__ import annotations

import subprocess
import sys

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


# The standard library's costly modules a light command does without (dataclasses brings inspect).
WATCHED = ("dataclasses",)
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
