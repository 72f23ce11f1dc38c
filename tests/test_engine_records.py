"""Docker and CRI-O keep records like containerd does (issue 18, "Why" case 7): ``unconfigure``
gives back the original bytes, keeps the operator's runtimes, and touches nothing gpuready never
changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_cli

DAEMON = """\
{
  "runtimes": {
    "nvidia": {"path": "/opt/old/nvidia-container-runtime"},
    "crun": {"path": "/usr/bin/crun"}
  }
}
"""

MAIN = """\
[crio.runtime]
default_runtime = "runc"

[crio.runtime.runtimes.runc]
runtime_path = "/usr/bin/runc"
runtime_type = "oci"
monitor_path = "/usr/libexec/crio/conmon"
"""

CRIO_DROPIN = """\
# the platform team's own nvidia handler
[crio.runtime.runtimes.nvidia]
runtime_path = "/opt/old/nvidia-container-runtime"
runtime_type = "oci"
"""


def daemon_json(root: Path, text: str | None = DAEMON) -> Path:
    path = root / "etc" / "docker" / "daemon.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is not None:
        path.write_text(text)
    return path


@pytest.fixture
def crio_node(tmp_path: Path) -> Path:
    (tmp_path / "etc" / "crio" / "crio.conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "crio" / "crio.conf").write_text(MAIN)
    return tmp_path


def dropin(root: Path) -> Path:
    return root / "etc" / "crio" / "crio.conf.d" / "99-nvidia.toml"


def own_files(path: Path) -> list[str]:
    """gpuready's own files for ``path``: beside it, or above a folder CRI-O reads whole."""
    from gpuready.containerd.record import record_path

    folder = record_path(path).parent
    return sorted(p.name for p in folder.iterdir() if ".gpuready." in p.name)


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_unconfigure_gives_back_the_original_bytes(tmp_path: Path, engine: str) -> None:
    if engine == "docker":
        path = daemon_json(tmp_path)
    else:
        (tmp_path / "etc" / "crio" / "crio.conf.d").mkdir(parents=True)
        (tmp_path / "etc" / "crio" / "crio.conf").write_text(MAIN)
        path = dropin(tmp_path)
        path.write_text(CRIO_DROPIN)
    original = path.read_bytes()
    configured = run_cli("configure", "--engine", engine, "--root", str(tmp_path))
    assert configured.code == 0, configured.err
    assert path.read_bytes() != original
    from gpuready.containerd.record import record_path

    record = json.loads(record_path(path).read_text())
    assert record["format"] == 2 and list(record["files"]) == [
        "/" + str(path.relative_to(tmp_path))]
    removed = run_cli("unconfigure", "--engine", engine, "--root", str(tmp_path))
    assert removed.code == 0, removed.err
    assert "restore the original, byte for byte" in removed.out
    assert path.read_bytes() == original  # the operator's nvidia runtime is back as it was
    assert own_files(path) == []


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_a_file_gpuready_never_changed_is_not_touched(tmp_path: Path, engine: str) -> None:
    if engine == "docker":
        path = daemon_json(tmp_path, '{"runtimes": {"nvidia": {"path": "/usr/bin/x"}}}\n')
    else:
        (tmp_path / "etc" / "crio" / "crio.conf.d").mkdir(parents=True)
        path = dropin(tmp_path)
        path.write_text(CRIO_DROPIN)
    original = path.read_bytes()
    result = run_cli("unconfigure", "--engine", engine, "--root", str(tmp_path))
    assert result.code == 0, result.err
    assert "nothing recorded" in result.out
    assert path.read_bytes() == original
    assert own_files(path) == []


def test_an_edited_daemon_json_keeps_the_operators_runtimes(tmp_path: Path) -> None:
    path = daemon_json(tmp_path, '{\n  "runtimes": {"crun": {"path": "/usr/bin/crun"}}\n}\n')
    assert run_cli("configure", "--engine", "docker", "--root", str(tmp_path)).code == 0
    assert path.with_name("daemon.json.gpuready.json").exists()
    data = json.loads(path.read_text())
    data["debug"] = True  # edited by the operator after gpuready
    path.write_text(json.dumps(data, indent=2) + "\n")
    removed = run_cli("unconfigure", "--engine", "docker", "--root", str(tmp_path))
    assert removed.code == 0, removed.err
    after = json.loads(path.read_text())
    assert after == {"runtimes": {"crun": {"path": "/usr/bin/crun"}}, "debug": True}
    assert not path.with_name("daemon.json.gpuready.json").exists()


def test_an_edited_file_keeps_a_runtime_that_was_there_before(tmp_path: Path) -> None:
    path = daemon_json(tmp_path)
    assert run_cli("configure", "--engine", "docker", "--root", str(tmp_path)).code == 0
    path.write_text(path.read_text().replace("{\n", '{\n  "debug": true,\n', 1))
    removed = run_cli("unconfigure", "--engine", "docker", "--root", str(tmp_path))
    assert removed.code == 0, removed.err
    assert set(json.loads(path.read_text())["runtimes"]) == {"nvidia", "crun"}


def test_a_record_naming_a_file_outside_the_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "host.json"
    outside.write_text("{}\n")
    path = daemon_json(root)
    record = {"format": 2, "config": "/etc/docker/daemon.json", "settings": [],
              "files": {"/etc/docker/../../host.json": {"original": None, "written": None}}}
    path.with_name("daemon.json.gpuready.json").write_text(json.dumps(record))
    result = run_cli("unconfigure", "--engine", "docker", "--root", str(root))
    assert result.code == 2 and "record refused" in result.err
    assert path.read_text() == DAEMON and outside.read_text() == "{}\n"


