"""A thin adapter over NVML (the optional ``nvidia-ml-py`` package, module ``pynvml``).

It only asks NVML for what the spec names: each GPU's index, UUID, minor number and PCI address,
its MIG devices, and the driver version. Anything NVML cannot answer (no package, no driver, no
GPU) makes :func:`read_gpus` return None, and the caller falls back to the device nodes.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from typing import Any

MIG_ENABLED = 1


@dataclass(frozen=True)
class NvmlGpu:
    """One GPU as NVML reports it; ``mig`` holds (index, uuid, gpu instance, compute instance)."""

    index: int
    uuid: str
    minor: int
    pci_address: str
    mig: tuple[tuple[int, str, int, int], ...] = ()


@dataclass(frozen=True)
class NvmlReport:
    """The driver version and the GPUs NVML sees."""

    driver_version: str
    gpus: tuple[NvmlGpu, ...]


def read_gpus() -> NvmlReport | None:
    """Ask NVML for the node's GPUs; None when NVML is not installed or does not answer."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        version = _text(nvml.nvmlSystemGetDriverVersion())
        gpus = tuple(_gpu(nvml, index) for index in range(nvml.nvmlDeviceGetCount()))
    except nvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
    return NvmlReport(version, gpus) if gpus else None


def _gpu(nvml: Any, index: int) -> NvmlGpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    return NvmlGpu(index, _text(nvml.nvmlDeviceGetUUID(handle)),
                   nvml.nvmlDeviceGetMinorNumber(handle),
                   pci_address(_text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
                   _mig_devices(nvml, handle))


def _mig_devices(nvml: Any, handle: Any) -> tuple[tuple[int, str, int, int], ...]:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:  # not a MIG-capable GPU
        return ()
    if current != MIG_ENABLED:
        return ()
    found = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nvml.NVMLError:  # an empty slot
            continue
        found.append((slot, _text(nvml.nvmlDeviceGetUUID(mig)),
                      nvml.nvmlDeviceGetGpuInstanceId(mig),
                      nvml.nvmlDeviceGetComputeInstanceId(mig)))
    return tuple(found)


def pci_address(bus_id: str) -> str:
    """NVML's ``00000000:3B:00.0`` as sysfs spells it: ``0000:3b:00.0``."""
    domain, _, rest = bus_id.partition(":")
    return f"{domain[-4:]}:{rest}".lower() if rest else bus_id.lower()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
