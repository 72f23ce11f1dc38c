"""Small helpers shared by the tests: running the CLI and reading test data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
CONTAINERD_DATA = DATA / "containerd"
LAB_BASE = CONTAINERD_DATA / "lab-base.toml"
FIXTURE_BASE_NODE_PATH = "opt/fixtures/gpu-airgap/containerd/config.toml.base"


@dataclass
class Completed:
    """What a CLI run returned."""

    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> Completed:
    """Run ``python -m gpuready`` in a subprocess, as a user would."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(REPO / "src") + os.pathsep + environment.get("PYTHONPATH", "")
    environment.pop("GPUREADY_DEBUG", None)
    environment.update(env or {})
    result = subprocess.run(
        [sys.executable, "-m", "gpuready", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=120,
    )
    return Completed(result.returncode, result.stdout, result.stderr)


def stage_fixture(root: Path, base: Path = LAB_BASE) -> Path:
    """Put the contract's base fixture under a sandbox root, as step 1 expects it."""
    target = root / FIXTURE_BASE_NODE_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(base, target)
    return target


BUSYBOX = Path("/bin/busybox")
# In a config given to the start_containerd fixture: replaced by the daemon's stand-in runtime.
STANDIN_PATH = "/gpuready-test/standin"
PROBE_IMAGE = "registry.k8s.io/pause:3.9"  # the lab config's sandbox_image


def require(*, binaries: tuple[str, ...] = (), files: tuple[Path, ...] = ()) -> None:
    """Fail under CI=true, skip elsewhere, when a needed binary or file is missing."""
    missing = [name for name in binaries if shutil.which(name) is None]
    missing += [str(path) for path in files if not path.exists()]
    if not missing:
        return
    reason = f"needs {', '.join(missing)} (apt-get install containerd runc busybox-static)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def require_binary(name: str) -> str:
    """The path of a real binary; a failure under CI=true, a skip elsewhere, when missing."""
    require(binaries=(name,))
    return shutil.which(name)


def nvidia_runtime(*, systemd_cgroup: bool = True) -> dict:
    """The nvidia runtime entry as gpuready registers it, with the stand-in as BinaryName."""
    return {
        "nvidia": {
            "runtime_type": "io.containerd.runc.v2",
            "options": {"BinaryName": "STANDIN", "SystemdCgroup": systemd_cgroup},
        }
    }


def added_lines_only(before: str, after: str) -> bool:
    """True when ``after`` is ``before`` with lines inserted and none changed or removed."""
    import difflib

    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    return all(tag in ("equal", "insert") for tag, *_ in matcher.get_opcodes())


def socket_in_root(root: Path, address: str,
                   node_path: str = "/run/containerd/containerd.sock") -> str:
    """Put a test daemon's socket (``address``, outside the root) at ``node_path`` inside the
    node ``root``, as a bind mount puts the host's socket into an agent's tree: under --root a
    socket is a node path. Returns the node's ``unix://`` address for --address."""
    link = root / node_path.lstrip("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(address[len("unix://"):] if address.startswith("unix://") else address)
    return "unix://" + node_path


def into_root(root: Path, source: Path) -> Path:
    """A copy of ``source`` inside the node ``root`` (in its ``/srv/inputs``), its host path:
    under --root a file named on the command line (``--base``, ``--runtimeclass``, ``lint
    FILE``) is a file of the node, so a test's input file goes into the node first."""
    target = root / "srv" / "inputs" / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target
