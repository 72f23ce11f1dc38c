"""Fake NVIDIA driver trees: node folders that stand in for a GPU node in the CDI tests.

There is no GPU and no driver here. A node folder holds the files a driver installs and the
files its kernel module shows, for one of two driver versions: the libraries
(``/usr/lib/x86_64-linux-gnu/libcuda.so.<version>`` ...), firmware under
``/lib/firmware/nvidia/<version>/``, ``/proc/driver/nvidia/version``,
``/sys/module/nvidia/version``, ``/proc/driver/nvidia/gpus/<pci>/information``, the device
nodes (character devices when ``mknod`` is allowed, else plain files of the same name: only
their existence is read), and for MIG the driver's ``mig-minors`` table, the capability folders
under ``/proc/driver/nvidia/capabilities`` and ``/dev/nvidia-caps`` nodes.

The helpers change a tree the way an upgrade, a removal or a MIG re-partition changes a node;
everything else (generating the spec, configuring containerd, checking) is gpuready's own code.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

VERSION_A = "550.54.15"
VERSION_B = "570.86.15"
LIBDIR = "usr/lib/x86_64-linux-gnu"
LIBRARIES = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so")
FIRMWARE = ("gsp_ga10x.bin", "gsp_tu10x.bin")
BINARIES = ("nvidia-smi", "nvidia-debugdump")
PCI = ("0000:3b:00.0", "0000:86:00.0", "0000:af:00.0", "0000:d8:00.0")
UUIDS = ("GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c", "GPU-9a1d3e55-2b7f-4c1e-8d0a-5f6e7a8b9c0d",
         "GPU-0b6e54c2-77a1-4f3e-9d2c-1e8f5a6b7c8d", "GPU-7d1f2e3a-4b5c-4d6e-8f70-8192a3b4c5d6")
PROC_VERSION = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  "
                "Tue Mar 19 10:01:41 UTC 2024\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
CONTAINERD_V2 = """\
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.8"
{cdi}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
        SystemdCgroup = true
"""


def make_device(path: Path, minor: int, major: int = 195) -> None:
    """A character device when mknod is allowed, else a regular file of the same name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except (PermissionError, OSError):
        path.touch()


