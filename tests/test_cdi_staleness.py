"""Stale CDI specs, found without a GPU: driver upgrade, driver removal, GPUs and MIG changed.

The nodes are fake driver trees (``tests/driver_trees.py``): folders holding a driver's files,
standing in for a GPU and its driver only. The specs are written by gpuready's generator and
judged by ``gpuready doctor`` as a user runs them.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from gpuready.cdi import staleness
from gpuready.cli import main
from gpuready.node import Node
from tests import driver_trees as trees
from tests.driver_trees import VERSION_A, VERSION_B


def cli(*argv: str) -> tuple[int, str, str]:
    """Run ``gpuready`` in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main.run(list(argv))
    return code, out.getvalue(), err.getvalue()


def doctor(root: Path, *extra: str) -> tuple[int, list[dict]]:
    """``doctor --format json`` on the node (containerd 1.7 unless ``extra`` says); its CDI
    findings."""
    code, out, err = cli("doctor", "--root", str(root), "--containerd-version", "1.7",
                         "--format", "json", *extra)
    assert "Traceback" not in err, err
    problems = json.loads(out)["problems"]
    return code, [p for p in problems if p["rule"].startswith("cdi-")]


def generate(root: Path, *extra: str) -> str:
    """``cdi generate`` from the tree (no NVML: the tree is the node), the spec's text."""
    code, _, err = cli("cdi", "generate", "--root", str(root), "--no-nvml", "--force", *extra)
    assert code == 0, err
    return (root / "etc/cdi/nvidia.yaml").read_text()


def node_a(root: Path, *, gpus: int = 2) -> str:
    """Driver A installed, containerd reading CDI, gpuready's spec generated from the tree."""
    trees.install_driver(root, VERSION_A, gpus=gpus)
    trees.containerd_config(root, enable_cdi=True)
    return generate(root)


def only(problems: list[dict], rule: str) -> dict:
    found = [p for p in problems if p["rule"] == rule]
    assert len(found) == 1, problems
    return found[0]


def test_a_spec_of_the_installed_driver_has_no_cdi_finding(tmp_path):
    text = node_a(tmp_path)
    assert f"libcuda.so.{VERSION_A}" in text and f"firmware/nvidia/{VERSION_A}/" in text
    code, problems = doctor(tmp_path)
    assert problems == [] and code == 0


def test_driver_upgrade_makes_the_spec_stale_and_names_the_vanished_paths(tmp_path):
    node_a(tmp_path)
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    code, problems = doctor(tmp_path)
    assert code == 1
    stale = only(problems, "cdi-spec-stale")
    assert stale["severity"] == "error"
    assert stale["file"] == str(tmp_path / "etc/cdi/nvidia.yaml")
    message = stale["message"]
    assert (f"written for driver {VERSION_A}, but the node has {VERSION_B} "
            "(/sys/module/nvidia/version)") in message
    assert f"/usr/lib/x86_64-linux-gnu/libcuda.so.{VERSION_A} (mount)" in message
    assert f"/lib/firmware/nvidia/{VERSION_A}/gsp_ga10x.bin (mount)" in message
    assert str(tmp_path) not in message.replace(stale["file"], "")  # node paths, not sandbox
    assert "gpuready cdi generate --force" in stale["fix"]
    # the fix it names works: regenerated, the spec is current again
    assert f"libcuda.so.{VERSION_B}" in generate(tmp_path)
    assert doctor(tmp_path) == (0, [])


def test_a_new_driver_with_the_old_files_left_is_stale_by_its_version(tmp_path):
    """The old libraries are still there (no path vanished): the version alone tells."""
    node_a(tmp_path)
    trees.install_driver(tmp_path, VERSION_B)  # B beside A's files, B's module loaded
    _, problems = doctor(tmp_path)
    message = only(problems, "cdi-spec-stale")["message"]
    assert f"written for driver {VERSION_A}, but the node has {VERSION_B}" in message
    assert "host path" not in message


def test_the_proc_file_tells_the_version_when_sys_does_not(tmp_path):
    trees.install_driver(tmp_path, VERSION_A)
    (tmp_path / "sys/module/nvidia/version").unlink()
    found = staleness.node_driver(Node(tmp_path))
    assert (found.version, found.source) == (VERSION_A, "/proc/driver/nvidia/version")
    (tmp_path / "proc/driver/nvidia/version").unlink()
    found = staleness.node_driver(Node(tmp_path))
    assert found.version == VERSION_A and "libcuda" in found.source


def test_driver_packages_removed_while_the_module_is_loaded(tmp_path):
    node_a(tmp_path)
    trees.remove_driver_files(tmp_path, VERSION_A)
    code, problems = doctor(tmp_path)
    message = only(problems, "cdi-spec-stale")["message"]
    assert code == 1
    assert f"libnvidia-ml.so.{VERSION_A} (mount)" in message
    assert "/usr/bin/nvidia-smi (mount)" in message


def test_driver_removed_and_rebooted_is_stale_when_the_spec_was_detected(tmp_path):
    """The spec's intent record says its GPUs were detected on the node (device nodes): a node
    that shows no driver now lost it, which is not the same as a spec written ahead."""
    node_a(tmp_path)
    assert '"source": "device nodes"' in (tmp_path / "etc/cdi/nvidia.yaml.gpuready.intent"
                                          ).read_text()
    trees.remove_driver_files(tmp_path, VERSION_A)
    trees.unload_module(tmp_path)
    code, problems = doctor(tmp_path)
    stale = only(problems, "cdi-spec-stale")
    assert code == 1
    assert "its GPUs were detected on the node (device nodes), and the node shows no NVIDIA " \
           "driver now" in stale["message"]
    assert f"libcuda.so.{VERSION_A} (mount)" in stale["message"]
    assert "install the driver again and run gpuready cdi refresh" in stale["fix"]


