"""``gpuready configure`` end to end: the file, its bytes, its backup, its errors."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CONTAINERD_DATA, LAB_BASE, REPO, added_lines_only, run_cli


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "containerd" / "config.toml"
    path.parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, path)
    return path


def test_registers_keeping_every_original_line_and_keeps_a_backup(config: Path) -> None:
    original = config.read_text()
    result = run_cli("configure", "--config", str(config))
    assert result.code == 0, result.err
    assert "register runtime nvidia" in result.out
    after = config.read_text()
    assert added_lines_only(original, after)
    assert "# Keep runc as the default: GPU workloads opt in through a RuntimeClass." in after
    assert Path(str(config) + ".gpuready.bak").read_text() == original


def test_second_run_reports_already_registered_and_leaves_bytes_and_mtime(config: Path) -> None:
    assert run_cli("configure", "--config", str(config)).code == 0
    before = config.read_bytes()
    os.utime(config, (1_000_000_000, 1_000_000_000))
    result = run_cli("configure", "--config", str(config))
    assert result.code == 0
    assert "already registered" in result.out
    assert config.read_bytes() == before
    assert config.stat().st_mtime == 1_000_000_000


def test_root_prefixes_the_default_config_path(config: Path) -> None:
    root = config.parents[2]
    assert run_cli("configure", "--root", str(root)).code == 0
    assert "runtimes.nvidia]" in config.read_text()


def test_dry_run_prints_a_diff_and_writes_nothing(config: Path) -> None:
    before = config.read_bytes()
    result = run_cli("configure", "--config", str(config), "--dry-run")
    assert result.code == 0
    assert result.out.startswith(f"--- {config}\n+++ {config}\n")
    assert '+        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in result.out
    assert "would register runtime nvidia" in result.out
    assert config.read_bytes() == before
    assert not Path(str(config) + ".gpuready.bak").exists()


def test_keeps_mode_of_the_original(config: Path) -> None:
    config.chmod(0o640)  # not mkstemp's 0600: the mode must really be copied
    assert run_cli("configure", "--config", str(config)).code == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o640


def test_json_output_has_status_and_the_diff(config: Path) -> None:
    import json

    result = run_cli("configure", "--config", str(config), "--format", "json", "--dry-run")
    report = json.loads(result.out)
    assert report["status"] == "ok"
    assert report["changed"] is True and report["written"] is False
    assert "+            SystemdCgroup = true" in report["diff"]


def test_cgroupfs_runc_gets_a_warning_and_inherit_follows_runc(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    shutil.copyfile(CONTAINERD_DATA / "containerd-1.6.20-default.toml", config)
    warned = run_cli("configure", "--config", str(config), "--dry-run")
    assert "cgroup-driver-mismatch" in warned.out
    inherited = run_cli("configure", "--config", str(config), "--systemd-cgroup", "inherit")
    assert "cgroup-driver-mismatch" not in inherited.out
    from gpuready.compat import tomllib

    data = tomllib.loads(config.read_text())
    runtimes = data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is False


def test_set_as_default_is_refused_without_confirmation(config: Path) -> None:
    before = config.read_bytes()
    result = run_cli("configure", "--config", str(config), "--set-as-default")
    assert result.code == 2
    assert "every pod on this node" in result.err
    assert "RuntimeClass" in result.err
    assert config.read_bytes() == before


def test_set_as_default_with_confirmation_changes_only_that_line(config: Path) -> None:
    result = run_cli("configure", "--config", str(config), "--set-as-default",
                     "--confirm-every-pod-uses-it")
    assert result.code == 0
    assert 'default_runtime_name = "nvidia"' in config.read_text()


def test_enable_cdi_writes_the_versions_cri_table(tmp_path: Path) -> None:
    from gpuready.compat import tomllib

    v2 = tmp_path / "v2.toml"
    shutil.copyfile(LAB_BASE, v2)
    v3 = tmp_path / "v3.toml"
    shutil.copyfile(CONTAINERD_DATA / "containerd-2.1.9-default.toml", v3)
    v3.write_text(v3.read_text().replace("enable_cdi = true", "enable_cdi = false"))
    for path, line in ((v2, "1.7"), (v3, "2.1")):  # each file on a containerd that reads it
        result = run_cli("configure", "--config", str(path), "--enable-cdi",
                         "--containerd-version", line)
        assert result.code == 0, result.err
        assert "enable CDI" in result.out
    cri_v2 = tomllib.loads(v2.read_text())["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri_v2["enable_cdi"] is True
    assert cri_v2["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    cri_v3 = tomllib.loads(v3.read_text())["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri_v3["enable_cdi"] is True


BAD_INPUTS = {
    "not-toml": (b'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n', ":2:", "invalid TOML"),
    "binary": (b"\x7fELF\x02\x01\x01\x00\x00\x00", ":1", "binary file"),
    "version-string": (b'version = "2"\n', "", "'version' must be an integer"),
    "version-unknown": (b"version = 7\n", "", "config version 7 is not one gpuready knows"),
    "not-utf8": (b"version = 2\n# caf\xe9\n", ":2:", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_gets_one_line_exit_2_and_file_untouched(tmp_path: Path, name: str) -> None:
    content, position, reason = BAD_INPUTS[name]
    path = tmp_path / "config.toml"
    path.write_bytes(content)
    result = run_cli("configure", "--config", str(path))
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1, result.err
    assert result.err.startswith(f"gpuready: error: {path}{position}")
    assert reason in result.err
    assert "Traceback" not in result.err
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_missing_file_is_exit_2(tmp_path: Path) -> None:
    result = run_cli("configure", "--config", str(tmp_path / "nope.toml"))
    assert result.code == 2
    assert result.err == f"gpuready: error: {tmp_path / 'nope.toml'}: no such file\n"


def test_unreadable_file_is_exit_2(config: Path) -> None:
    if os.geteuid() == 0:
        # root reads anything; a directory in the file's place is unreadable for everyone.
        config.unlink()
        config.mkdir()
        expected = "is a directory"
    else:
        config.chmod(0)
        expected = "permission denied"
    result = run_cli("configure", "--config", str(config))
    assert result.code == 2
    assert expected in result.err


CONCURRENT_EDIT = """
import sys
sys.path.insert(0, {src!r})
from gpuready.cli.main import run
sys.exit(run(["configure", "--config", {config!r}, "--runtime-name", sys.argv[1]]))
"""


def test_concurrent_runs_do_not_lose_an_edit(config: Path) -> None:
    from gpuready.compat import tomllib

    script = CONCURRENT_EDIT.format(src=str(REPO / "src"), config=str(config))
    names = [f"nvidia-{index}" for index in range(6)]
    processes = [
        subprocess.Popen([sys.executable, "-c", script, name], stdout=subprocess.DEVNULL)
        for name in names
    ]
    assert [process.wait(timeout=120) for process in processes] == [0] * len(names)
    data = tomllib.loads(config.read_text())
    runtimes = data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert set(names) <= set(runtimes)


UNEDITABLE = {
    "plugins-integer": ("version = 2\nplugins = 1\n", "plugins is an integer value, not a table"),
    "plugins-array": ("version = 2\n[[plugins]]\n", "plugins is an array, not a table"),
    "runtimes-array": (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nruntimes = []\n',
        "containerd.runtimes is an array, not a table",
    ),
    "runtime-string": (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\nnvidia = "x"\n',
        "runtimes.nvidia is a string value, not a table",
    ),
    "options-string": (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        'options = "x"\n',
        "nvidia.options is a string value, not a table",
    ),
}


@pytest.mark.parametrize("name", sorted(UNEDITABLE))
def test_valid_toml_of_the_wrong_shape_is_refused_untouched(tmp_path: Path, name: str) -> None:
    text, reason = UNEDITABLE[name]
    path = tmp_path / "config.toml"
    path.write_text(text)
    result = run_cli("configure", "--config", str(path))
    assert result.code == 2
    assert reason in result.err and result.err.count("\n") == 1
    assert path.read_text() == text


def test_keeps_owner_of_the_original(config: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another owner")
    os.chown(config, 4321, 8765)
    assert run_cli("configure", "--config", str(config)).code == 0
    assert (config.stat().st_uid, config.stat().st_gid) == (4321, 8765)


def test_backup_keeps_the_file_as_it_was_before_the_first_change(config: Path) -> None:
    original = config.read_text()
    assert run_cli("configure", "--config", str(config)).code == 0
    assert run_cli("configure", "--config", str(config), "--runtime-name", "nvidia-cdi").code == 0
    assert Path(str(config) + ".gpuready.bak").read_text() == original
    assert sorted(p.name for p in config.parent.iterdir()) == [
        "config.toml", "config.toml.gpuready.bak", "config.toml.gpuready.json"]


def test_a_symlinked_config_has_its_target_edited_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "repo" / "config.toml"
    real.parent.mkdir()
    shutil.copyfile(LAB_BASE, real)
    link = tmp_path / "etc" / "config.toml"
    link.parent.mkdir()
    link.symlink_to(real)
    assert run_cli("configure", "--config", str(link)).code == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "runtimes.nvidia]" in real.read_text()
    assert Path(str(real) + ".gpuready.bak").read_text() == LAB_BASE.read_text()


def test_crlf_and_bom_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    original = "\ufeff" + LAB_BASE.read_text().replace("\n", "\r\n")
    path.write_bytes(original.encode("utf-8"))
    assert run_cli("configure", "--config", str(path)).code == 0
    after = path.read_bytes().decode("utf-8")
    assert after.startswith("\ufeff# Abbreviated base configuration")
    assert after.count("\n") == after.count("\r\n")
    assert added_lines_only(original, after)


AS_NOBODY = """
import os, sys
sys.path.insert(0, {src!r})
import importlib, pkgutil, tomlkit, yaml
import gpuready
from gpuready.cli import main
# Import everything while still root: the interpreter's and the checkout's folders may be
# readable by root alone.
for module in pkgutil.walk_packages(gpuready.__path__, "gpuready."):
    if module.name != "gpuready.__main__":
        importlib.import_module(module.name)
# and the data files gpuready reads from its package (each line's recorded `config default`)
from gpuready.containerd.lines import LINES
for line in LINES.values():
    line.defaults()
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
sys.exit(main.run(["configure", "--config", {config!r}]))
"""


def test_a_file_of_another_owner_is_refused_rather_than_given_away() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a file owned by someone else")
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gr-owner-"))
    try:
        folder.chmod(0o777)
        path = folder / "config.toml"
        shutil.copyfile(LAB_BASE, path)
        path.chmod(0o666)
        before = path.read_bytes()
        script = AS_NOBODY.format(src=str(REPO / "src"), config=str(path))
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert "cannot keep the owner (0:0); nothing written" in result.stderr
        assert path.read_bytes() == before and path.stat().st_uid == 0
        assert sorted(p.name for p in folder.iterdir()) == ["config.toml"]
    finally:
        shutil.rmtree(folder)
