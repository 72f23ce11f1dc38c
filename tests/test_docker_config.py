"""Docker's daemon.json: the text editor, its proof by re-parsing, and the safe writer's
guarantees through ``gpuready configure --engine docker`` and ``unconfigure``."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuready.engines.docker.config import (
    DockerRuntime,
    parse_daemon_config,
    plan_add_runtime,
    plan_default_runtime,
    plan_enable_cdi,
    plan_remove_runtime,
)
from gpuready.errors import GpureadyError, InputError, UsageError
from tests.helpers import run_cli

NVIDIA = DockerRuntime("nvidia", "/usr/bin/nvidia-container-runtime")
CASES = Path(__file__).parent / "data" / "docker" / "layouts"
LAYOUTS = sorted(CASES.glob("*.json"))


def add(text: str) -> str:
    return plan_add_runtime(parse_daemon_config(text, Path("daemon.json")), NVIDIA).after


def remove(text: str) -> str:
    return plan_remove_runtime(parse_daemon_config(text, Path("daemon.json")), "nvidia").after


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda p: p.stem)
def test_each_layout_gets_the_expected_text_and_comes_back_byte_for_byte(layout: Path) -> None:
    """Table-driven: ``X.json`` configured is ``X.json.expected``; removed, it is ``X.json``."""
    original = layout.read_bytes().decode()
    after = add(original)
    assert after == layout.with_suffix(".json.expected").read_bytes().decode()
    assert json.loads(after) == {**json.loads(original),
                                 "runtimes": {**json.loads(original).get("runtimes", {}),
                                              "nvidia": NVIDIA.entry()}}
    assert add(after) == after  # a second run is a no-op
    assert remove(after) == original


JSON_KEYS = st.sampled_from(["debug", "log-driver", "log-opts", "labels", "runtimes", "dns",
                             "features", "x", "nvidia", "runc"])
JSON_SCALARS = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=5), st.none())
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_KEYS, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(data=st.dictionaries(JSON_KEYS, JSON_VALUES, max_size=5),
       indent=st.sampled_from([None, 2, 4, "\t"]),
       trailing=st.sampled_from(["", "\n", "\n\n"]))
def test_any_daemon_json_is_edited_exactly_or_refused(data, indent, trailing) -> None:
    """Whatever the layout: the edit means the old data plus the runtime (proved by parsing);
    a second run changes nothing; removing gives the original bytes back (when gpuready added
    the whole ``runtimes`` or the runtime to an existing one); or a one-line error."""
    text = json.dumps(data, indent=indent) + trailing
    try:
        after = add(text)
    except GpureadyError as error:
        assert "\n" not in error.message() and error.message().startswith("daemon.json")
        return
    expected = json.loads(text)
    if expected.get("runtimes") is None:
        expected["runtimes"] = {}
    existing = expected["runtimes"].get("nvidia")
    expected["runtimes"]["nvidia"] = ({**existing, "path": NVIDIA.path}
                                      if isinstance(existing, dict) else NVIDIA.entry())
    assert json.loads(after) == expected
    assert add(after) == after
    had_nvidia = isinstance(data.get("runtimes"), dict) and "nvidia" in data["runtimes"]
    if not had_nvidia and isinstance(data.get("runtimes"), dict) and data["runtimes"] != {} \
            or "runtimes" not in data:
        assert remove(after) == text


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_are_registered_or_refused_with_a_positioned_line(raw: bytes, tmp_path_factory):
    """The command line in-process (fast enough for many examples): exit 0, or exit 2 with one
    line naming the file and the file untouched."""
    import contextlib
    import io

    from gpuready.cli.main import run

    path = tmp_path_factory.mktemp("any") / "daemon.json"
    path.write_bytes(raw)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run(["configure", "--engine", "docker", "--config", str(path)])
    if code != 0:
        assert code == 2, err.getvalue()
        assert path.read_bytes() == raw
        assert err.getvalue().startswith(f"gpuready: error: {path}")
        assert err.getvalue().count("\n") == 1


def test_invalid_json_is_one_line_with_line_and_column_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    raw = b'{\n  "debug": true,\n  "runtimes": {"nvidia": {"path": "x",}}\n}\n'
    path.write_bytes(raw)
    result = run_cli("configure", "--engine", "docker", "--config", str(path))
    assert result.code == 2
    # where the parser stops: the closing brace on Python 3.9 to 3.12, the trailing comma itself
    # on 3.13 (which also names it)
    column = 38 if sys.version_info >= (3, 13) else 39
    assert result.err.startswith(f"gpuready: error: {path}:3:{column}: invalid JSON")
    assert path.read_bytes() == raw


def test_nan_that_python_would_accept_is_refused_as_dockerd_does(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="NaN is not JSON"):
        parse_daemon_config('{"mtu": NaN}', tmp_path / "daemon.json")


def test_deep_nesting_is_refused_without_recursing(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    raw = ('{"labels": ' + "[" * 5000 + "]" * 5000 + "}").encode()
    path.write_bytes(raw)
    result = run_cli("configure", "--engine", "docker", "--config", str(path))
    assert result.code == 2 and path.read_bytes() == raw and "Traceback" not in result.err


def test_a_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_bytes(b'{"labels": ["' + b"x" * (2 * 1024 * 1024) + b'"]}')
    result = run_cli("configure", "--engine", "docker", "--config", str(path))
    assert result.code == 2 and "larger than" in result.err


def test_duplicate_runtimes_keys_are_refused_not_guessed(tmp_path: Path) -> None:
    text = '{"runtimes": {}, "runtimes": {"x": {"path": "/x"}}}'
    with pytest.raises(InputError, match="written 2 times"):
        plan_add_runtime(parse_daemon_config(text, tmp_path / "daemon.json"), NVIDIA)


def test_a_runtime_named_runc_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text("{}\n")
    result = run_cli("configure", "--engine", "docker", "--config", str(path),
                     "--runtime-name", "runc")
    assert result.code == 2 and "reserves the runtime name 'runc'" in result.err
    assert path.read_text() == "{}\n"


def test_default_runtime_needs_the_confirmation(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text('{\n  "debug": true\n}\n')
    refused = run_cli("configure", "--engine", "docker", "--config", str(path),
                      "--set-as-default")
    assert refused.code == 2 and "every container on this machine" in refused.err
    assert path.read_text() == '{\n  "debug": true\n}\n'
    done = run_cli("configure", "--engine", "docker", "--config", str(path), "--set-as-default",
                   "--confirm-every-pod-uses-it")
    assert done.code == 0
    assert json.loads(path.read_text())["default-runtime"] == "nvidia"
    removed = run_cli("unconfigure", "--engine", "docker", "--config", str(path))
    assert removed.code == 0 and "remove default-runtime" in removed.out
    assert path.read_text() == '{\n  "debug": true\n}\n'


def test_replacing_an_existing_default_runtime_keeps_the_layout() -> None:
    text = '{\n  "default-runtime": "runc",\n  "runtimes": {"nvidia": {"path": "/n"}}\n}\n'
    after = plan_default_runtime(parse_daemon_config(text, Path("d.json")), "nvidia").after
    assert after == text.replace('"default-runtime": "runc"', '"default-runtime": "nvidia"')


def test_enable_cdi_on_a_docker_that_reads_it_and_one_that_does_not() -> None:
    config = parse_daemon_config('{\n  "features": {"buildkit": true}\n}\n', Path("d.json"))
    new = plan_enable_cdi(config, release=(25, 0))
    assert new.after == '{\n  "features": {"buildkit": true, "cdi": true}\n}\n'
    old = plan_enable_cdi(config, release=(20, 10))
    assert not old.changes and "does not read features.cdi" in old.notes[0]


def test_a_missing_file_is_created_and_its_writes_are_safe(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "docker" / "daemon.json"
    path.parent.parent.mkdir()  # a node's root: etc/ there, etc/docker/ not yet
    result = run_cli("configure", "--engine", "docker", "--root", str(tmp_path))
    assert result.code == 0, result.err
    assert json.loads(path.read_text()) == {"runtimes": {"nvidia": NVIDIA.entry()}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert "backup" not in result.out  # nothing existed to back up
    removed = run_cli("unconfigure", "--engine", "docker", "--root", str(tmp_path))
    assert removed.code == 0 and "remove the file gpuready created" in removed.out
    assert not path.exists()


def test_backup_mode_symlink_and_crlf_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "repo" / "daemon.json"
    target.parent.mkdir()
    original = b'\xef\xbb\xbf{\r\n  "debug": true\r\n}\r\n'
    target.write_bytes(original)
    target.chmod(0o600)
    link = tmp_path / "daemon.json"
    link.symlink_to(target)
    result = run_cli("configure", "--engine", "docker", "--config", str(link))
    assert result.code == 0, result.err
    assert link.is_symlink()
    after = target.read_bytes()
    assert after.startswith(b"\xef\xbb\xbf{\r\n") and b"\n" not in after.replace(b"\r\n", b"")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert (tmp_path / "repo" / "daemon.json.gpuready.bak").read_bytes() == original
    assert run_cli("unconfigure", "--engine", "docker", "--config", str(link)).code == 0
    assert target.read_bytes() == original


def test_dry_run_and_json_output(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text('{"debug": true}\n')
    os.utime(path, (1_000_000_000, 1_000_000_000))
    result = run_cli("configure", "--engine", "docker", "--config", str(path), "--dry-run",
                     "--format", "json")
    report = json.loads(result.out)
    assert report["status"] == "ok" and report["engine"] == "docker"
    assert report["changed"] and not report["written"] and "+" in report["diff"]
    assert path.stat().st_mtime == 1_000_000_000


def test_reload_needs_docker(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("version = 2\n")
    result = run_cli("configure", "--config", str(path), "--reload")
    assert result.code == 2 and "--reload is for --engine docker" in result.err


def test_engine_errors_are_usage_errors() -> None:
    from gpuready.engines import get

    with pytest.raises(UsageError, match="unknown engine"):
        get("podman")


def test_concurrent_runs_do_not_lose_an_edit(tmp_path: Path) -> None:
    """Six configure runs at once, each with its own runtime: the lock keeps every one."""
    import subprocess
    import sys

    from tests.helpers import REPO

    path = tmp_path / "daemon.json"
    path.write_text('{\n  "debug": true\n}\n')
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    names = [f"nvidia-{index}" for index in range(6)]
    processes = [
        subprocess.Popen([sys.executable, "-m", "gpuready", "configure", "--engine", "docker",
                          "--config", str(path), "--runtime-name", name],
                         stdout=subprocess.DEVNULL, env=env)
        for name in names
    ]
    assert [process.wait(timeout=120) for process in processes] == [0] * len(names)
    data = json.loads(path.read_text())
    assert set(names) <= set(data["runtimes"]) and data["debug"] is True