def write(path: Path, text: str) -> None:
    """Write ``text``, creating the folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def containerd_config(root: Path, *, enable_cdi: bool | None = True) -> Path:
    """A version 2 containerd config with runc and the NVIDIA runtime (its binary installed);
    ``enable_cdi`` written when not None."""
    cdi = "" if enable_cdi is None else (
        f"  enable_cdi = {str(enable_cdi).lower()}\n"
        "  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n")
    path = root / "etc/containerd/config.toml"
    write(path, CONTAINERD_V2.format(cdi=cdi))
    write(root / "usr/bin/nvidia-container-runtime", "#!/bin/sh\n")
    (root / "usr/bin/nvidia-container-runtime").chmod(0o755)
    return path


def install_driver(root: Path, version: str, *, gpus: int = 2, toolkit: bool = True) -> None:
    """The files of driver ``version`` with ``gpus`` GPUs, its module loaded."""
    libs = root / LIBDIR
    libs.mkdir(parents=True, exist_ok=True)
    for name in LIBRARIES:
        (libs / f"{name}.{version}").write_bytes(b"\x7fELF")
    link = libs / "libcuda.so.1"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(f"libcuda.so.{version}")
    for name in FIRMWARE:
        write(root / f"lib/firmware/nvidia/{version}/{name}", "firmware")
    for name in BINARIES:
        write(root / "usr/bin" / name, "#!/bin/sh\n")
    if toolkit:
        write(root / "usr/bin/nvidia-cdi-hook", "#!/bin/sh\n")
    load_module(root, version, gpus=gpus)


def load_module(root: Path, version: str, *, gpus: int = 2) -> None:
    """What the loaded kernel module shows: proc and sys files, device nodes."""
    write(root / "proc/driver/nvidia/version", PROC_VERSION.format(version=version))
    write(root / "sys/module/nvidia/version", version + "\n")
    shutil.rmtree(root / "proc/driver/nvidia/gpus", ignore_errors=True)
    for minor in range(gpus):
        write(root / f"proc/driver/nvidia/gpus/{PCI[minor]}/information",
              f"Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t {UUIDS[minor]}\n"
              f"Device Minor: \t {minor}\n")
        make_device(root / f"dev/nvidia{minor}", minor)
    for index, name in enumerate(("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")):
        make_device(root / "dev" / name, 255 - index)


def remove_driver_files(root: Path, version: str) -> None:
    """The driver's packages removed: libraries, firmware and tools gone (the module may still
    be loaded until the next reboot)."""
    for name in LIBRARIES:
        (root / LIBDIR / f"{name}.{version}").unlink(missing_ok=True)
    link = root / LIBDIR / "libcuda.so.1"
    if link.is_symlink():
        link.unlink()
    shutil.rmtree(root / f"lib/firmware/nvidia/{version}", ignore_errors=True)
    for name in BINARIES:
        (root / "usr/bin" / name).unlink(missing_ok=True)


def unload_module(root: Path) -> None:
    """After a reboot without the driver: no proc or sys files, no device nodes."""
    shutil.rmtree(root / "proc/driver/nvidia", ignore_errors=True)
    shutil.rmtree(root / "proc/driver/nvidia-caps", ignore_errors=True)
    shutil.rmtree(root / "sys/module/nvidia", ignore_errors=True)
    for entry in (root / "dev").glob("nvidia*"):
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def upgrade_driver(root: Path, old: str, new: str, *, gpus: int = 2) -> None:
    """Driver ``old`` replaced by ``new``, and the node rebooted into it."""
    remove_driver_files(root, old)
    install_driver(root, new, gpus=gpus)


# The driver's MIG capability minors: a fixed table of every GPU instance (gi) and compute
# instance (ci) a GPU can have, as /proc/driver/nvidia-caps/mig-minors lists it.
def mig_minor_table(gpus: int = 1) -> dict[str, int]:
    """``gpu0/gi1/access`` and ``gpu0/gi1/ci0/access`` → capability minor."""
    table = {"config": 1, "monitor": 2}
    minor = 3
    for gpu in range(gpus):
        for gi in range(15):
            table[f"gpu{gpu}/gi{gi}/access"] = minor
            minor += 1
            for ci in range(8):
                table[f"gpu{gpu}/gi{gi}/ci{ci}/access"] = minor
                minor += 1
    return table


def partition_mig(root: Path, gpu: int, instances: list[tuple[int, int]]) -> None:
    """GPU ``gpu`` partitioned into ``instances`` ((gpu instance, compute instance) pairs):
    the driver's capability folders for exactly those; the ``/dev/nvidia-caps`` nodes of
    earlier instances are left, as ``nvidia-modprobe`` leaves them."""
    table = mig_minor_table(gpu + 1)
    write(root / "proc/driver/nvidia-caps/mig-minors",
          "".join(f"{name} {minor}\n" for name, minor in table.items()))
    mig = root / f"proc/driver/nvidia/capabilities/gpu{gpu}/mig"
    shutil.rmtree(mig, ignore_errors=True)
    for gi, ci in instances:
        for key in (f"gpu{gpu}/gi{gi}/access", f"gpu{gpu}/gi{gi}/ci{ci}/access"):
            minor = table[key]
            write(mig / key.split("/", 1)[1], f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\n")
            make_device(root / f"dev/nvidia-caps/nvidia-cap{minor}", minor, major=508)


def mig_spec_text(root: Path, gpu: int, instances: list[tuple[int, int]]) -> str:
    """The spec NVIDIA's generator writes for a MIG-partitioned GPU, built with gpuready's
    generator from the tree's files (its MIG devices come from NVML, which a fake tree has not:
    the records are the ones NVML would give for ``instances``)."""
    from gpuready.cdi import generate
    from gpuready.cdi import node as facts
    from gpuready.cdi.inventory import Gpu, NodeInventory
    from gpuready.node import Node

    node = Node(root)
    records = [(index, f"MIG-{gpu}{gi}{ci}0aa1-0000-4000-8000-00000000000{index}", gi, ci)
               for index, (gi, ci) in enumerate(instances)]
    parent = Gpu(gpu, gpu, UUIDS[gpu], facts.gpu_nodes_for(node, gpu, PCI[gpu]),
                 facts.mig_devices_for(node, gpu, records))
    inventory = NodeInventory((parent,), facts.find_driver(node),
                              facts.existing(node, facts.CONTROL_DEVICES), "NVML")
    return generate.render(generate.build_spec(inventory, hook_binary_present=True))


def second_tool_spec(root: Path, folder: str = "var/run/cdi", name: str = "nvidia.yaml",
                     *, kind: str = "nvidia.com/gpu") -> Path:
    """A spec another tool (nvidia-cdi-refresh, the GPU Operator) writes for the same GPUs,
    made from the tree as the tree is now."""
    from gpuready.cdi import generate
    from gpuready.node import Node

    text = generate.spec_text_for_node(Node(root), use_nvml=False)
    if kind != "nvidia.com/gpu":
        text = text.replace("kind: nvidia.com/gpu", f"kind: {kind}")
    path = root / folder / name
    write(path, text)
    return path
