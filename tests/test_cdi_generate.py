"""``gpuready cdi generate`` and ``list`` end to end, on fake node trees under a temporary root."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import types
from pathlib import Path

import pytest
import yaml

from gpuready.cdi import generate
from gpuready.cdi.validate import validate_file
from gpuready.cli import main
from gpuready.node import Node

UUIDS = ("GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c", "GPU-9a1d3e55-2b7f-4c1e-8d0a-5f6e7a8b9c0d")
VERSION = "550.54.15"
LIBDIR = "/usr/lib/x86_64-linux-gnu"


@pytest.fixture(autouse=True)
def node_tmp_path(tmp_path: Path) -> Path:
    """Each test's folder is a node: an ``etc/`` (empty), as ``--root`` requires; and so is
    ``node/`` inside it."""
    for node in (tmp_path, tmp_path / "node"):
        (node / "etc").mkdir(parents=True)
    return tmp_path


def cli(*argv: str) -> tuple[int, str, str]:
    """Run ``gpuready`` in-process with the cdi command; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main.run(list(argv))
    return code, out.getvalue(), err.getvalue()


def make_device(path: Path, minor: int) -> None:
    """A character device when mknod is allowed, else a regular file of the same name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
    except (PermissionError, OSError):
        path.touch()


def fake_node(root: Path, *, hook: bool = True) -> None:
    """Two GPUs with DRI nodes, the control devices, driver 550 libraries (and a leftover 535)."""
    for minor, (address, uuid) in enumerate(zip(("0000:3b:00.0", "0000:86:00.0"), UUIDS)):
        make_device(root / f"dev/nvidia{minor}", minor)
        make_device(root / f"dev/dri/card{minor + 1}", 200 + minor)
        make_device(root / f"dev/dri/renderD{128 + minor}", 300 + minor)
        info = root / f"proc/driver/nvidia/gpus/{address}/information"
        info.parent.mkdir(parents=True)
        info.write_text(f"Model: \t\t NVIDIA H100\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n")
        pci = root / f"sys/devices/pci0000:00/{address}"
        pci.mkdir(parents=True)
        (pci / "driver").symlink_to("../../../bus/pci/drivers/nvidia")
        for name in (f"card{minor + 1}", f"renderD{128 + minor}"):
            (root / "sys/class/drm" / name).mkdir(parents=True)
            (root / "sys/class/drm" / name / "device").symlink_to(
                f"../../../devices/pci0000:00/{address}")
    for index, name in enumerate(("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")):
        make_device(root / "dev" / name, 250 + index)
    libs = root / LIBDIR.lstrip("/")
    libs.mkdir(parents=True)
    for name in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"):
        (libs / f"{name}.{VERSION}").write_bytes(b"\x7fELF")
    (libs / "libcuda.so.535.104.05").write_bytes(b"\x7fELF")
    (libs / "libcuda.so.1").symlink_to(f"libcuda.so.{VERSION}")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-smi").write_bytes(b"\x7fELF")
    if hook:
        (root / "usr/bin/nvidia-cdi-hook").write_bytes(b"\x7fELF")


def spec_paths(spec: dict) -> list[str]:
    """Every path-like string in a spec."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and "/" in value:
            found.append(value)

    walk(spec)
    return found


def test_spec_from_fake_device_tree_validates_and_lists(tmp_path):
    """Device nodes, DRI nodes, libraries and hooks found under --root; paths are the node's."""
    fake_node(tmp_path)
    code, out, err = cli("cdi", "generate", "--root", str(tmp_path), "--no-nvml")
    assert code == 0, err
    written = tmp_path / "etc/cdi/nvidia.yaml"
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    text = written.read_text()
    assert text.startswith("---\n")
    assert validate_file(written) == []
    spec = yaml.safe_load(text)
    assert spec["cdiVersion"] == "0.5.0"
    names = [d["name"] for d in spec["devices"]]
    assert names == ["0", UUIDS[0], "1", UUIDS[1], "all"]
    gpu0 = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
    assert gpu0 == ["/dev/nvidia0", "/dev/dri/card1", "/dev/dri/renderD128"]
    assert not any(str(tmp_path) in path for path in spec_paths(spec))
    mounts = spec["containerEdits"]["mounts"]
    assert [m["containerPath"] for m in mounts] == [
        f"{LIBDIR}/libcuda.so.{VERSION}", f"{LIBDIR}/libnvidia-ml.so.{VERSION}",
        f"{LIBDIR}/libnvidia-ptxjitcompiler.so.{VERSION}", "/usr/bin/nvidia-smi"]
    assert all(m["options"] == ["ro", "nosuid", "nodev", "rbind", "rprivate"] for m in mounts)
    hooks = spec["containerEdits"]["hooks"]
    assert hooks[-1]["args"] == ["nvidia-cdi-hook", "update-ldcache", "--folder", LIBDIR]
    code, out, _ = cli("cdi", "list", "--root", str(tmp_path))
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [
        "nvidia.com/gpu=0", "nvidia.com/gpu=1", f"nvidia.com/gpu={UUIDS[0]}",
        f"nvidia.com/gpu={UUIDS[1]}", "nvidia.com/gpu=all"]
    assert all(line.endswith(str(written)) for line in out.splitlines())