def test_a_crio_drop_in_gpuready_created_is_removed_with_its_record(crio_node: Path) -> None:
    assert run_cli("configure", "--engine", "crio", "--root", str(crio_node)).code == 0
    assert own_files(dropin(crio_node)) == ["crio.conf.d.99-nvidia.toml.gpuready.json"]
    removed = run_cli("unconfigure", "--engine", "crio", "--root", str(crio_node))
    assert removed.code == 0, removed.err
    assert not dropin(crio_node).exists() and own_files(dropin(crio_node)) == []


MIGRATED_FROM = """\
version = 2

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "pause:3.9"


[metrics]
  address = ""
"""


def test_migrate_configure_unconfigure_keeps_every_blank_line(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(MIGRATED_FROM)
    version = ("--root", str(tmp_path), "--containerd-version", "2.0")
    assert run_cli("migrate", "--to", "3", *version).code == 0
    migrated = config.read_bytes()
    assert run_cli("configure", *version).code == 0
    removed = run_cli("unconfigure", *version)
    assert removed.code == 0, removed.err
    assert config.read_bytes() == migrated


def test_drop_in_migrate_unconfigure_leaves_no_stub_and_no_backup(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(MIGRATED_FROM)
    version = ("--root", str(tmp_path), "--containerd-version", "2.0")
    assert run_cli("configure", "--drop-in", "/etc/containerd/conf.d/99-nvidia.toml",
                   *version).code == 0
    assert run_cli("migrate", "--to", "3", *version).code == 0
    removed = run_cli("unconfigure", *version)
    assert removed.code == 0, removed.err
    # no stub, no backup, and the folder gpuready created for the drop-in goes with them
    assert not (config.parent / "conf.d").exists()
    assert "imports" not in config.read_text()


def test_crio_keeps_its_backup_and_record_out_of_the_folder_it_reads_whole(tmp_path):
    """crio.conf.d(5): CRI-O reads every file there, whatever its name. A JSON record there would
    stop CRI-O, and a backup there would be read after the drop-in and undo it."""
    from tests.helpers import run_cli

    folder = tmp_path / "etc/crio/crio.conf.d"
    folder.mkdir(parents=True)
    (folder / "99-nvidia.toml").write_text('[crio.runtime]\nlog_level = "info"\n')
    result = run_cli("configure", "--engine", "crio", "--root", str(tmp_path))
    assert result.code == 0, result.err
    assert sorted(p.name for p in folder.iterdir()) == ["99-nvidia.toml"]
    kept = sorted(p.name for p in folder.parent.iterdir() if p.is_file())
    assert kept == ["crio.conf.d.99-nvidia.toml.gpuready.bak",
                    "crio.conf.d.99-nvidia.toml.gpuready.json"]
    assert run_cli("unconfigure", "--engine", "crio", "--root", str(tmp_path)).code == 0
    assert (folder / "99-nvidia.toml").read_text() == '[crio.runtime]\nlog_level = "info"\n'
    assert not any(p.is_file() for p in folder.parent.iterdir())


# -- issue 28: unconfigure --runtime-name X takes back X alone ---------------------------------

OPERATOR_DAEMON = '{\n  "debug": true\n}\n'


def _engine_with_two(root: Path, engine: str) -> Path:
    """A node where gpuready registered ``alpha`` and then ``beta`` with ``engine``."""
    if engine == "docker":
        path = daemon_json(root, OPERATOR_DAEMON)
    else:
        (root / "etc" / "crio" / "crio.conf.d").mkdir(parents=True)
        (root / "etc" / "crio" / "crio.conf").write_text(MAIN)
        path = dropin(root)
    for name in ("alpha", "beta"):
        result = run_cli("configure", "--engine", engine, "--root", str(root),
                         "--runtime-name", name)
        assert result.code == 0, result.err
    return path


def _engine_runtimes(path: Path, engine: str) -> set[str]:
    if engine == "docker":
        return set(json.loads(path.read_text())["runtimes"])
    from gpuready.compat import tomllib

    return set(tomllib.loads(path.read_text())["crio"]["runtime"]["runtimes"])


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_unconfigure_runtime_name_removes_that_runtime_alone(tmp_path: Path, engine: str) -> None:
    path = _engine_with_two(tmp_path, engine)
    result = run_cli("unconfigure", "--engine", engine, "--root", str(tmp_path),
                     "--runtime-name", "beta")
    assert result.code == 0, result.err
    assert "remove runtime beta" in result.out
    assert _engine_runtimes(path, engine) == {"alpha"}
    from gpuready.containerd.record import record_path

    record = json.loads(record_path(path).read_text())
    assert [s["name"] for s in record["settings"]] == ["alpha"]
    # the last one taken back leaves the node as it was, gpuready's own files gone
    result = run_cli("unconfigure", "--engine", engine, "--root", str(tmp_path),
                     "--runtime-name", "alpha")
    assert result.code == 0, result.err
    if engine == "docker":
        assert path.read_text() == OPERATOR_DAEMON
    else:
        assert not path.exists()
    assert own_files(path) == []


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_unconfigure_runtime_name_gpuready_never_added_is_refused(tmp_path: Path,
                                                                  engine: str) -> None:
    path = _engine_with_two(tmp_path, engine)
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    result = run_cli("unconfigure", "--engine", engine, "--root", str(tmp_path),
                     "--runtime-name", "gamma")
    assert result.code == 2, result.out + result.err
    [line] = result.err.strip().splitlines()
    assert "never added runtime 'gamma'" in line and "it records alpha, beta" in line
    assert line.endswith("nothing written")
    assert before == {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    assert _engine_runtimes(path, engine) == {"alpha", "beta"}
