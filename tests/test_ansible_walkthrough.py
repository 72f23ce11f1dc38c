"""The Ansible walkthrough (docs/ansible.md), run as printed: the collection against
``localhost`` on a sandbox root, with the real ``ansible-playbook`` (``-i localhost, -c local``)
and the machine's own ``/usr/bin/python3`` for the modules.

Its steps run from the checkout (``ANSIBLE_COLLECTIONS_PATH=.``); ``/tmp/gpuready-node``
becomes a folder of the test's, and ``.venv/bin/ansible-playbook`` the one beside this Python.
How a page's blocks are found and compared: tests/test_readme_walkthroughs.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.ansible_support import ansible_tool
from tests.helpers import LAB_BASE, REPO, require
from tests.test_readme_walkthroughs import gpuready_on_path, run_steps, walkthrough

ANSIBLE_WALKTHROUGH = "## Try it: one host, `localhost`, on a sandbox root"
SHOWN_ROOT = "/tmp/gpuready-node"
SHOWN_PLAYBOOK_TOOL = ".venv/bin/ansible-playbook"
NODE_PYTHON = Path("/usr/bin/python3")


def test_ansible_walkthrough_registers_then_takes_back_on_a_sandbox_root(tmp_path: Path) -> None:
    require(files=(NODE_PYTHON,))
    steps = walkthrough(ANSIBLE_WALKTHROUGH)
    commands = [step.script for step in steps]
    runs = [command for command in commands if "ansible-playbook" in command]
    assert len(runs) == 3 and all(" -i localhost, -c local " in run for run in runs)
    assert runs[2].endswith("-e state=absent")
    assert f"root: {SHOWN_ROOT}\n" in commands[0]  # the module writes under the sandbox root

    root = tmp_path / "gpuready-node"
    env = gpuready_on_path(tmp_path / "bin")
    env.update(ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
               ANSIBLE_REMOTE_TMP=str(tmp_path / "ansible-remote"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    for name in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CONFIG",
                 "ANSIBLE_COLLECTIONS_PATH"):
        env.pop(name, None)
    paths = {SHOWN_ROOT: str(root), SHOWN_PLAYBOOK_TOOL: ansible_tool("ansible-playbook")}
    run_steps(steps, paths=paths, cwd=REPO, env=env)

    # what the reader is told holds: the original config back byte for byte, nothing left
    config = root / "etc" / "containerd" / "config.toml"
    assert config.read_bytes() == LAB_BASE.read_bytes()
    assert sorted(path.name for path in config.parent.iterdir()) == ["config.toml"]
    assert sorted(path.name for path in root.iterdir()) == ["etc"]  # only under the root
