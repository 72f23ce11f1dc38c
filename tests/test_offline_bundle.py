"""The offline bundle (scripts/build_bundle.py) installs gpuready on an air-gapped node.

One target is built, Python 3.9 (RHEL 9's) on this machine's architecture, then installed with
the bundle's install.sh into a fresh virtual environment with every package index switched off,
and the installed ``gpuready`` sets up and lints a sandbox node. The build needs the package
registry and a Python 3.9 (GPUREADY_NODE_PYTHON, else pyenv's): without either the tests are
skipped, and under CI=true they fail.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "build_bundle.py"
EXIT_UNREACHABLE = 3  # build_bundle.py: the package registry could not be reached
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def unavailable(reason: str) -> None:
    """Fail under CI=true, skip elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.parent.name))


def find_node_python() -> str | None:
    """GPUREADY_NODE_PYTHON, else the newest pyenv Python 3.9."""
    configured = os.environ.get("GPUREADY_NODE_PYTHON")
    if configured:
        return configured
    roots = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        answer = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        if answer.returncode == 0 and answer.stdout.strip():
            roots.append(Path(answer.stdout.strip()))
    roots.append(Path.home() / ".pyenv")
    found = [path for root in roots for path in root.glob("versions/3.9*/bin/python3.9")]
    return str(max(found, key=_version_key)) if found else None


def node_environment(**extra: str) -> dict[str, str]:
    """The environment of an air-gapped node: no package index, no pip configuration."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PIP_")
        and name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "GPUREADY_DEBUG")
    }
    environment.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", **extra)
    return environment


@dataclass
class Installed:
    """A bundle built for one target and installed from it."""

    bundle: Path
    venv: Path
    python_version: tuple[int, int]
    install_output: str
    work: Path

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.venv / "bin" / program), *args],
            capture_output=True,
            text=True,
            cwd=self.work,  # not the project: nothing may come from its source tree
            env=node_environment(),
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    node_python = find_node_python()
    if not node_python:
        unavailable("needs a Python 3.9 for the node: set GPUREADY_NODE_PYTHON or install one "
                    "with pyenv")
    if not Path(node_python).exists():
        unavailable(f"the node's Python {node_python} (GPUREADY_NODE_PYTHON) does not exist")
    arch = ARCHES.get(platform.machine().lower())
    if arch is None:
        unavailable(f"the bundle has no wheels for this machine's {platform.machine()}")
    answer = subprocess.run(
        [node_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, check=True,
    )
    version = answer.stdout.strip()
    work = tmp_path_factory.mktemp("offline")
    bundle = work / "bundle"
    try:
        build = subprocess.run(
            [sys.executable, str(SCRIPT), "--python", version, "--platform", arch,
             "--out", str(bundle)],
            capture_output=True, text=True, timeout=600, check=False,
        )
    except subprocess.TimeoutExpired:
        unavailable("build_bundle.py: the package registry did not answer within 600 s")
    if build.returncode == EXIT_UNREACHABLE:
        unavailable(build.stderr.strip())
    assert build.returncode == 0, build.stdout + build.stderr

    venv = work / "node" / "opt" / "gpuready"
    install = subprocess.run(
        ["sh", str(bundle / "install.sh"), str(venv)],
        capture_output=True, text=True, cwd=work, timeout=300, check=False,
        env=node_environment(PYTHON=node_python),
    )
    assert install.returncode == 0, install.stdout + install.stderr
    major, minor = (int(part) for part in version.split("."))
    return Installed(bundle, venv, (major, minor), install.stdout + install.stderr, work)


def test_bundle_has_a_checksum_for_every_wheel(installed: Installed) -> None:
    """SHA256SUMS names every wheel in wheels/ with its right digest, and nothing else."""
    wheels = sorted(path.name for path in (installed.bundle / "wheels").glob("*.whl"))
    assert any(name.startswith("gpuready-") for name in wheels)
    listed = {}
    for line in (installed.bundle / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    assert sorted(listed) == [f"wheels/{name}" for name in wheels]
    for name, digest in listed.items():
        assert hashlib.sha256((installed.bundle / name).read_bytes()).hexdigest() == digest
    assert os.access(installed.bundle / "install.sh", os.X_OK)


def test_install_uses_the_bundle_only_and_says_where_gpuready_is(installed: Installed) -> None:
    """install.sh looks in no index and ends by naming the gpuready command."""
    assert "Looking in indexes" not in installed.install_output
    assert f"installed: {installed.venv}/bin/gpuready" in installed.install_output
    assert (installed.venv / "bin" / "gpuready").is_file()


def test_installed_gpuready_comes_from_the_virtual_environment(installed: Installed) -> None:
    """The node runs the bundled copy, not the project's source tree."""
    answer = installed.run("python", "-c", "import gpuready; print(gpuready.__file__)")
    assert answer.returncode == 0, answer.stderr
    location = Path(answer.stdout.strip()).resolve()
    assert str(location).startswith(str(installed.venv.resolve() / "lib")), location
    assert "site-packages" in location.parts
    assert REPO / "src" not in location.parents


def test_the_toml_parser_matches_the_node_python(installed: Installed) -> None:
    """tomli comes with the bundle where tomllib is missing (Python before 3.11)."""
    answer = installed.run("python", "-c", "import tomli; print(tomli.loads('a = 1'))")
    if installed.python_version < (3, 11):
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == "{'a': 1}"
    else:
        assert answer.returncode != 0  # tomllib is in the standard library there


def test_cri_modules_load_with_the_bundled_grpc_and_protobuf(installed: Installed) -> None:
    """The generated CRI modules accept the grpcio and protobuf the bundle resolved."""
    answer = installed.run(
        "python", "-c", "from gpuready.cri.generated import cri_runtime_v1_pb2_grpc"
    )
    assert answer.returncode == 0, answer.stderr


def test_installed_gpuready_sets_up_and_lints_a_node(installed: Installed) -> None:
    """gpuready setup writes the node's files and gpuready lint finds no error in the config."""
    root = installed.work / "sandbox"
    setup = installed.run("gpuready", "setup", "--root", str(root))
    assert setup.returncode == 0, setup.stdout + setup.stderr
    config = root / "etc" / "containerd" / "config.toml"
    for path in (
        config,
        root / "etc" / "cdi" / "nvidia.yaml",
        root / "root" / "toolkit" / "report.txt",
        root / "root" / "toolkit" / "runtimeclass.yaml",
    ):
        assert path.is_file(), path
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in config.read_text()
    lint = installed.run("gpuready", "lint", str(config))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "0 errors" in lint.stdout


def test_a_failed_build_ends_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    """With no index to build from, the script says why in one line and exits non-zero."""
    build = subprocess.run(
        [sys.executable, str(SCRIPT), "--python", "3.9", "--platform", "x86_64",
         "--out", str(tmp_path / "bundle")],
        capture_output=True, text=True, timeout=300, check=False,
        env=node_environment(),
    )
    assert build.returncode == 1, build.stdout + build.stderr
    assert "Traceback" not in build.stderr
    lines = build.stderr.strip().splitlines()
    assert len(lines) == 1, build.stderr
    assert lines[0].startswith("build_bundle.py: error: building gpuready's wheel: ")
