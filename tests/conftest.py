"""Fixtures for tests that need the real containerd, runc and a static busybox.

Under CI=true a missing binary fails the test (CI must install it); elsewhere it skips.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuready.cri import probe_image
from tests.harness.containerd import Containerd, lab_config, short_tempdir
from tests.harness.standin import write_standin
from tests.helpers import BUSYBOX, PROBE_IMAGE, nvidia_runtime, require, require_binary


def pytest_addoption(parser) -> None:
    """``--slow`` runs the long fuzz, kill and load tests (marked ``slow``); CI runs without it."""
    parser.addoption(
        "--slow", action="store_true", default=False, help="also run tests marked slow"
    )


def pytest_collection_modifyitems(config, items) -> None:
    """Deselect tests marked ``slow`` unless ``--slow`` was given (CI lists no skips for them)."""
    if config.getoption("--slow"):
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


@pytest.fixture(scope="session")
def probe_archive(tmp_path_factory) -> Path:
    """An OCI archive of the busybox pause stand-in, named as the lab's sandbox_image."""
    require(files=(BUSYBOX,))
    folder = tmp_path_factory.mktemp("probe-image")
    return probe_image.build_archive(BUSYBOX, PROBE_IMAGE, folder / "probe.tar").archive


@pytest.fixture(scope="session")
def config_dump() -> Callable[[Path], subprocess.CompletedProcess]:
    """``config_dump(path)``: ``containerd --config PATH config dump`` by the containerd under test.

    It loads the file (and its imports) over containerd's defaults and prints what containerd
    would use; a runtime it cannot place is missing from the output.
    """
    binary = require_binary("containerd")

    def dump(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([binary, "--config", str(path), "config", "dump"],
                              capture_output=True, text=True, timeout=60)

    return dump


@pytest.fixture
def start_containerd() -> Iterator[Callable[..., Containerd]]:
    """A factory: ``start_containerd(runtimes=..., image=True, **lab_config options)``.

    Each daemon gets its own short folder, a stand-in runtime at ``folder/standin`` recording to
    ``folder/standin.log`` (use the string ``"STANDIN"`` as a BinaryName to point at it), and
    with ``image=True`` the probe image imported. All are stopped and removed afterwards.
    """
    require(binaries=("containerd", "runc", "ctr"))
    started: list[Containerd] = []

    def start(*, runtimes=None, image=None, **options) -> Containerd:
        folder = short_tempdir()
        standin = write_standin(folder / "standin", log=folder / "standin.log")
        for entry in (runtimes or {}).values():
            opts = entry.get("options", {})
            if opts.get("BinaryName") == "STANDIN":
                opts["BinaryName"] = str(standin)
        daemon = Containerd(lab_config(folder, runtimes=runtimes, **options), folder)
        started.append(daemon)
        daemon.start()
        if image is not None:
            probe_image.import_archive(image, socket=daemon.socket)
        return daemon

    yield start
    for daemon in started:
        daemon.remove()


@pytest.fixture
def lab_containerd(start_containerd, probe_archive) -> Containerd:
    """A containerd with runc and the nvidia runtime (stand-in binary) and the probe image."""
    return start_containerd(runtimes=nvidia_runtime(), image=probe_archive)
