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
    assert "exit codes:" in result.out and "default_runtime_name stays runc" in result.out


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
