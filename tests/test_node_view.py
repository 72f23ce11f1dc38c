"""One node, one verdict: a node another tool broke, and settings that do not take effect.

The node of issue 27: Debian 12's packaged ``/etc/containerd/config.toml`` after ``nvidia-ctk
runtime configure --runtime=containerd`` (1.20.0, its default drop-in mode; the files it wrote
are recorded in ``tests/data/observed/nvidia-ctk-1.20.0``). The drop-in's ``runtimes`` table
replaces containerd 1.x's built-in map, runc is gone and the CRI plugin does not load. Every
command names that one cause, in that file; ``configure`` repairs it with lines added; the real
containerd 1.6 started on the files agrees before and after; ``unconfigure`` keeps the repair.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import tomlkit

from gpuready.containerd.lines import from_release_text
from gpuready.containerd.model import load_node
from gpuready.node import Node
from tests.harness.containerd import Containerd, sandboxed, short_tempdir
from tests.helpers import DATA, require, run_cli

RECORDED = DATA / "observed" / "nvidia-ctk-1.20.0"
CASES = sorted(path.name for path in RECORDED.iterdir() if path.is_dir())
DEBIAN = RECORDED / "debian-12-containerd-package"
CAUSE = "replaces containerd 1.6's built-in one, so runc is gone"
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"


def node_of(tmp_path: Path, case: str) -> Path:
    """The recorded files of ``case`` laid out as a node: the main config and nvidia-ctk's
    drop-in at the paths it wrote them."""
    root = tmp_path / case
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    shutil.copyfile(RECORDED / case / "config.toml", root / "etc/containerd/config.toml")
    shutil.copyfile(RECORDED / case / "conf.d" / "99-nvidia.toml", root / DROP_IN.lstrip("/"))
    return root


def summary(case: str) -> dict:
    return json.loads((RECORDED / case / "summary.json").read_text())


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_the_model_loads_what_each_recorded_line_loaded(case: str, tmp_path: Path) -> None:
    """The model, on nvidia-ctk's files, gives each real line's ``config dump`` answer."""
    recorded = summary(case)
    root = node_of(tmp_path, case)
    node = Node(root)
    line = from_release_text(recorded["line"], source="--containerd-version")
    loaded = load_node(node.path("/etc/containerd/config.toml"), node=node, line=line)
    assert sorted(loaded.runtimes) == sorted(recorded["after"]["runtimes"])
    assert loaded.default_runtime == recorded["after"]["default"]
    assert loaded.cri_loaded is recorded["default_loadable_after"]
    if not recorded["default_loadable_after"]:
        assert loaded.cause.file == node.path(DROP_IN), loaded.cause
        assert loaded.cause.kind == "map-replaced"


@pytest.mark.parametrize("case", CASES)
def test_lint_doctor_and_check_agree_with_the_recorded_line(case: str, tmp_path: Path) -> None:
    """Where the real line's CRI plugin does not load, lint (the node), doctor and check all
    exit 1 and name the drop-in and the same cause; where it loads, none of them says it does
    not."""
    recorded = summary(case)
    root = node_of(tmp_path, case)
    version = ("--containerd-version", recorded["line"])
    answers = {command: run_cli(command, "--root", str(root), *version)
               for command in ("lint", "doctor", "check")}
    drop_in = str(root / DROP_IN.lstrip("/"))
    for command, result in answers.items():
        said = result.out + result.err
        if recorded["default_loadable_after"]:
            assert "default-runtime-missing" not in said, (command, said)
            assert "runtimes table in this file replaces" not in said, (command, said)
        else:
            assert result.code == 1, (command, said)
            line = recorded["line"]
            assert f"replaces containerd {line}'s built-in one, so runc is gone" in said, \
                (command, said)
            assert drop_in in said, (command, said)


def test_configure_repairs_the_node_and_unconfigure_keeps_the_repair(tmp_path: Path) -> None:
    """configure writes runc's table back into the drop-in (lines added), says it cannot
    register in the main file (the drop-in's CRI table wins on 1.x), and leaves a node whose
    CRI plugin loads runc and nvidia; unconfigure takes nothing of the repair back."""
    root = node_of(tmp_path, "debian-12-containerd-package")
    drop_in = root / DROP_IN.lstrip("/")
    main = root / "etc/containerd/config.toml"
    original_drop_in, original_main = drop_in.read_text(), main.read_bytes()
    version = ("--containerd-version", "1.6")

    dry = run_cli("configure", "--root", str(root), *version, "--dry-run")
    assert "would repair: write runtime runc's table back into" in dry.out, dry
    assert drop_in.read_text() == original_drop_in  # a dry run writes nothing

    done = run_cli("configure", "--root", str(root), *version)
    assert done.code == 1, done  # repaired, but nvidia's options stay nvidia-ctk's
    assert "would not take effect" in done.err and DROP_IN in done.err, done
    repaired = drop_in.read_text()
    assert repaired.startswith(original_drop_in.rstrip("\n")), "the repair is lines added"
    assert "runtimes.runc]" in repaired and main.read_bytes() == original_main

    node = Node(root)
    loaded = load_node(node.path("/etc/containerd/config.toml"), node=node,
                       line=from_release_text("1.6", source="--containerd-version"))
    assert loaded.cri_loaded and sorted(loaded.runtimes) == ["nvidia", "runc"]
    doctor = run_cli("doctor", "--root", str(root), *version)
    assert "default-runtime-missing" not in doctor.out and doctor.code == 0, doctor

    undone = run_cli("unconfigure", "--root", str(root), *version)
    assert undone.code == 0, undone
    assert drop_in.read_text() == repaired, "unconfigure keeps the repair"


def test_a_main_file_edit_shadowed_by_a_drop_in_is_a_finding_and_configure_refuses(
        tmp_path: Path) -> None:
    """After configure --drop-in on 1.6, an edit of the main file's CRI table is not what
    containerd runs: doctor names the drop-in that wins; configure --binary on the main file
    refuses with the reason instead of saying it registered the runtime."""
    root = tmp_path / "node"
    (root / "etc/containerd").mkdir(parents=True)
    main = root / "etc/containerd/config.toml"
    shutil.copyfile(DATA / "containerd" / "containerd-1.6.20-default.toml", main)
    version = ("--containerd-version", "1.6")
    dropped = run_cli("configure", "--root", str(root), *version,
                      "--drop-in", "/etc/containerd/conf.d/99-gpuready.toml")
    assert dropped.code == 0, dropped
    text = main.read_text()
    main.write_text(text.replace('sandbox_image = "registry.k8s.io/pause:3.6"',
                                 'sandbox_image = "registry.example/pause:9"'))
    doctor = run_cli("doctor", "--root", str(root), *version, "--format", "json")
    shadowed = [problem for problem in json.loads(doctor.out)["problems"]
                if problem["rule"] == "setting-shadowed"]
    assert [p["file"] for p in shadowed] == [str(main)], doctor.out
    assert "99-gpuready.toml" in shadowed[0]["message"] and "sandbox_image" in \
        shadowed[0]["key_path"]

    before = snapshot(root)
    refused = run_cli("configure", "--root", str(root), *version, "--binary", "/opt/x/runtime")
    assert refused.code == 2, refused
    assert "would not take effect" in refused.err and "99-gpuready.toml" in refused.err
    assert snapshot(root) == before


def _daemon_on(folder: Path, main_text: str, drop_in_text: str) -> Containerd:
    """A real containerd started on a main config importing ``conf.d/*.toml`` in ``folder``."""
    document = tomlkit.parse(sandboxed(main_text, folder))
    document["imports"] = [str(folder / "conf.d" / "*.toml")]
    (folder / "conf.d").mkdir(exist_ok=True)
    (folder / "conf.d" / "99-nvidia.toml").write_text(drop_in_text)
    return Containerd(tomlkit.dumps(document), folder)


@pytest.mark.containerd
def test_the_real_containerd_agrees_before_and_after_the_repair() -> None:
    """containerd 1.6 started on Debian's file and nvidia-ctk's drop-in serves no CRI: verify
    --live exits 1 (not 3, unreachable) naming the drop-in; after configure's repair, the
    restarted daemon loads runc and nvidia over CRI."""
    require(binaries=("containerd", "runc", "ctr"))
    folder = short_tempdir()
    daemon = _daemon_on(folder, (DEBIAN / "config.toml").read_text(),
                        (DEBIAN / "conf.d" / "99-nvidia.toml").read_text())
    try:
        daemon.start()
        plugins = subprocess.run(["ctr", "--address", str(daemon.socket), "plugins", "ls"],
                                 capture_output=True, text=True, timeout=30).stdout
        assert any("cri" in row and "error" in row for row in plugins.splitlines()), plugins
        live = ("verify", "--live", "--address", daemon.address, "--config",
                str(daemon.config_path), "--containerd-version", "1.6")
        before = run_cli(*live)
        assert before.code == 1, before
        assert "CRI plugin did not load" in before.err and "99-nvidia.toml" in before.err
        assert "built-in one, so runc is gone" in before.err, before.err

        repaired = run_cli("configure", "--config", str(daemon.config_path),
                           "--containerd-version", "1.6")
        assert "repair: write runtime runc's table back" in repaired.out, repaired
        daemon.restart()
        after = run_cli(*live, "--format", "json")
        report = json.loads(after.out)
        assert sorted(report["runtimes"]) == ["nvidia", "runc"], after
    finally:
        daemon.remove()
