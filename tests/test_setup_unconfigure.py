"""``gpuready setup`` then ``gpuready unconfigure`` in a sandbox root: setup's record lets
unconfigure take back everything setup wrote, and nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import CONTAINERD_DATA, LAB_BASE, run_cli, stage_fixture

CONFIG = "etc/containerd/config.toml"
RECORD = CONFIG + ".gpuready.json"
BACKUP = CONFIG + ".gpuready.bak"
CDI_SPEC = "etc/cdi/nvidia.yaml"
TOOLKIT = "root/toolkit"
WRITTEN = [f"{TOOLKIT}/{name}" for name in
           ("default.txt", "parsed.txt", "cdi-keys.txt", "runtimeclass.yaml", "report.txt")]
EXISTING_CONFIGS = [LAB_BASE, CONTAINERD_DATA / "containerd-1.6.20-default.toml"]


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (folders are not compared), by its path relative to it."""
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


def _setup(root: Path, *args: str):
    result = run_cli("setup", "--root", str(root), *args)
    assert result.code == 0, result.out + result.err
    return result


def _unconfigure(root: Path):
    result = run_cli("unconfigure", "--root", str(root))
    assert result.code == 0, result.out + result.err
    return result


@pytest.fixture
def fresh_node(tmp_path: Path) -> Path:
    """A node without a containerd config: setup stages one from the air-gap fixture."""
    root = tmp_path / "node"
    stage_fixture(root)
    return root


def _node_with_config(tmp_path: Path, config: Path) -> Path:
    root = tmp_path / "node"
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(config, root / CONFIG)
    return root


@pytest.mark.parametrize("config", EXISTING_CONFIGS, ids=lambda path: path.stem)
def test_an_existing_config_gets_its_bytes_back_and_setup_files_go(
    tmp_path: Path, config: Path
) -> None:
    root = _node_with_config(tmp_path, config)
    before = _files(root)
    setup = _setup(root)
    assert f"record of what gpuready changed: kept in {root / RECORD}" in setup.out
    assert b"runtimes.nvidia]" in (root / CONFIG).read_bytes()
    assert (root / BACKUP).read_bytes() == config.read_bytes()
    undone = _unconfigure(root)
    assert f"{root / CONFIG}: restore the original, byte for byte" in undone.out
    assert _files(root) == before  # the config byte for byte; no backup, record or setup file


def test_a_node_without_a_config_loses_every_file_setup_created(fresh_node: Path) -> None:
    before = _files(fresh_node)
    _setup(fresh_node)
    assert {CONFIG, RECORD, CDI_SPEC, *WRITTEN} <= set(_files(fresh_node))
    undone = _unconfigure(fresh_node)
    for name in (CONFIG, CDI_SPEC, *WRITTEN):
        assert f"{fresh_node / name}: remove the file gpuready created" in undone.out
    assert _files(fresh_node) == before  # only the fixture is left


def test_the_folders_setup_created_go_and_the_operators_stay(fresh_node: Path) -> None:
    """``_files`` compares files only: here the folders. Those setup made for its files go with
    them; one that was there before (the fixture's) stays, and so does one holding another file."""
    folders = {p for p in fresh_node.rglob("*") if p.is_dir()}
    _setup(fresh_node)
    (fresh_node / "etc/cdi/other-vendor.yaml").write_text("cdiVersion: 0.5.0\n")
    _unconfigure(fresh_node)
    left = {p for p in fresh_node.rglob("*") if p.is_dir()}
    assert left == folders | {fresh_node / "etc/cdi", fresh_node / "etc"}
    assert not (fresh_node / TOOLKIT).exists() and not (fresh_node / CONFIG).parent.exists()