def test_driver_removed_and_rebooted_without_an_intent_record_is_not_verifiable(tmp_path):
    node_a(tmp_path)
    (tmp_path / "etc/cdi/nvidia.yaml.gpuready.intent").unlink()  # a spec of another writer
    trees.remove_driver_files(tmp_path, VERSION_A)
    trees.unload_module(tmp_path)
    assert doctor(tmp_path) == (0, [])
    verdict = _assess(tmp_path)
    assert not verdict.verifiable and not verdict.stale and verdict.absent > 0
    assert not verdict.driver.present


def test_a_spec_written_ahead_of_the_driver_is_not_yet_verifiable(tmp_path):
    trees.containerd_config(tmp_path, enable_cdi=True)
    generate(tmp_path, "--gpus", "4")
    assert doctor(tmp_path) == (0, [])
    verdict = _assess(tmp_path)
    assert not verdict.verifiable and verdict.absent == 7  # 4 GPUs and 3 control devices
    trees.load_module(tmp_path, VERSION_A, gpus=4)  # the driver arrives: judged, and true
    assert doctor(tmp_path) == (0, [])


def _assess(root: Path) -> staleness.Staleness:
    spec = root / "etc/cdi/nvidia.yaml"
    return staleness.assess(Node(root), spec, staleness.read_decoded(Node(root), spec))


def test_quick_start_sandbox_gets_no_new_finding(tmp_path):
    """README's Quick start: setup on an empty sandbox, then doctor: nothing about CDI."""
    root = tmp_path / "demo"
    code, _, err = cli("setup", "--root", str(root))
    assert code == 0, err
    code, out, _ = cli("doctor", "--root", str(root), "--format", "json")
    assert code == 0
    assert [p for p in json.loads(out)["problems"] if p["rule"].startswith("cdi-")] == []
    _, problems = doctor(root)  # told it is 1.7: CDI is off in setup's config
    assert [p["rule"] for p in problems] == ["cdi-not-read"]


def test_a_gpu_gone_and_a_gpu_added(tmp_path):
    node_a(tmp_path, gpus=2)
    trees.unload_module(tmp_path)
    trees.load_module(tmp_path, VERSION_A, gpus=1)  # GPU 1 failed off the bus
    message = only(doctor(tmp_path)[1], "cdi-spec-stale")["message"]
    assert "names GPU(s) the node no longer shows: /dev/nvidia1" in message
    assert "/dev/nvidia1 (device node)" in message
    trees.load_module(tmp_path, VERSION_A, gpus=3)  # and now a third GPU was added
    message = only(doctor(tmp_path)[1], "cdi-spec-stale")["message"]
    assert message.endswith("the node shows GPU(s) it does not name: /dev/nvidia2; every GPU "
                            "container using it fails to start")
    assert "host path" not in message


def test_mig_repartition_makes_the_spec_stale(tmp_path):
    trees.install_driver(tmp_path, VERSION_A, gpus=1)
    trees.containerd_config(tmp_path, enable_cdi=True)
    trees.partition_mig(tmp_path, 0, [(1, 0), (2, 0)])
    spec = tmp_path / "etc/cdi/nvidia.yaml"
    trees.write(spec, trees.mig_spec_text(tmp_path, 0, [(1, 0), (2, 0)]))
    assert "name: 0:1" in spec.read_text() and "nvidia-caps/nvidia-cap" in spec.read_text()
    assert doctor(tmp_path) == (0, [])
    trees.partition_mig(tmp_path, 0, [(3, 0), (4, 0), (5, 0)])  # re-partitioned smaller
    code, problems = doctor(tmp_path)
    message = only(problems, "cdi-spec-stale")["message"]
    assert code == 1
    assert "MIG device(s) are gone (the GPU was re-partitioned): 0:0 (gpu0/gi1/ci0), " \
           "0:1 (gpu0/gi2/ci0)" in message
    assert "MIG device(s) it does not list: gpu0/gi3/ci0, gpu0/gi4/ci0, gpu0/gi5/ci0" in message
    assert "host path" not in message  # the old capability nodes are still in /dev


def test_a_missing_hook_binary_makes_the_spec_stale(tmp_path):
    node_a(tmp_path)
    (tmp_path / "usr/bin/nvidia-cdi-hook").unlink()
    message = only(doctor(tmp_path)[1], "cdi-spec-stale")["message"]
    assert "1 host path(s) it names are gone: /usr/bin/nvidia-cdi-hook (hook)" in message


def test_a_spec_written_before_the_driver_is_stale_once_the_libraries_come(tmp_path):
    """``cdi generate --gpus 2`` on a node without the driver mounts no library; once the
    driver's libraries are there, the spec no longer describes the node."""
    trees.containerd_config(tmp_path, enable_cdi=True)
    text = generate(tmp_path, "--gpus", "2", "--no-hooks")
    assert "libcuda.so" not in text
    trees.install_driver(tmp_path, VERSION_A)
    code, problems = doctor(tmp_path)
    stale = only(problems, "cdi-spec-stale")
    assert f"the node has driver libraries (libcuda.so.{VERSION_A}) and it mounts none" in (
        stale["message"])


def test_an_offline_image_without_dev_nodes_keeps_a_fresh_spec_fresh(tmp_path):
    """A node image (driver files, no /dev, no /proc): the spec just generated is not stale."""
    trees.install_driver(tmp_path, VERSION_A)
    trees.unload_module(tmp_path)
    trees.containerd_config(tmp_path, enable_cdi=True)
    generate(tmp_path, "--gpus", "2")
    code, problems = doctor(tmp_path)
    assert (code, problems) == (0, [])
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path))
    assert code == 0 and out.endswith("fresh, nothing to do\n"), (out, err)
