"""``configure --drop-in`` and ``show-config``, checked against the real containerd's
``config dump`` (Debian's 1.6, which replaces a whole plugin table from an import) and, for the
2.x lines that cannot run here, against the merge measured on the real 2.1.9 and 2.3.4 (key by
key; tests/data/observed/README.md), which gpuready's merge model replays.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.versions import CRI_RUNTIME, spec_for
from tests.helpers import CONTAINERD_DATA, LAB_BASE, require_binary, run_cli

CRI = "io.containerd.grpc.v1.cri"
ONE_SIX_DEFAULT = CONTAINERD_DATA / "containerd-1.6.20-default.toml"
V3_DEFAULT = CONTAINERD_DATA / "containerd-2.1.9-default.toml"


def installed_release() -> str:
    """``X.Y`` of the containerd that runs the dumps (the merge rule must be its own)."""
    binary = require_binary("containerd")
    words = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()
    return ".".join(words[2].split(".")[:2])


def config_dump(config: Path) -> dict:
    """containerd's effective config for ``config`` and its imports."""
    binary = require_binary("containerd")
    result = subprocess.run([binary, "--config", str(config), "config", "dump"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return tomllib.loads(result.stdout)


def _node(tmp_path: Path, base: Path, name: str = "node") -> tuple[Path, Path]:
    folder = tmp_path / name
    folder.mkdir()
    config = folder / "config.toml"
    shutil.copyfile(base, config)
    return config, folder / "conf.d" / "99-nvidia.toml"


def _configure(config: Path, drop_in: Path | None, *extra: str):
    args = ["configure", "--config", str(config), *extra]
    if drop_in is not None:
        args += ["--drop-in", str(drop_in)]
    result = run_cli(*args)
    assert result.code == 0, result.out + result.err
    return result


@pytest.mark.containerd
@pytest.mark.parametrize("base", [LAB_BASE, ONE_SIX_DEFAULT], ids=["lab-base", "1.6-default"])
def test_a_drop_in_keeps_runc_sandbox_image_and_cni_in_containerds_dump(
    tmp_path: Path, base: Path
) -> None:
    release = installed_release()
    config, drop_in = _node(tmp_path, base)
    before = config_dump(config)[("plugins")][CRI]
    _configure(config, drop_in, "--containerd-version", release)
    after = config_dump(config)["plugins"][CRI]
    runtimes = after["containerd"]["runtimes"]
    assert {"runc", "nvidia"} <= set(runtimes)
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["runc"] == before["containerd"]["runtimes"]["runc"]
    assert after["sandbox_image"] == before["sandbox_image"]
    assert after["cni"] == before["cni"]
    # everything but the new runtime is as it was: nothing of the main file is shadowed yet
    del runtimes["nvidia"]
    assert after == before


@pytest.mark.containerd
@pytest.mark.parametrize("base", [LAB_BASE, ONE_SIX_DEFAULT], ids=["lab-base", "1.6-default"])
def test_drop_in_and_in_place_give_containerd_the_same_config(tmp_path: Path, base: Path) -> None:
    release = installed_release()
    in_place, _ = _node(tmp_path, base, "in-place")
    _configure(in_place, None)
    config, drop_in = _node(tmp_path, base, "drop-in")
    _configure(config, drop_in, "--containerd-version", release)
    dumped = config_dump(config)
    dumped.pop("imports")
    expected = config_dump(in_place)
    expected.pop("imports")
    assert dumped == expected


@pytest.mark.containerd
def test_show_config_equals_containerds_dump_for_the_runtime_tables(tmp_path: Path) -> None:
    release = installed_release()
    config, drop_in = _node(tmp_path, LAB_BASE)
    (drop_in.parent).mkdir()
    # another drop-in, loaded before gpuready's: the 1.x copy must carry its runtime too
    (drop_in.parent / "50-crun.toml").write_text(
        LAB_BASE.read_text().replace("runtimes.runc", "runtimes.crun")
    )
    text = config.read_text().replace(
        "version = 2\n", f'version = 2\nimports = ["{drop_in.parent}/*.toml"]\n', 1)
    config.write_text(text)
    result = _configure(config, drop_in, "--containerd-version", release)
    assert config.read_text() == text, "a glob already imports the drop-in: main file unchanged"
    assert "already imported" in result.out
    shown = run_cli("show-config", "--config", str(config), "--containerd-version", release,
                    "--format", "json")
    assert shown.code == 0, shown.err
    report = json.loads(shown.out)
    effective = report["effective"]["plugins"][CRI]
    dumped = config_dump(config)["plugins"][CRI]
    assert set(effective["containerd"]["runtimes"]) == set(dumped["containerd"]["runtimes"])
    for name, table in effective["containerd"]["runtimes"].items():
        assert _subset(table, dumped["containerd"]["runtimes"][name]), name
    assert effective["sandbox_image"] == dumped["sandbox_image"]
    assert _subset(effective["cni"], dumped["cni"])
    assert report["runtimes"]["nvidia"] == [str(drop_in)]
    # 1.x: the last file with the CRI table wins whole, so every runtime comes from the drop-in
    assert report["runtimes"]["crun"] == [str(drop_in)]


def _subset(small: dict, big: dict) -> bool:
    return all(
        _subset(value, big.get(key, {})) if isinstance(value, dict) else big.get(key) == value
        for key, value in small.items()
    )


def test_show_config_marks_each_runtime_with_its_file(tmp_path: Path) -> None:
    config, drop_in = _node(tmp_path, V3_DEFAULT)
    _configure(config, drop_in, "--containerd-version", "2.1")
    shown = run_cli("show-config", "--config", str(config), "--containerd-version", "2.1")
    assert shown.code == 0, shown.err
    assert f"runtimes.nvidia] # from {drop_in}" in shown.out
    assert f"runtimes.runc] # from {config}" in shown.out
    assert "imports merge key by key" in shown.out


@pytest.mark.parametrize("base", [LAB_BASE, V3_DEFAULT], ids=["v2", "v3"])
def test_on_2x_the_drop_in_holds_only_the_runtime(tmp_path: Path, base: Path) -> None:
    """containerd 2.1 and 2.3 merge an import key by key (measured): only gpuready's table."""
    config, drop_in = _node(tmp_path, base)
    _configure(config, drop_in, "--containerd-version", "2.1")
    data = tomllib.loads(drop_in.read_text())
    version = tomllib.loads(base.read_text())["version"]
    spec = spec_for(version)
    assert data["version"] == version  # never above the main file's
    assert list(data["plugins"]) == [spec.cri_plugin]
    assert list(data["plugins"][spec.cri_plugin]) == ["containerd"]
    assert list(data["plugins"][spec.cri_plugin]["containerd"]) == ["runtimes"]
    runtime = facts.runtime(data, spec, "nvidia")
    runc = facts.runtime(tomllib.loads(base.read_text()), spec, "runc")
    assert runtime["runtime_type"] == runc["runtime_type"]  # runc's table is the template
    assert runtime["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert spec.cri_plugin == (CRI_RUNTIME if version >= 3 else CRI)


def test_on_1x_the_drop_in_says_what_it_shadows(tmp_path: Path) -> None:
    config, drop_in = _node(tmp_path, LAB_BASE)
    result = _configure(config, drop_in, "--containerd-version", "1.6")
    assert "shadows it in" in result.out
    assert drop_in.read_text().startswith("# Written by gpuready")
    assert "shadows that section" in drop_in.read_text()
    data = tomllib.loads(drop_in.read_text())
    assert data["plugins"][CRI]["sandbox_image"] == "registry.k8s.io/pause:3.9"


def test_dry_run_shows_every_file_and_writes_nothing(tmp_path: Path) -> None:
    config, drop_in = _node(tmp_path, LAB_BASE)
    result = _configure(config, drop_in, "--containerd-version", "2.1", "--dry-run")
    assert f"--- /dev/null\n+++ {drop_in}\n" in result.out
    assert f"--- {config}\n+++ {config}\n" in result.out
    assert f'+imports = ["{drop_in}"]' in result.out
    assert config.read_bytes() == LAB_BASE.read_bytes()
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]


def test_a_drop_in_gpuready_did_not_write_is_refused(tmp_path: Path) -> None:
    config, drop_in = _node(tmp_path, LAB_BASE)
    drop_in.parent.mkdir()
    drop_in.write_text("version = 2\n# the operator's\n")
    result = run_cli("configure", "--config", str(config), "--drop-in", str(drop_in))
    assert result.code == 2
    assert result.err == (f"gpuready: error: {drop_in}: exists and was not written by gpuready; "
                          "nothing written (choose another --drop-in PATH, or register in the "
                          "file itself with --config)\n")
    assert drop_in.read_text() == "version = 2\n# the operator's\n"
    assert config.read_bytes() == LAB_BASE.read_bytes()


def test_the_default_drop_in_path_is_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, config)
    result = run_cli("configure", "--root", str(root), "--drop-in", "--containerd-version", "2.1")
    assert result.code == 0, result.err
    assert (root / "etc/containerd/conf.d/99-nvidia.toml").is_file()
    assert 'imports = ["/etc/containerd/conf.d/99-nvidia.toml"]' in config.read_text()
    drop_in = (root / "etc/containerd/conf.d/99-nvidia.toml").read_text()
    # the drop-in is the node's: its comment names the main file as the node sees it
    assert "# imported by /etc/containerd/config.toml." in drop_in
    assert str(root) not in drop_in


# -- unconfigure takes away the folders gpuready created for a drop-in -------------------------


def _root_with_config(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, config)
    return root, config


def _tree(root: Path) -> list[str]:
    """Every file and folder under ``root``."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def _run(*args: str):
    result = run_cli(*args, "--containerd-version", "2.1")
    assert result.code == 0, result.out + result.err
    return result


@pytest.mark.parametrize("drop_in", [None, "/etc/containerd/gpu/drop-ins/99-nvidia.toml"],
                         ids=["default-conf.d", "two-new-folders"])
def test_unconfigure_removes_the_folders_gpuready_created(tmp_path: Path, drop_in) -> None:
    root, config = _root_with_config(tmp_path)
    before = _tree(root)
    _run("configure", "--root", str(root), "--drop-in", *([drop_in] if drop_in else []))
    written = Path(drop_in or "/etc/containerd/conf.d/99-nvidia.toml")
    assert (root / written.relative_to("/")).is_file()
    record = json.loads((root / "etc/containerd/config.toml.gpuready.json").read_text())
    created = [str(folder) for folder in written.parents if str(folder) not in ("/", "/etc",
                                                                               "/etc/containerd")]
    assert record["files"][str(written)]["folders"] == sorted(created)  # node paths, top down

    dry = _run("unconfigure", "--root", str(root), "--dry-run")
    shown = ", ".join(str(root) + folder for folder in reversed(sorted(created)))
    assert f"note: {shown}: the folder{'s' if len(created) > 1 else ''} gpuready created" in dry.out
    assert (root / written.relative_to("/")).is_file()  # a dry run removes nothing
    _run("unconfigure", "--root", str(root))
    assert _tree(root) == before  # no drop-in, no empty folder, no backup, no record
    assert config.read_bytes() == LAB_BASE.read_bytes()


def test_a_folder_the_operator_made_stays_even_empty(tmp_path: Path) -> None:
    root, _ = _root_with_config(tmp_path)
    (root / "etc/containerd/conf.d").mkdir()  # made by the operator, before gpuready
    before = _tree(root)
    _run("configure", "--root", str(root), "--drop-in")
    record = json.loads((root / "etc/containerd/config.toml.gpuready.json").read_text())
    assert "folders" not in record["files"]["/etc/containerd/conf.d/99-nvidia.toml"]
    undone = _run("unconfigure", "--root", str(root))
    assert "the folder gpuready created" not in undone.out
    assert _tree(root) == before and (root / "etc/containerd/conf.d").is_dir()


def test_a_link_out_of_the_root_never_leads_unconfigure_to_a_host_folder(tmp_path: Path) -> None:
    """The node's etc/containerd links to a folder by its absolute path. gpuready follows the
    link inside the root when it writes, and so when it removes the folder it created; the
    operating system would follow it out of the root, to a host folder of the same name."""
    root, host = tmp_path / "root", tmp_path / "host-containerd"
    inside = root / host.relative_to("/")  # where the link leads within the root
    inside.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, inside / "config.toml")
    (root / "etc").mkdir()
    (root / "etc/containerd").symlink_to(host)
    (host / "conf.d").mkdir(parents=True)  # the host's own folder, empty
    _run("configure", "--root", str(root), "--drop-in")
    assert (inside / "conf.d/99-nvidia.toml").is_file()
    _run("unconfigure", "--root", str(root))
    assert not (inside / "conf.d").exists()  # the folder gpuready created went
    assert (host / "conf.d").is_dir()  # the host's folder of the same name stayed


def test_a_folder_gpuready_created_that_holds_other_files_stays(tmp_path: Path) -> None:
    root, _ = _root_with_config(tmp_path)
    _run("configure", "--root", str(root), "--drop-in")
    theirs = root / "etc/containerd/conf.d/50-mirrors.toml"
    theirs.write_text("version = 2\n")  # the operator's file, put there since
    _run("unconfigure", "--root", str(root))
    assert not (root / "etc/containerd/conf.d/99-nvidia.toml").exists()
    assert sorted(p.name for p in theirs.parent.iterdir()) == ["50-mirrors.toml"]


@pytest.mark.parametrize(("file", "folder"), [
    ("/etc/containerd/conf.d/99-nvidia.toml", "/var/lib/kubelet"),
    ("/etc/containerd/conf.d/99-nvidia.toml", "/"),
    ("/etc/containerd/conf.d/99-nvidia.toml", "/etc/containerd/conf.d/../.."),
    ("/etc/containerd/conf.d/99-nvidia.toml", "etc/containerd/conf.d"),
    ("/etc/containerd/config.toml", "/etc/containerd"),  # a file gpuready did not create
])
def test_a_record_naming_a_folder_gpuready_did_not_create_is_refused(
    tmp_path: Path, file: str, folder: str
) -> None:
    root, config = _root_with_config(tmp_path)
    _run("configure", "--root", str(root), "--drop-in")
    (root / "var/lib/kubelet").mkdir(parents=True)  # an empty folder that is not gpuready's
    record_file = root / "etc/containerd/config.toml.gpuready.json"
    record = json.loads(record_file.read_text())
    record["files"][file]["folders"] = [folder]
    record_file.write_text(json.dumps(record))
    before = _tree(root)
    result = run_cli("unconfigure", "--root", str(root), "--containerd-version", "2.1")
    assert result.code == 2, result.out + result.err
    assert "gpuready record refused" in result.err and len(result.err.splitlines()) == 1
    assert _tree(root) == before


def test_a_rolled_back_unconfigure_puts_the_folder_back_with_the_drop_in(tmp_path: Path) -> None:
    """What ``unconfigure --restart`` does when containerd does not come back: every file put
    back, the drop-in too, whose folder the unconfigure had removed."""
    from gpuready.changeset import locked_all, put_back
    from gpuready.workflow.daytwo import NodeConfig, plan_unconfigure_node, write

    root, config = _root_with_config(tmp_path)
    _run("configure", "--root", str(root), "--drop-in")
    configured = {name: (root / name).read_bytes() for name in _tree(root)
                  if (root / name).is_file()}
    node = NodeConfig(config=config, root=root, major=2)
    with locked_all([config, root / "etc/containerd/conf.d/99-nvidia.toml"], node=node.node):
        written = write(plan_unconfigure_node(node), node=node)
        assert not (root / "etc/containerd/conf.d").exists()
        put_back(written, node=node.node)
    assert {name: (root / name).read_bytes() for name in _tree(root)
            if (root / name).is_file()} == configured