def test_a_file_edited_after_setup_is_kept_and_the_output_says_so(fresh_node: Path) -> None:
    _setup(fresh_node)
    manifest = fresh_node / TOOLKIT / "runtimeclass.yaml"
    edited = manifest.read_text() + "scheduling:\n  nodeSelector:\n    gpu: \"true\"\n"
    manifest.write_text(edited)
    config = fresh_node / CONFIG
    config.write_text(config.read_text() + "# the operator's note\n")
    undone = _unconfigure(fresh_node)
    assert f"{manifest}: changed since gpuready wrote it: left as it is" in undone.out
    assert manifest.read_text() == edited
    # the config setup created, edited since: kept, without the runtime gpuready added
    assert "remove what gpuready added (the file was edited since)" in undone.out
    assert "# the operator's note" in config.read_text()
    assert "runtimes.nvidia" not in config.read_text()
    left = set(_files(fresh_node))
    assert not left & {RECORD, CDI_SPEC, *(name for name in WRITTEN if "runtimeclass" not in name)}


def test_files_that_existed_before_setup_are_restored_or_left_alone(tmp_path: Path) -> None:
    root = _node_with_config(tmp_path, LAB_BASE)
    (root / TOOLKIT).mkdir(parents=True)
    (root / TOOLKIT / "report.txt").write_text("stale report\n")  # setup rewrites it
    (root / TOOLKIT / "default.txt").write_text("DEFAULT=runc\nWHY=runtimeclass\n")  # as setup
    (root / "etc/cdi").mkdir(parents=True)
    spec = run_cli("cdi", "generate", "--root", str(root), "--gpus", "2", "--no-hooks")
    assert spec.code == 0, spec.err
    before = _files(root)
    setup = _setup(root)
    assert "kept existing spec" in setup.out
    record = json.loads((root / RECORD).read_text())["files"]
    assert f"/{CDI_SPEC}" not in record
    assert f"/{TOOLKIT}/default.txt" not in record
    assert record[f"/{TOOLKIT}/report.txt"]["original"] is not None
    _unconfigure(root)
    assert _files(root) == before


def test_a_second_setup_keeps_the_record_and_a_second_unconfigure_has_nothing_to_do(
    tmp_path: Path,
) -> None:
    root = _node_with_config(tmp_path, LAB_BASE)
    before = _files(root)
    _setup(root)
    record = (root / RECORD).read_bytes()
    again = _setup(root)
    assert "already registered" in again.out
    assert "record of what gpuready changed" not in again.out
    assert (root / RECORD).read_bytes() == record
    _unconfigure(root)
    assert _files(root) == before
    second = _unconfigure(root)
    assert f"nothing recorded for {root / CONFIG}: nothing to remove" in second.out
    assert _files(root) == before


def test_setup_after_configure_keeps_configures_record(tmp_path: Path) -> None:
    root = _node_with_config(tmp_path, LAB_BASE)
    before = _files(root)
    assert run_cli("configure", "--root", str(root)).code == 0
    configured = json.loads((root / RECORD).read_text())
    _setup(root)
    record = json.loads((root / RECORD).read_text())
    assert record["settings"] == configured["settings"]
    assert record["files"][f"/{CONFIG}"] == configured["files"][f"/{CONFIG}"]
    _unconfigure(root)
    assert _files(root) == before


def test_a_dry_run_writes_no_record(fresh_node: Path) -> None:
    before = _files(fresh_node)
    _setup(fresh_node, "--dry-run")
    assert _files(fresh_node) == before
    assert not (fresh_node / RECORD).exists()
    result = run_cli("unconfigure", "--root", str(fresh_node))  # no config, no record: bad input
    assert result.code == 2 and "no such file: without it containerd runs" in result.err


# -- issue 28: unconfigure --runtime-name X takes back X alone --------------------------------

TWO_RUNTIMES_BASE = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""
LINE = ("--containerd-version", "1.7")


def _two_runtimes(root: Path, *args: str) -> Path:
    """A node where gpuready registered ``alpha`` (with CDI) and then ``beta``."""
    config = root / CONFIG
    config.parent.mkdir(parents=True)
    config.write_text(TWO_RUNTIMES_BASE)
    for name, extra in (("alpha", ("--enable-cdi",)), ("beta", ())):
        result = run_cli("configure", "--root", str(root), "--runtime-name", name, *LINE,
                         *extra, *args)
        assert result.code == 0, result.err
    return config


