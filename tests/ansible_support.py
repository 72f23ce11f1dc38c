"""Running the collection with the real ``ansible-playbook`` against local-connection hosts.

Each host is the machine itself (``ansible_connection=local``) with its own root folder, and runs
its modules with a Python 3.9 that has neither gpuready nor its libraries: the OS Python of a GPU
node, as far as the collection can tell.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import REPO, require

NODE_PYTHON_VERSION = "3.9"
# Modules a node does not have; the collection must work without them.
NOT_ON_NODES = ("gpuready", "tomlkit", "yaml")


def ansible_tool(name: str) -> str:
    """An ansible command line tool: the one installed beside this Python (a virtual
    environment's bin folder need not be on PATH), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    require(binaries=(name,))
    return shutil.which(name)


def node_python() -> str:
    """The interpreter the hosts run their modules with.

    ``GPUREADY_NODE_PYTHON`` (set by .ci/run), else the Python 3.9 that pyenv keeps. Outside CI a
    machine without one falls back to Debian's own python3, with a warning saying so; under
    CI=true that is a failure.
    """
    chosen = os.environ.get("GPUREADY_NODE_PYTHON") or _pyenv_python(NODE_PYTHON_VERSION)
    if chosen:
        return chosen
    reason = f"no Python {NODE_PYTHON_VERSION} found (pyenv root has none)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    fallback = shutil.which("python3", path="/usr/bin")
    if fallback is None:
        pytest.skip(reason)
    warnings.warn(f"{reason}: the hosts use {fallback} instead", stacklevel=2)
    return fallback


def _pyenv_python(version: str) -> str | None:
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
    versions = sorted(Path(root, "versions").glob(f"{version}.*")) if root else []
    candidates = [v / "bin" / f"python{version}" for v in versions]
    found = [str(c) for c in candidates if c.is_file()]
    return found[-1] if found else None


def importable(python: str, module: str) -> bool:
    """True when ``python`` can import ``module`` (run with a clean environment)."""
    result = subprocess.run([python, "-c", f"import {module}"], capture_output=True,
                            env={"PATH": os.environ["PATH"]})
    return result.returncode == 0


@dataclass
class Fleet:
    """An inventory of local hosts, each with its own root folder."""

    folder: Path
    hosts: list[str]
    python: str
    host_vars: dict[str, dict[str, str]] = field(default_factory=dict)

    def root(self, host: str) -> Path:
        """The host's root folder."""
        return self.folder / "nodes" / host

    def config(self, host: str) -> Path:
        """The host's containerd config."""
        return self.root(host) / "etc" / "containerd" / "config.toml"

    @property
    def inventory(self) -> Path:
        """The inventory file (written on first use)."""
        path = self.folder / "inventory.ini"
        if not path.exists():
            lines = ["[nodes]"]
            lines += [" ".join([f"{host} gpuready_root={self.root(host)}"] + [
                f"{name}={value}" for name, value in self.host_vars.get(host, {}).items()])
                for host in self.hosts]
            lines += ["", "[nodes:vars]", "ansible_connection=local",
                      f"ansible_python_interpreter={self.python}"]
            path.write_text("\n".join(lines) + "\n")
        return path

    def playbook(self, name: str, text: str) -> Path:
        """Write a playbook into the fleet's folder."""
        path = self.folder / name
        path.write_text(text)
        return path

    def run(self, playbook: Path, *args: str, forks: int = 4) -> PlaybookRun:
        """Run ``ansible-playbook`` with the JSON callback; its parsed result."""
        playbook_tool = ansible_tool("ansible-playbook")
        env = dict(os.environ)
        env.update(
            ANSIBLE_COLLECTIONS_PATH=str(REPO),
            ANSIBLE_STDOUT_CALLBACK="results_json",
            ANSIBLE_CALLBACK_PLUGINS=str(REPO / "tests" / "ansible" / "callback_plugins"),
            ANSIBLE_LOCAL_TEMP=str(self.folder / "ansible-local"),
            ANSIBLE_REMOTE_TMP=str(self.folder / "ansible-remote"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            ANSIBLE_PIPELINING="1",  # one process per module call, no file copies on the node
            ANSIBLE_FORKS=str(forks),
            # The controller's gpuready is this checkout's.
            PYTHONPATH=str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", ""),
        )
        env.pop("GPUREADY_DEBUG", None)
        result = subprocess.run(
            [playbook_tool, "-i", str(self.inventory), str(playbook), *args],
            capture_output=True, text=True, env=env, timeout=300,
        )
        try:
            document = json.loads(result.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"ansible-playbook printed no JSON (exit {result.returncode}):\n"
                        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return PlaybookRun(result.returncode, document, result.stderr)


@dataclass
class PlaybookRun:
    """What one ``ansible-playbook`` run reported."""

    code: int
    document: dict
    stderr: str

    @property
    def stats(self) -> dict:
        """The recap per host: ok, changed, failures, ..."""
        return self.document["stats"]

    def failures(self) -> dict[str, str]:
        """``task: host: message`` for every failed task, to show when a run should have passed."""
        return {
            f"{task}: {host}": result.get("msg", "")
            for task, hosts in self.document["tasks"].items()
            for host, result in hosts.items()
            if result.get("failed")
        }

    def results(self, task_name: str) -> dict[str, dict]:
        """Each host's result of the task named ``task_name``."""
        for name, hosts in self.document["tasks"].items():
            if name == task_name or name.endswith(f" : {task_name}"):  # a role's task
                return hosts
        raise AssertionError(f"no task {task_name!r} in the run")


def fleet(folder: Path, hosts: list[str], host_vars: dict | None = None) -> Fleet:
    """A fleet whose hosts run modules with a Python that has no gpuready and no libraries;
    ``host_vars`` become inventory variables of single hosts."""
    python = node_python()
    present = [module for module in NOT_ON_NODES if importable(python, module)]
    assert not present, f"{python} must not have {present}: it stands for a bare node"
    return Fleet(folder, hosts, python, host_vars or {})