def test_no_hooks_without_the_hook_binary(tmp_path):
    """Hooks only come when /usr/bin/nvidia-cdi-hook exists under --root, or with --hooks."""
    fake_node(tmp_path, hook=False)
    code, out, _ = cli("cdi", "generate", "--root", str(tmp_path), "--no-nvml", "-o", "-")
    assert code == 0
    assert "hooks" not in yaml.safe_load(out)["containerEdits"]
    code, out, _ = cli("cdi", "generate", "--root", str(tmp_path), "--no-nvml", "-o", "-",
                       "--hooks")
    assert yaml.safe_load(out)["containerEdits"]["hooks"][0]["path"] == "/usr/bin/nvidia-cdi-hook"


def test_planned_spec_for_eight_gpus_validates_and_lists(tmp_path):
    """--gpus 8 on an empty root (no GPU, no driver) gives =0 ... =7 and =all."""
    code, _, err = cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "8")
    assert code == 0, err
    code, out, _ = cli("cdi", "validate", "--root", str(tmp_path))
    assert code == 0, out
    code, out, _ = cli("cdi", "list", "--root", str(tmp_path))
    assert [line.split()[0] for line in out.splitlines()] == [
        f"nvidia.com/gpu={i}" for i in range(8)] + ["nvidia.com/gpu=all"]


def test_no_gpu_and_no_plan_is_bad_input(tmp_path):
    """Without device nodes, --gpus or --inventory there is nothing to describe: exit 2."""
    code, _, err = cli("cdi", "generate", "--root", str(tmp_path), "--no-nvml")
    assert code == 2
    assert "--gpus N" in err
    assert not (tmp_path / "etc/cdi/nvidia.yaml").exists()


def test_inventory_plans_uuids_and_libraries(tmp_path):
    """An inventory names GPUs by UUID and mounts the planned driver version's libraries."""
    inventory = tmp_path / "node.yaml"
    inventory.write_text(f'driverVersion: "{VERSION}"\nlibraryDir: /usr/lib64\ngpus:\n'
                         f"  - {{index: 0, uuid: {UUIDS[0]}}}\n"
                         f"  - {{index: 1, uuid: {UUIDS[1]}}}\n")
    code, out, err = cli("cdi", "generate", "--root", str(tmp_path / "node"), "--inventory",
                         str(inventory), "--format", "json", "-o", "-")
    assert code == 0, err
    spec = yaml.safe_load(out)
    assert [d["name"] for d in spec["devices"]] == ["0", UUIDS[0], "1", UUIDS[1], "all"]
    assert f"/usr/lib64/libcuda.so.{VERSION}" in [m["hostPath"] for m in
                                                  spec["containerEdits"]["mounts"]]


def test_inventory_mistake_names_the_field(tmp_path):
    """A malformed inventory is bad input with the field named."""
    inventory = tmp_path / "node.yaml"
    inventory.write_text("gpus:\n  - {index: -1}\n")
    code, _, err = cli("cdi", "generate", "--root", str(tmp_path), "--inventory",
                       str(inventory), "-o", "-")
    assert code == 2
    assert "gpus[0].index" in err


@pytest.mark.parametrize(
    "name,text,expected",
    [
        ("node.yaml", "gpus:\n  - {index: 0\n", ":3:1: invalid YAML: expected ',' or '}'"),
        ("node.json", '{"gpus": [}\n', ":1:11: invalid JSON: Expecting value"),
        ("node.yaml", "gpus: [\u00ff]\n".encode("latin-1"), ":1:8: not UTF-8 text"),
    ],
    ids=["yaml", "json", "not-utf8"],
)
def test_unreadable_inventory_is_one_line_with_its_position(tmp_path, name, text, expected):
    """A syntax error in an inventory names the file, line and column, as every reader does."""
    inventory = tmp_path / name
    if isinstance(text, bytes):
        inventory.write_bytes(text)
    else:
        inventory.write_text(text)
    code, out, err = cli("cdi", "generate", "--root", str(tmp_path), "--inventory",
                         str(inventory), "-o", "-")
    assert code == 2 and out == ""
    assert f"{inventory}{expected}" in err
    assert len(err.strip().splitlines()) == 1


def test_inventory_that_is_a_folder_is_bad_input(tmp_path):
    code, _, err = cli("cdi", "generate", "--root", str(tmp_path), "--inventory",
                       str(tmp_path), "-o", "-")
    assert code == 2 and f"{tmp_path}: is a directory, not a file" in err