def _runtimes(config: Path) -> set[str]:
    from gpuready.compat import tomllib

    data = tomllib.loads(config.read_text())
    return set(data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"])


def test_unconfigure_runtime_name_removes_that_runtime_alone(tmp_path: Path) -> None:
    config = _two_runtimes(tmp_path)
    with_both = config.read_text()
    result = run_cli("unconfigure", "--root", str(tmp_path), "--runtime-name", "beta", *LINE)
    assert result.code == 0, result.err
    assert "remove runtime beta" in result.out
    assert _runtimes(config) == {"runc", "alpha"}
    # exactly beta's table went: every other byte, alpha's and CDI's included, stays (but the
    # blank line the file ended with)
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    beta = with_both[with_both.index(f"{cri[:-1]}.containerd.runtimes.beta]"):
                     with_both.index(f"{cri}\n")]
    assert config.read_text() == with_both.replace(beta, "").rstrip("\n") + "\n"
    record = json.loads((tmp_path / RECORD).read_text())
    assert [s.get("name") for s in record["settings"] if s["kind"] == "runtime"] == ["alpha"]
    assert {s["kind"] for s in record["settings"]} == {"runtime", "enable_cdi", "cdi_spec_dirs"}
    # taking back the last one gives the original back, byte for byte, and nothing of gpuready's
    result = run_cli("unconfigure", "--root", str(tmp_path), "--runtime-name", "alpha", *LINE)
    assert result.code == 0, result.err
    assert config.read_text() == TWO_RUNTIMES_BASE
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]


def test_unconfigure_runtime_name_gpuready_never_added_is_refused(tmp_path: Path) -> None:
    config = _two_runtimes(tmp_path)
    before = _files(tmp_path)
    result = run_cli("unconfigure", "--root", str(tmp_path), "--runtime-name", "runc", *LINE)
    assert result.code == 2, result.out + result.err
    [line] = result.err.strip().splitlines()
    assert str(tmp_path / RECORD) in line and "never added runtime 'runc'" in line
    assert "it records alpha, beta" in line and line.endswith("nothing written")
    assert _files(tmp_path) == before and _runtimes(config) == {"runc", "alpha", "beta"}


def test_unconfigure_runtime_name_keeps_an_edit_of_the_operator(tmp_path: Path) -> None:
    """A file edited since gpuready wrote it loses beta's table only; the edit survives the
    later unconfigure of everything (it is never taken for gpuready's own text)."""
    config = _two_runtimes(tmp_path)
    config.write_text(config.read_text() + "# the operator's own line\n")
    assert run_cli("unconfigure", "--root", str(tmp_path), "--runtime-name", "beta",
                   *LINE).code == 0
    assert _runtimes(config) == {"runc", "alpha"}
    result = run_cli("unconfigure", "--root", str(tmp_path), *LINE)
    assert result.code == 0, result.err
    assert _runtimes(config) == {"runc"}
    assert "# the operator's own line" in config.read_text()


def test_unconfigure_runtime_name_takes_its_drop_in_and_imports_entry(tmp_path: Path) -> None:
    config = tmp_path / CONFIG
    config.parent.mkdir(parents=True)
    config.write_text(TWO_RUNTIMES_BASE)
    line = ("--containerd-version", "2.1")
    for name in ("alpha", "beta"):
        assert run_cli("configure", "--root", str(tmp_path), "--runtime-name", name, *line,
                       "--drop-in", f"/etc/containerd/conf.d/{name}.toml").code == 0
    result = run_cli("unconfigure", "--root", str(tmp_path), "--runtime-name", "alpha", *line)
    assert result.code == 0, result.err
    assert sorted(p.name for p in (config.parent / "conf.d").iterdir()) == ["beta.toml"]
    assert config.read_text() == TWO_RUNTIMES_BASE.replace(
        "version = 2\n", 'version = 2\nimports = ["/etc/containerd/conf.d/beta.toml"]\n\n')
    result = run_cli("unconfigure", "--root", str(tmp_path), *line)
    assert result.code == 0, result.err
    assert config.read_text() == TWO_RUNTIMES_BASE
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]
