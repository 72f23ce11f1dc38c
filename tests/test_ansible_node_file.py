"""``gpuready.node.node_file``, the collection's writer on the node: no link takes a write out of
the root (README, Safety).

Every write, new folder and removal the collection's action plugins make on a node goes through
this module. With the real ``ansible-playbook`` (a host whose modules run with a bare Python
3.9): a folder of the target that is a link to a folder outside the root, and a target that is
itself such a link, fail the task in one line and leave the outside folder byte for byte as it
was, while a link inside the root is still written through. Then the module's own code runs in a
child Python whose audit hook swaps a folder for a link before each of its path operations in
turn: 0 files outside the root each time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.ansible_support import fleet
from tests.helpers import REPO
from tests.link_flip import run_flipped
from tests.measure import tree_snapshot

MODULE = REPO / "ansible_collections" / "gpuready" / "node" / "plugins" / "modules" / "node_file.py"
OLD = b"version = 2\n# the node's own\n"
NEW = b"version = 2\n# gpuready's\n"


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _task(name: str, **args) -> str:
    lines = [f"    - name: {name}", "      ignore_errors: true", "      gpuready.node.node_file:",
             '        root: "{{ gpuready_root }}"']
    lines += [f"        {key}: {json.dumps(value)}" for key, value in args.items()]
    return "\n".join(lines)


def test_a_link_out_of_the_root_fails_the_task_and_nothing_outside_changes(tmp_path: Path):
    nodes = fleet(tmp_path / "fleet", ["node1"])
    root = nodes.root("node1")
    outside = tmp_path / "outside"
    # etc/containerd is a link to a folder outside the root, whose config.toml is a link too
    (outside / "containerd").mkdir(parents=True)
    (outside / "containerd" / "real.toml").write_bytes(OLD)
    (outside / "containerd" / "config.toml").symlink_to("real.toml")
    (outside / "crio.conf").write_bytes(OLD)
    (root / "etc" / "crio").mkdir(parents=True)
    (root / "etc" / "containerd").symlink_to(outside / "containerd")
    # the target itself a link out of the root
    (root / "etc" / "crio" / "crio.conf").symlink_to(outside / "crio.conf")
    # a link inside the root is written through, as the node's reads follow it
    (root / "etc" / "docker").mkdir()
    (root / "etc" / "docker" / "real.json").write_bytes(OLD)
    (root / "etc" / "docker" / "daemon.json").symlink_to("real.json")
    before = tree_snapshot(outside)
    tasks = [
        _task("replace", path="/etc/containerd/config.toml", content=encoded(NEW),
              checksum=sha1(OLD), backup=True),
        _task("create", path="/etc/containerd/conf.d/99-nvidia.toml", content=encoded(NEW),
              exclusive=True),
        _task("mkdir", path="/etc/containerd/conf.d", state="directory"),
        _task("remove", path="/etc/containerd/config.toml", state="absent",
              checksum=sha1(OLD)),
        _task("overwrite", path="/etc/crio/crio.conf", content=encoded(NEW)),
        _task("inside", path="/etc/docker/daemon.json", content=encoded(NEW),
              checksum=sha1(OLD), backup=True),
    ]
    playbook = nodes.playbook("write.yml", "- hosts: nodes\n  gather_facts: false\n  tasks:\n"
                              + "\n".join(tasks) + "\n")
    run = nodes.run(playbook)
    for name in ("replace", "create", "mkdir", "remove", "overwrite"):
        result = run.results(name)["node1"]
        assert result.get("failed"), f"{name}: {result}"
        message = result["msg"]
        assert "\n" not in message and "Traceback" not in message, message
        assert f"{root}/etc/" in message, message
        assert "outside the root" in message, message
    assert tree_snapshot(outside) == before
    inside = run.results("inside")["node1"]
    assert inside.get("changed") and not inside.get("failed"), inside
    assert (root / "etc" / "docker" / "daemon.json").is_symlink()
    assert (root / "etc" / "docker" / "real.json").read_bytes() == NEW
    assert (root / "etc" / "docker" / "real.json.gpuready.bak").read_bytes() == OLD


# -- a link swapped in before each path operation -----------------------------------------------

CONFIG = "etc/containerd/config.toml"
# each operation the action plugins ask of the module, and its task arguments
OPERATIONS = {
    "replace": dict(path="/" + CONFIG, content=encoded(NEW), checksum=sha1(OLD), backup=True),
    "create": dict(path="/etc/containerd/conf.d/99-nvidia.toml", content=encoded(NEW),
                   exclusive=True, mode="0644"),
    "mkdir": dict(path="/etc/containerd/conf.d/nested", state="directory"),
    "remove": dict(path="/" + CONFIG, state="absent", checksum=sha1(OLD)),
}


class Tree:
    """A fresh node for one run (its config and an empty ``conf.d``), and a copy of ``folder``
    outside the root that must stay as it is."""

    def __init__(self, base: Path, folder: str) -> None:
        if base.exists():
            shutil.rmtree(base)
        self.root = base / "root"
        (self.root / CONFIG).parent.mkdir(parents=True)
        (self.root / CONFIG).write_bytes(OLD)
        (self.root / "etc" / "containerd" / "conf.d").mkdir()
        self.folder = self.root / folder
        self.outside = base / "outside" / self.folder.name
        shutil.copytree(self.folder, self.outside, symlinks=True)
        self.before = tree_snapshot(self.outside.parent)

    def outside_changed(self) -> bool:
        """True when anything was written, created or removed outside the root."""
        return tree_snapshot(self.outside.parent) != self.before


def _run_module(tree: Tree, operation: str, at: int, folder: Path) -> dict:
    arguments = folder / "args.json"
    arguments.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(
        OPERATIONS[operation], root=str(tree.root))}))
    done = run_flipped([str(arguments)], runner=folder / "runner.py", root=tree.root,
                       folder=tree.folder, target=tree.outside, at=at,
                       count_file=folder / "count", script=MODULE)
    assert "Traceback" not in done.stderr, done.stderr
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(f"the module printed no JSON (exit {done.returncode}): {done.stdout}"
                    f"{done.stderr}")


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize("folder", ["etc/containerd", "etc"])
def test_a_link_swapped_in_before_any_path_operation_moves_nothing_out(
        tmp_path: Path, operation: str, folder: str) -> None:
    """Before each path operation of the module in turn, ``folder`` becomes a link to a copy
    outside the root: nothing outside changes, and a task that fails says why in one line."""
    work = tmp_path / "work"
    work.mkdir()
    result = _run_module(Tree(tmp_path / "node", folder), operation, 0, work)
    assert result.get("changed") and not result.get("failed"), result
    operations = int((work / "count").read_text())
    assert operations >= 2, "the hook saw no path operation"
    refused = []
    for at in range(1, operations + 1):
        tree = Tree(tmp_path / "node", folder)
        result = _run_module(tree, operation, at, work)
        what = f"{operation}, {folder} swapped before operation {at} of {operations}"
        assert not tree.outside_changed(), f"{what}: wrote outside the root ({result})"
        if result.get("failed"):
            message = result["msg"]
            assert "\n" not in message and str(tree.root) in message, f"{what}: {message}"
            refused.append(at)
    assert refused, f"{operation}: no run met the link it was given"

