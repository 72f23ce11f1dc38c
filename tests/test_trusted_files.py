"""gpuready's own files are checked as the ``--restart`` journal is, before it acts on them.

A record of what gpuready changed, a backup it restores, a CDI intent record it regenerates
from and the record of its systemd units are files on the node: gpuready, running as root,
restores, removes or regenerates what they say. One another user could have written (owned by
another uid, or writable by its group or by others), or one that is not a regular file, is
refused: exit 2, one line naming the file, its owner or mode and the fix, and no byte of the
node changed. A restore is also judged by the never-break gate, like any write: a backup that
would make another runtime the default, or change how the default runs, is refused.

The tests run as root (as gpuready does on a node): ``os.chown`` makes a file of uid 65534.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import driver_trees as trees
from tests.driver_trees import VERSION_A, VERSION_B
from tests.helpers import LAB_BASE, run_cli
from tests.test_cdi_refresh import install_program
from tests.test_cdi_staleness import cli, node_a

NOBODY = 65534
CONFIG = "etc/containerd/config.toml"
DAEMON = "etc/docker/daemon.json"


def listing(root: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every path under ``root``: its bytes (None for a folder or anything else), owner, mode."""
    found = {}
    for path in sorted(root.rglob("*")):
        status = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[str(path.relative_to(root))] = (data, status.st_uid, status.st_mode)
    return found


def containerd_node(root: Path) -> list[str]:
    """A node configured by ``configure`` (its record and backup beside the config)."""
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    done = run_cli("configure", "--root", str(root), "--containerd-version", "1.7")
    assert done.code == 0, done.err
    return ["unconfigure", "--root", str(root), "--containerd-version", "1.7"]


def docker_node(root: Path) -> list[str]:
    """Docker's daemon.json configured by ``configure --engine docker``."""
    (root / DAEMON).parent.mkdir(parents=True)
    (root / DAEMON).write_text('{\n  "log-driver": "journald"\n}\n')
    done = run_cli("configure", "--root", str(root), "--engine", "docker")
    assert done.code == 0, done.err
    return ["unconfigure", "--root", str(root), "--engine", "docker"]


def units_node(root: Path) -> list[str]:
    """A configured containerd node whose refresh units are installed: ``unconfigure`` would
    take back the config first, then the units."""
    node_a(root)
    install_program(root)
    assert cli("configure", "--root", str(root), "--containerd-version", "1.7")[0] == 0
    assert cli("cdi", "refresh", "--root", str(root), "--install-units")[0] == 0
    return ["unconfigure", "--root", str(root), "--containerd-version", "1.7"]


def intent_node(root: Path) -> list[str]:
    """A spec ``cdi generate`` wrote, gone stale: a refresh regenerates from its intent."""
    node_a(root)
    trees.upgrade_driver(root, VERSION_A, VERSION_B)
    return ["cdi", "refresh", "--root", str(root)]


# (what the file is, the node, the file, the command that acts on it)
CASES: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "record": (containerd_node, f"{CONFIG}.gpuready.json"),
    "backup": (containerd_node, f"{CONFIG}.gpuready.bak"),
    "Docker record": (docker_node, f"{DAEMON}.gpuready.json"),
    "Docker backup": (docker_node, f"{DAEMON}.gpuready.bak"),
    "units' record": (units_node,
                      "etc/systemd/system/gpuready-cdi-refresh.gpuready.json"),
    "CDI intent record": (intent_node, "etc/cdi/nvidia.yaml.gpuready.intent"),
}
WHAT = {"record": "gpuready record", "backup": "backup", "Docker record": "gpuready record",
        "Docker backup": "backup", "units' record": "gpuready record",
        "CDI intent record": "CDI intent record"}


def spoil(path: Path, how: str) -> str:
    """Make ``path`` a file gpuready must not trust; the words the refusal must say."""
    if how == "another owner":
        os.chown(path, NOBODY, NOBODY)
        return f"is owned by uid {NOBODY}, not by uid 0 that runs gpuready"
    if how == "world-writable":
        path.chmod(0o666)
        return "has mode 0666: its group and others may write it"
    if how == "group-writable":
        path.chmod(0o660)
        return "has mode 0660: its group may write it"
    text = path.read_bytes()
    path.unlink()
    os.mkfifo(path)
    del text
    return "is not a regular file"


@pytest.mark.parametrize("how", ["another owner", "world-writable"])
@pytest.mark.parametrize("kind", list(CASES))
def test_a_file_another_user_could_have_written_is_refused(tmp_path, kind, how):
    build, name = CASES[kind]
    root = tmp_path / "node"
    argv = build(root)
    path = root / name
    assert path.is_file(), f"the node has no {name}"
    said = spoil(path, how)
    before = listing(root)
    result = run_cli(*argv)
    assert result.code == 2, result.out + result.err
    [line] = result.err.splitlines()
    assert line.startswith(f"gpuready: error: {path}: the {WHAT[kind]} {said}"), line
    assert "refused, nothing touched" in line
    assert f"fix: if its content is yours, chown 0 {path} && chmod go-w {path}" in line
    assert listing(root) == before


@pytest.mark.parametrize("kind", ["record", "CDI intent record"])
def test_a_gpuready_file_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    build, name = CASES[kind]
    root = tmp_path / "node"
    argv = build(root)
    path = root / name
    spoil(path, "fifo")
    before = listing(root)
    result = run_cli(*argv)
    assert result.code == 2, result.out + result.err
    assert f"{path}: the {WHAT[kind]} is not a regular file" in result.err
    assert listing(root) == before


