"""The collection as Ansible reads it: ``ansible-doc`` for every module and the role, a build.

Each module's documented options must be exactly the options its action plugin accepts (the
shared argument spec), with the same types, defaults and choices.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile

import pytest

from tests.ansible_support import ansible_tool
from tests.helpers import REPO

COLLECTION = REPO / "ansible_collections" / "gpuready" / "node"
MODULES = ("containerd_runtime", "cri_call", "gpuready_facts", "gpuready_setup", "node_file")
# The modules whose work an action plugin does on the controller (cri_call and node_file run on
# the node).
ACTIONS = ("containerd_runtime", "gpuready_facts", "gpuready_setup")


def ansible(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """Run an ansible command line tool with this checkout's collection on the path."""
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([ansible_tool(args[0]), *args[1:]], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def docs() -> dict:
    """``ansible-doc --json`` of every module."""
    result = ansible("ansible-doc", "--json", *(f"gpuready.node.{m}" for m in MODULES))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("module", MODULES)
def test_documented_options_are_the_accepted_ones(docs, module):
    from ansible_collections.gpuready.node.plugins.module_utils import specs

    spec = getattr(specs, f"{module.upper()}_SPEC")
    documented = docs[f"gpuready.node.{module}"]["doc"]["options"]
    assert set(documented) == set(spec)
    for name, option in spec.items():
        assert documented[name]["type"] == option["type"], name
        assert documented[name].get("default") == option.get("default"), name
        assert documented[name].get("choices") == option.get("choices"), name
    entry = docs[f"gpuready.node.{module}"]
    assert entry["examples"].strip() and entry["return"], module


def test_role_arguments_are_documented():
    result = ansible("ansible-doc", "-t", "role", "--json", "gpuready.node.contract")
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout)["gpuready.node.contract"]["entry_points"]["main"]
    defaults = (COLLECTION / "roles" / "contract" / "defaults" / "main.yml").read_text()
    for name in options["options"]:
        assert f"\n{name}:" in defaults, name


def test_collection_builds(tmp_path):
    result = ansible("ansible-galaxy", "collection", "build", str(COLLECTION),
                     "--output-path", str(tmp_path))
    assert result.returncode == 0, result.stderr
    with tarfile.open(tmp_path / "gpuready-node-0.1.0.tar.gz") as archive:
        names = set(archive.getnames())
    for module in MODULES:
        assert f"plugins/modules/{module}.py" in names
    for module in ACTIONS:
        assert f"plugins/action/{module}.py" in names
    assert "roles/contract/tasks/main.yml" in names
