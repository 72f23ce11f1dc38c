"""configure and setup never claim an effect containerd will not have, and say how to fix it.

Docker's containerd.io package ships ``disabled_plugins = ["cri"]``: a runtime written there is
never loaded. A runtime written into a file of containerd's folder that no ``imports`` entry
reaches is never read. Both are reported in one line with the fix, exit code 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpuready.compat import tomllib
from tests.helpers import DATA, added_lines_only, run_cli

DOCKER = DATA / "corpus" / "docker-containerd-io.toml"


def _docker_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    shutil.copyfile(DOCKER, path)
    return path


def test_configure_on_dockers_default_says_the_cri_is_off_and_writes_nothing(
        tmp_path: Path) -> None:
    """A runtime the CRI plugin would never load is not written: the gate refuses, exit 2."""
    path = _docker_config(tmp_path)
    original = path.read_bytes()
    result = run_cli("configure", "--config", str(path))
    assert result.code == 2
    errors = result.err.splitlines()
    assert len(errors) == 1
    assert errors[0].startswith(f"gpuready: error: {path}: refusing the change")
    assert "disabled_plugins turns it off ('cri')" in errors[0]
    assert "--enable-cri" in errors[0] and errors[0].endswith("nothing written")
    assert path.read_bytes() == original


def test_enable_cri_removes_only_that_entry_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    both = 'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "cri"]'
    original = DOCKER.read_text().replace('disabled_plugins = ["cri"]', both)
    path.write_text(original)
    result = run_cli("configure", "--config", str(path), "--enable-cri")
    assert result.code == 0, result.err
    assert "removed 'cri' from disabled_plugins" in result.out
    after = path.read_text()
    assert tomllib.loads(after)["disabled_plugins"] == ["io.containerd.snapshotter.v1.btrfs"]
    pairs = zip(original.splitlines(), after.splitlines())
    changed = [new for old, new in pairs if old != new]
    assert changed == ['disabled_plugins = ["io.containerd.snapshotter.v1.btrfs"]']
    assert added_lines_only(original, after.replace(changed[0], both))


def test_json_reports_the_refusal_with_the_reason(tmp_path: Path) -> None:
    path = _docker_config(tmp_path)
    result = run_cli("configure", "--config", str(path), "--format", "json")
    report = json.loads(result.out)
    assert result.code == 2 and report["status"] == "error"
    assert "disabled_plugins turns it off" in report["error"]


def test_setup_on_dockers_default_fails_until_the_cri_is_enabled(tmp_path: Path) -> None:
    config = _docker_node(tmp_path)
    original = config.read_bytes()
    failed = run_cli("setup", "--root", str(tmp_path))
    assert failed.code == 2
    assert [line for line in failed.err.splitlines() if "disabled_plugins turns it off" in line]
    assert config.read_bytes() == original
    fixed = run_cli("setup", "--root", str(tmp_path), "--enable-cri")
    assert "disabled_plugins" not in fixed.err
    assert tomllib.loads(config.read_text())["disabled_plugins"] == []


def test_a_drop_in_no_import_reaches_is_reported(tmp_path: Path) -> None:
    main = tmp_path / "etc" / "containerd" / "config.toml"
    drop_in = main.parent / "conf.d" / "99-nvidia.toml"
    drop_in.parent.mkdir(parents=True)
    main.write_text('version = 2\nimports = ["/etc/containerd/other/*.toml"]\n')
    drop_in.write_text("version = 2\n")
    result = run_cli("configure", "--root", str(tmp_path), "--config", str(drop_in))
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert "containerd does not read this file: no imports entry" in result.err
    assert '"/etc/containerd/conf.d/99-nvidia.toml"' in result.err
    main.write_text('version = 2\nimports = ["conf.d/*.toml"]\n')
    assert run_cli("configure", "--root", str(tmp_path), "--config", str(drop_in)).code == 0


def test_a_working_copy_outside_containerds_folder_is_not_judged(tmp_path: Path) -> None:
    path = tmp_path / "copy.toml"
    path.write_text("version = 2\n")
    (tmp_path / "etc").mkdir()  # the folder is the node: --root needs an etc/
    assert run_cli("configure", "--root", str(tmp_path), "--config", str(path)).code == 0


def _docker_node(tmp_path: Path) -> Path:
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(DOCKER, config)
    return config


def test_a_drop_in_beside_dockers_default_says_the_cri_is_off_and_writes_nothing(
        tmp_path: Path) -> None:
    config = _docker_node(tmp_path)
    original = config.read_bytes()
    result = run_cli("configure", "--root", str(tmp_path), "--drop-in",
                     "--containerd-version", "1.6")
    assert result.code == 2
    errors = result.err.splitlines()
    assert len(errors) == 1
    assert errors[0].startswith(f"gpuready: error: {config}: refusing the change")
    assert "disabled_plugins turns it off" in errors[0] and "--enable-cri" in errors[0]
    assert config.read_bytes() == original
    assert not (config.parent / "conf.d").exists()
    report = json.loads(run_cli("configure", "--root", str(tmp_path), "--drop-in",
                                "--containerd-version", "1.6", "--format", "json").out)
    assert report["status"] == "error"


def test_enable_cri_with_a_drop_in_edits_the_main_file_not_the_drop_in(tmp_path: Path) -> None:
    config = _docker_node(tmp_path)
    original = config.read_text()
    result = run_cli("configure", "--root", str(tmp_path), "--drop-in", "--enable-cri",
                     "--containerd-version", "1.6")
    assert result.code == 0, result.err
    assert "removed 'cri' from disabled_plugins" in result.out
    main = tomllib.loads(config.read_text())
    assert main["disabled_plugins"] == []
    assert main["imports"] == ["/etc/containerd/conf.d/99-nvidia.toml"]
    drop_in = config.parent / "conf.d" / "99-nvidia.toml"
    assert "disabled_plugins" not in tomllib.loads(drop_in.read_text())
    assert run_cli("unconfigure", "--root", str(tmp_path)).code == 0
    assert not drop_in.exists()
    assert config.read_text() == original  # as after configure in place: the file, byte for byte


def test_beside_docker_the_error_also_points_at_docker(tmp_path: Path) -> None:
    """Docker's containerd.io disables the CRI because containerd is there for Docker: a user
    on such a machine may want Docker's runtime; without Docker the hint is not given."""
    _docker_node(tmp_path)
    alone = run_cli("configure", "--root", str(tmp_path), "--dry-run")
    assert alone.code == 2 and "--engine docker" not in alone.err
    (tmp_path / "etc" / "docker").mkdir()
    (tmp_path / "etc" / "docker" / "daemon.json").write_text("{}\n")
    beside = run_cli("configure", "--root", str(tmp_path), "--dry-run")
    assert beside.code == 2
    assert beside.err.count("\n") == 1
    assert "this machine also has Docker" in beside.err and "--engine docker" in beside.err