def test_configure_refuses_to_merge_into_a_record_it_cannot_trust(tmp_path):
    """``configure`` merges what it adds into the record already there: it reads it first."""
    root = tmp_path / "node"
    containerd_node(root)
    record = root / f"{CONFIG}.gpuready.json"
    spoil(record, "group-writable")
    before = listing(root)
    result = run_cli("configure", "--root", str(root), "--containerd-version", "1.7",
                     "--runtime-name", "second")
    assert result.code == 2 and "has mode 0660: its group may write it" in result.err
    assert listing(root) == before


def test_the_cdi_commands_that_write_the_intent_record_refuse_one_they_cannot_trust(tmp_path):
    """``cdi generate`` writes over the intent record, keeping its owner and mode: a record of
    another user would stay theirs. Refused; a reader (doctor) takes it as no record."""
    root = tmp_path / "node"
    node_a(root)
    intent = root / "etc/cdi/nvidia.yaml.gpuready.intent"
    spoil(intent, "another owner")
    before = listing(root)
    code, out, err = cli("cdi", "generate", "--root", str(root), "--no-nvml", "--force")
    assert code == 2 and f"{intent}: the CDI intent record is owned by uid {NOBODY}" in err
    assert listing(root) == before
    from gpuready.cdi.intent import load_intent
    from gpuready.node import Node

    assert load_intent(Node(root), root / "etc/cdi/nvidia.yaml") is None


def test_trusted_files_still_round_trip(tmp_path):
    """The same nodes with their files as gpuready wrote them: every command goes through."""
    for kind, (build, _) in CASES.items():
        root = tmp_path / kind.replace(" ", "-").replace("'", "")
        result = run_cli(*build(root))
        assert result.code == 0, (kind, result.out + result.err)


def test_a_group_writable_config_gets_a_backup_gpuready_trusts(tmp_path):
    """A config writable by its group (mode 0664) keeps its mode; its backup drops group and
    world write, so unconfigure trusts it and gives the original back byte for byte."""
    root = tmp_path / "node"
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    (root / CONFIG).chmod(0o664)
    assert run_cli("configure", "--root", str(root), "--containerd-version", "1.7").code == 0
    backup = root / (CONFIG + ".gpuready.bak")
    assert backup.stat().st_mode & 0o777 == 0o644
    assert (root / CONFIG).stat().st_mode & 0o777 == 0o664
    undone = run_cli("unconfigure", "--root", str(root), "--containerd-version", "1.7")
    assert undone.code == 0, undone.out + undone.err
    assert (root / CONFIG).read_bytes() == LAB_BASE.read_bytes()


# -- a restore goes through the never-break gate ---------------------------------------------------


def forge_backup(root: Path, path: str, text: str) -> None:
    """Put ``text`` in the backup of ``path`` and make the record name it as the original, both
    files root's own with mode 0644: only the gate stands between the backup and the node."""
    backup = root / f"{path}.gpuready.bak"
    backup.write_text(text)
    record_file = root / f"{path}.gpuready.json"
    record = json.loads(record_file.read_text())
    [entry] = [entry for name, entry in record["files"].items() if name == f"/{path}"]
    entry["original"] = hashlib.sha256(text.encode()).hexdigest()
    record_file.write_text(json.dumps(record))


EVIL_DEFAULT = LAB_BASE.read_text().replace('default_runtime_name = "runc"',
                                            'default_runtime_name = "evil"') + """
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.evil]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.evil.options]
  BinaryName = "/tmp/evil"
"""
EVIL_RUNC = LAB_BASE.read_text().replace(
    "SystemdCgroup = true", 'SystemdCgroup = true\n            BinaryName = "/tmp/evil"')


@pytest.mark.parametrize("text,said", [
    (EVIL_DEFAULT, "giving the file back would make 'evil' the default runtime instead of "
                   "'runc', and every pod would run through it: gpuready's record does not say "
                   "the node had it"),
    (EVIL_RUNC, "giving the file back would change how the default runtime 'runc' runs "
                "(options.BinaryName), for every pod on the node"),
])
def test_a_backup_that_changes_the_default_runtime_is_not_restored(tmp_path, text, said):
    root = tmp_path / "node"
    argv = containerd_node(root)
    forge_backup(root, CONFIG, text)
    before = listing(root)
    result = run_cli(*argv)
    assert result.code == 2, result.out + result.err
    assert said in result.err and "nothing written" in result.err, result.err
    assert listing(root) == before
    dry = run_cli(*argv, "--dry-run")  # the verdict a real run would meet
    assert dry.code == 2 and said in dry.err


def test_a_default_gpuready_changed_is_given_back(tmp_path):
    """What the record says gpuready changed still comes back: ``--set-as-default`` made
    nvidia the default; unconfigure makes runc the default again, byte for byte."""
    root = tmp_path / "node"
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    done = run_cli("configure", "--root", str(root), "--containerd-version", "1.7",
                   "--set-as-default", "--confirm-every-pod-uses-it")
    assert done.code == 0, done.err
    assert 'default_runtime_name = "nvidia"' in (root / CONFIG).read_text()
    result = run_cli("unconfigure", "--root", str(root), "--containerd-version", "1.7")
    assert result.code == 0, result.out + result.err
    assert (root / CONFIG).read_bytes() == LAB_BASE.read_bytes()


def test_a_docker_backup_that_changes_the_default_runtime_is_not_restored(tmp_path):
    root = tmp_path / "node"
    argv = docker_node(root)
    forge_backup(root, DAEMON, '{\n  "default-runtime": "evil",\n  "runtimes": {"evil": '
                               '{"path": "/tmp/evil"}}\n}\n')
    before = listing(root)
    result = run_cli(*argv)
    assert result.code == 2, result.out + result.err
    assert "the default runtime would change from 'runc' to 'evil'" in result.err
    assert listing(root) == before