def test_type_index_strategy(tmp_path):
    """--device-name-strategy type-index names GPUs gpu0, gpu1; cdiVersion drops to 0.3.0."""
    code, out, _ = cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "2", "-o", "-",
                       "--device-name-strategy", "type-index")
    spec = yaml.safe_load(out)
    assert [d["name"] for d in spec["devices"]] == ["gpu0", "gpu1", "all"]
    assert spec["cdiVersion"] == "0.3.0"


def test_existing_file_needs_force_and_dry_run_shows_the_diff(tmp_path):
    """A different existing spec is kept without --force; --dry-run shows the diff only."""
    assert cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "2")[0] == 0
    target = tmp_path / "etc/cdi/nvidia.yaml"
    before = target.read_text()
    code, _, err = cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "3")
    assert code == 2 and "--force" in err
    code, out, _ = cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "3", "--dry-run")
    assert code == 0
    assert "+    - path: /dev/nvidia2" in out
    assert target.read_text() == before
    code, out, _ = cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "3", "--force")
    assert code == 0 and out.startswith("wrote")
    assert "/dev/nvidia2" in target.read_text()
    code, out, _ = cli("cdi", "generate", "--root", str(tmp_path), "--gpus", "3")
    assert code == 0 and out.startswith("unchanged")


def test_setup_entry_point_plans_one_gpu_when_none_is_found(tmp_path):
    """spec_text_for_node: the node's GPUs when found, else one planned GPU."""
    text = generate.spec_text_for_node(Node(tmp_path), use_nvml=False)
    assert [d["name"] for d in yaml.safe_load(text)["devices"]] == ["0", "all"]
    fake_node(tmp_path / "node")
    text = generate.spec_text_for_node(Node(tmp_path / "node"), use_nvml=False)
    assert "nvidia.com/gpu" in text and UUIDS[1] in text


def fake_pynvml(gpus):
    """A stand-in for the ``pynvml`` module: no GPU (and so no NVML) can exist on this machine.

    ``gpus`` is a list of (uuid, minor, bus id, MIG devices or None); MIG devices are
    (uuid, gpu instance, compute instance).
    """
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def handle(index):
        return ("gpu", index)

    def mig_handle(parent, slot):
        migs = gpus[parent[1]][3] or []
        if slot >= len(migs):
            raise NVMLError("not found")
        return ("mig", parent[1], slot)

    def uuid(h):
        return (gpus[h[1]][0] if h[0] == "gpu" else gpus[h[1]][3][h[2]][0]).encode()

    def mig_mode(h):
        if gpus[h[1]][3] is None:
            raise NVMLError("not supported")
        return (1, 1)

    module.NVMLError = NVMLError
    module.nvmlInit = lambda: None
    module.nvmlShutdown = lambda: None
    module.nvmlSystemGetDriverVersion = lambda: VERSION
    module.nvmlDeviceGetCount = lambda: len(gpus)
    module.nvmlDeviceGetHandleByIndex = handle
    module.nvmlDeviceGetUUID = uuid
    module.nvmlDeviceGetMinorNumber = lambda h: gpus[h[1]][1]
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpus[h[1]][2].encode())
    module.nvmlDeviceGetMigMode = mig_mode
    module.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7
    module.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle
    module.nvmlDeviceGetGpuInstanceId = lambda h: gpus[h[1]][3][h[2]][1]
    module.nvmlDeviceGetComputeInstanceId = lambda h: gpus[h[1]][3][h[2]][2]
    return module


def test_devices_from_nvml_with_mig(tmp_path, monkeypatch):
    """With NVML answering (a fake pynvml: no GPU exists here), GPUs and MIG devices are named.

    The MIG device gets its parent GPU node and the capability nodes from the driver's
    mig-minors table under --root.
    """
    mig_uuid = "MIG-2f1e0d3c-4b5a-5968-7788-99aabbccddee"
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([
        (UUIDS[0], 0, "00000000:3B:00.0", None),
        (UUIDS[1], 1, "00000000:86:00.0", [(mig_uuid, 2, 0)]),
    ]))
    table = tmp_path / "proc/driver/nvidia-caps/mig-minors"
    table.parent.mkdir(parents=True)
    table.write_text("config 1\nmonitor 2\ngpu1/gi2/access 147\ngpu1/gi2/ci0/access 148\n")
    code, out, err = cli("cdi", "generate", "--root", str(tmp_path), "-o", "-")
    assert code == 0, err
    spec = yaml.safe_load(out)
    by_name = {d["name"]: d for d in spec["devices"]}
    assert list(by_name) == ["0", UUIDS[0], "1", UUIDS[1], "1:0", mig_uuid, "all"]
    assert [n["path"] for n in by_name["1:0"]["containerEdits"]["deviceNodes"]] == [
        "/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap147", "/dev/nvidia-caps/nvidia-cap148"]
    target = tmp_path / "spec.yaml"
    target.write_text(out)
    assert validate_file(target) == []
