"""Fixtures for tests that need the real containerd, runc and a static busybox.

Under CI=true a missing binary fails the test (CI must install it); elsewhere it skips.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# As gpuready.cri.client does before it loads gRPC: a test harness may load gRPC first.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

from gpuready.cri import probe_image
from tests.harness.builds import ENV, Build, builds
from tests.harness.containerd import Containerd, lab_config, sandboxed, short_tempdir
from tests.harness.replay import RecordedContainerd
from tests.harness.restartable import RestartableContainerd
from tests.harness.standin import write_standin
from tests.helpers import (
    BUSYBOX,
    PROBE_IMAGE,
    STANDIN_PATH,
    nvidia_runtime,
    require,
    require_binary,
)


def pytest_configure(config) -> None:
    """Put the running Python's scripts folder first on PATH, as activating its venv would.

    The README runs the tests with ``.venv/bin/python -m pytest``, without activating the venv:
    the tools installed with the test extra (``ansible-playbook``) are then found all the same.
    """
    scripts = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != scripts:
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


def pytest_addoption(parser) -> None:
    """``--slow`` runs the long fuzz, kill and load tests (marked ``slow``); CI runs without it."""
    parser.addoption(
        "--slow", action="store_true", default=False, help="also run tests marked slow"
    )


ANSIBLE_CONTROLLER_TESTS = ("test_ansible_",)  # modules that run ansible-playbook or ansible-doc


def pytest_collection_modifyitems(config, items) -> None:
    """Mark the Ansible controller tests ``ansible`` (ansible-core's controller needs Python
    3.11 or later, so the Python 3.9 run leaves them out with ``-m "not ansible"``), and
    deselect tests marked ``slow`` unless ``--slow`` was given (CI lists no skips for them)."""
    for item in items:
        if item.module.__name__.rpartition(".")[2].startswith(ANSIBLE_CONTROLLER_TESTS):
            item.add_marker(pytest.mark.ansible)
    if config.getoption("--slow"):
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


def pytest_generate_tests(metafunc) -> None:
    """Run every real-containerd test once per build (tests/harness/builds.py).

    A test takes part when it is marked ``containerd`` or uses a fixture that starts one
    (``start_containerd``, ``lab_containerd``, ``containerd_build``).
    """
    if metafunc.definition.get_closest_marker("containerd") and (
        "containerd_build" not in metafunc.fixturenames
    ):
        metafunc.fixturenames.append("containerd_build")
    if "containerd_build" in metafunc.fixturenames:
        found = builds()
        metafunc.parametrize("containerd_build", found, ids=[b.id for b in found], indirect=True)


@pytest.fixture
def containerd_build(request, monkeypatch) -> Iterator[Build]:
    """The containerd build this test runs against, its folder first on PATH for the test."""
    from gpuready.containerd import base, installed

    build = getattr(request, "param", Build(None))
    if build.missing():
        pytest.fail(f"{build.folder} lacks {', '.join(build.missing())} ({ENV})")
    monkeypatch.setenv("PATH", build.path_env(os.environ.get("PATH", "")))
    caches = [installed.version_text, base.containerd_config_default]
    for cache in caches:
        cache.cache_clear()  # the release and default config of another build
    yield build
    for cache in caches:
        cache.cache_clear()


@pytest.fixture(scope="session")
def probe_archive(tmp_path_factory) -> Path:
    """An OCI archive of the busybox pause stand-in, named as the lab's sandbox_image."""
    require(files=(BUSYBOX,))
    folder = tmp_path_factory.mktemp("probe-image")
    return probe_image.build_archive(BUSYBOX, PROBE_IMAGE, folder / "probe.tar").archive


@pytest.fixture
def config_dump(containerd_build) -> Callable[[Path], subprocess.CompletedProcess]:
    """``config_dump(path)``: ``containerd --config PATH config dump`` by the build under test.

    It loads the file (and its imports) over containerd's defaults and prints what containerd
    would use; a runtime it cannot place is missing from the output.
    """
    binary = containerd_build.binary("containerd") or require_binary("containerd")

    def dump(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([binary, "--config", str(path), "config", "dump"],
                              capture_output=True, text=True, timeout=60)

    return dump


@pytest.fixture
def start_containerd(containerd_build) -> Iterator[Callable[..., Containerd]]:
    """A factory: ``start_containerd(runtimes=..., image=True, **lab_config options)``.

    Each daemon gets its own short folder, a stand-in runtime at ``folder/standin`` recording to
    ``folder/standin.log`` (use the string ``"STANDIN"`` as any option's value to point at it;
    ``"STANDIN-x"`` gets its own stand-in ``folder/standin-x`` logging to ``standin-x.log``), and
    with ``image=True`` the probe image imported. ``config_text`` replaces the lab config (its
    paths moved into the folder; ``STANDIN_PATH`` in it becomes the stand-in's path). All are
    stopped and removed afterwards.
    """
    require(binaries=("containerd", "runc", "ctr"))
    started: list[Containerd] = []

    def start(*, runtimes=None, image=None, config_text=None, **options) -> Containerd:
        folder = short_tempdir()
        write_standin(folder / "standin", log=folder / "standin.log")
        for entry in (runtimes or {}).values():
            opts = entry.get("options", {})
            for key, value in list(opts.items()):
                if isinstance(value, str) and value.startswith("STANDIN"):
                    name = value.lower()
                    if not (folder / name).exists():
                        write_standin(folder / name, log=folder / f"{name}.log")
                    opts[key] = str(folder / name)
        if config_text is not None:  # a whole config; STANDIN_PATH in it names the stand-in
            text = sandboxed(config_text.replace(STANDIN_PATH, str(folder / "standin")), folder)
        else:
            text = lab_config(folder, runtimes=runtimes, **options)
        daemon = Containerd(
            text,
            folder,
            binary=containerd_build.binary("containerd") or "containerd",
        )
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


@pytest.fixture
def replay_containerd() -> Iterator[Callable[..., RecordedContainerd]]:
    """A factory: ``replay_containerd("2.3.4", rename=..., images=...)``, a CRI server replaying
    what that containerd release answered (see tests/harness/replay.py); stopped afterwards."""
    started: list[tuple[RecordedContainerd, Path]] = []

    def start(release: str, **options) -> RecordedContainerd:
        folder = short_tempdir()
        server = RecordedContainerd(release, folder, **options).start()
        started.append((server, folder))
        return server

    yield start
    for server, folder in started:
        server.stop()
        folder.rmdir()


@pytest.fixture
def daemon(probe_archive) -> Iterator[RestartableContainerd]:
    """A restartable containerd on the lab config (runc only), the probe image imported (the
    restart transaction's and the journal's tests)."""
    require(binaries=("containerd", "runc", "ctr"))
    folder = short_tempdir()
    write_standin(folder / "standin", log=folder / "standin.log")
    started = RestartableContainerd(lab_config(folder), folder)
    try:
        started.start()
        probe_image.import_archive(probe_archive, socket=started.socket)
        yield started
    finally:
        started.remove()
