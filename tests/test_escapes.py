"""A hostile generator: every path-valued input tries to climb out of a tmp root.

For each input (``--root`` itself, ``--config``, ``--base``, ``--drop-in``, ``--toolkit-dir``,
``--runtimeclass``, ``--inventory``, ``imports`` entries inside configs, the paths of
gpuready's record, symbolic links inside the root pointing out, absolute and relative), a
relative (``../../..``) and an absolute escape are tried against a sentinel folder beside the
root. No file of the sentinel may be read into the output or into the root, modified (bytes and
mtime), or get a neighbour (``.gpuready.bak``, ``.gpuready.json``, a journal); nothing is
written into the current directory.

A path the user names on the command line (``--config /elsewhere/x.toml``, ``--base``,
``--runtimeclass``, ``--inventory``) is the user's own and is read or written as named, by
design: for those only the *other* sentinel files are held to the rule. The fast part runs one
escape of each kind; ``--slow`` runs every input against every command.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, run_cli

MARK = "s3ntinel-c0ntent"  # in the sentinel files' contents only, never in a name
OLD = 1_000_000_000  # the sentinel files' mtime
CONFIG = "etc/containerd/config.toml"
BASE_TEXT = LAB_BASE.read_text()
SENTINEL_TOML = f"""\
version = 2
# {MARK}
[plugins."io.containerd.grpc.v1.cri"]
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "{MARK}"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{MARK}]
      runtime_type = "io.containerd.runc.v2"
"""
SENTINEL_RC = f"""\
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: {MARK}
handler: {MARK}
"""
SENTINEL_CDI = f"""\
cdiVersion: 0.6.0
kind: nvidia.com/gpu
devices:
- name: "{MARK}"
  containerEdits:
    deviceNodes:
    - path: /dev/{MARK}
"""
SENTINEL_FILES = {
    "host.toml": SENTINEL_TOML,
    "conf.d/extra.toml": SENTINEL_TOML,
    "runtimeclass.yaml": SENTINEL_RC,
    "nvidia.yaml": SENTINEL_CDI,
    "secret.txt": f"{MARK}\n",
    "kubelet/config.yaml": f"cgroupDriver: {MARK}\n",
}


@dataclass
class Lab:
    """A tmp folder: ``r/root`` the node, ``outside`` the sentinel, ``cwd`` the current folder."""

    top: Path

    @property
    def root(self) -> Path:
        return self.top / "r" / "root"

    @property
    def outside(self) -> Path:
        return self.top / "outside"

    @property
    def cwd(self) -> Path:
        return self.top / "cwd"

    @property
    def config(self) -> Path:
        return self.root / CONFIG

    def up(self, target: str, start: str = "etc/containerd") -> str:
        """A relative path from the node folder ``start`` to sentinel file ``target`` on the
        host (climbing just enough)."""
        return os.path.relpath(self.outside / target, self.root / start)

    def deep(self, target: str) -> str:
        """A relative path that climbs far past ``/`` and then names the sentinel absolutely."""
        return "../" * 40 + str(self.outside / target).lstrip("/")

    def absolute(self, target: str) -> str:
        return str(self.outside / target)


def make_lab(tmp_path: Path) -> Lab:
    lab = Lab(tmp_path)
    for name, text in SENTINEL_FILES.items():
        path = lab.outside / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (OLD, OLD))
    lab.config.parent.mkdir(parents=True)
    lab.config.write_text(BASE_TEXT)
    lab.cwd.mkdir()
    return lab


def sentinel_state(lab: Lab) -> dict[str, tuple[bytes, int]]:
    """Every path under the tmp folder but the root and the current folder: bytes and mtime
    (a folder: its listing); a new neighbour or a changed byte shows."""
    found = {}
    for path in sorted(lab.top.rglob("*")):
        if path == lab.root or lab.root in path.parents or path == lab.cwd:
            continue
        if path.is_symlink():
            found[str(path)] = (os.readlink(path).encode(), 0)
        elif path.is_file():
            found[str(path)] = (path.read_bytes(), path.stat().st_mtime_ns)
        else:
            found[str(path)] = (b"dir", 0)
    return found


def root_leaks(lab: Lab) -> list[str]:
    """Files under the root holding the sentinel's contents (a copied table, a spec)."""
    return [str(p) for p in lab.root.rglob("*")
            if p.is_file() and not p.is_symlink() and MARK.encode() in p.read_bytes()]


def run_and_check(lab: Lab, args: tuple[str, ...], *, own: tuple[Path, ...] = ()):
    """Run the command in ``lab.cwd``; assert nothing of the sentinel (but the user's ``own``
    named files) was read into the output or the root, changed, or got a neighbour."""
    before = sentinel_state(lab)
    result = run_cli(*args, cwd=lab.cwd)
    shown = f"{args}\nexit {result.code}\n{result.out}\n{result.err}"
    assert "internal error" not in result.err, shown
    after = sentinel_state(lab)
    mine = {str(p) for p in own}
    changed = sorted(k for k in set(before) | set(after)
                     if before.get(k) != after.get(k)
                     and k not in mine and not any(k.startswith(m + ".gpuready") for m in mine))
    assert changed == [], f"escaped: changed or created outside the root: {changed}\n{shown}"
    assert list(lab.cwd.iterdir()) == [], f"escaped into the current folder\n{shown}"
    if not own:
        assert MARK not in result.out + result.err, f"escaped: sentinel read\n{shown}"
        assert root_leaks(lab) == [], f"escaped: sentinel copied into the root\n{shown}"
    return result


# -- the inputs -----------------------------------------------------------------------------------


def with_import(lab: Lab, entry: str) -> None:
    lab.config.write_text(f"imports = [{json.dumps(entry)}]\n" + BASE_TEXT)


def with_link(lab: Lab, node_path: str, target: str) -> None:
    path = lab.root / node_path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


def with_record(lab: Lab, named: str) -> None:
    """A planted record naming ``named`` (a sentinel file) as written by gpuready."""
    data = (lab.outside / "secret.txt").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    record = {"format": 2, "config": "/" + CONFIG,
              "files": {named: {"original": None, "written": digest, "whole_file": True},
                        "/" + CONFIG: {"original": digest, "written": digest}},
              "settings": []}
    (lab.root / (CONFIG + ".gpuready.json")).write_text(json.dumps(record))


IMPORT_ESCAPES = {
    "relative": lambda lab: lab.up("host.toml"),
    "deep-relative": lambda lab: lab.deep("host.toml"),
    "absolute": lambda lab: lab.absolute("host.toml"),
    "relative-glob": lambda lab: lab.up("conf.d/*.toml"),
    "absolute-glob": lambda lab: lab.absolute("conf.d/*.toml"),
}

# commands run on a node root (the config found under it)
READERS = {
    "show-config": ("show-config", "--containerd-version", "1.7"),
    "lint": ("lint", "--containerd-version", "1.7"),
    "doctor": ("doctor", "--containerd-version", "1.7"),
    "check": ("check", "--containerd-version", "1.7"),
}
WRITERS = {
    "configure": ("configure", "--containerd-version", "1.7"),
    "configure-drop-in": ("configure", "--containerd-version", "1.7", "--drop-in"),
    "migrate": ("migrate", "--to", "3", "--containerd-version", "2.1"),
    "setup": ("setup", "--containerd-version", "1.7"),
    "unconfigure": ("unconfigure", "--containerd-version", "1.7"),
}
COMMANDS = {**READERS, **WRITERS}


def on_root(lab: Lab, name: str) -> tuple[str, ...]:
    command = COMMANDS[name]
    return (*command[:1], "--root", str(lab.root), *command[1:])


# -- the fast part: one escape of each kind ------------------------------------------------------


@pytest.mark.parametrize("kind", ["relative", "absolute"])
@pytest.mark.parametrize("command", ["show-config", "configure-drop-in", "migrate"])
def test_an_import_does_not_climb_out_of_the_root(tmp_path: Path, kind: str, command: str):
    lab = make_lab(tmp_path)
    with_import(lab, IMPORT_ESCAPES[kind](lab))
    run_and_check(lab, on_root(lab, command))


@pytest.mark.parametrize("kind", ["relative", "absolute"])
@pytest.mark.parametrize("command", ["show-config", "configure", "doctor"])
def test_a_linked_config_does_not_lead_out_of_the_root(tmp_path: Path, kind: str, command: str):
    lab = make_lab(tmp_path)
    target = lab.up("host.toml") if kind == "relative" else lab.absolute("host.toml")
    with_link(lab, CONFIG, target)
    run_and_check(lab, on_root(lab, command))


@pytest.mark.parametrize("named", ["host", "relative", "node-relative"])
def test_a_record_naming_a_file_outside_is_refused(tmp_path: Path, named: str):
    lab = make_lab(tmp_path)
    path = {"host": lab.absolute("secret.txt"), "relative": lab.up("secret.txt", ""),
            "node-relative": "../../../../outside/secret.txt"}[named]
    with_record(lab, path)
    run_and_check(lab, on_root(lab, "unconfigure"))


@pytest.mark.parametrize("toolkit", ["rel/tk", "../../../outside/tk", "ABS"])
def test_the_toolkit_folder_stays_inside_the_root(tmp_path: Path, toolkit: str):
    lab = make_lab(tmp_path)
    if toolkit == "ABS":
        toolkit = str(lab.outside / "tk")
    run_and_check(lab, (*on_root(lab, "setup"), "--toolkit-dir", toolkit))
    assert not (lab.outside / "tk").exists()


def test_a_linked_toolkit_folder_is_not_written_through(tmp_path: Path):
    lab = make_lab(tmp_path)
    with_link(lab, "root/toolkit", str(lab.outside))
    run_and_check(lab, on_root(lab, "setup"))


@pytest.mark.parametrize("drop_in", ["REL", "ABS"])
def test_a_drop_in_path_is_a_node_path(tmp_path: Path, drop_in: str):
    lab = make_lab(tmp_path)
    path = (lab.up("conf.d/new.toml", "") if drop_in == "REL"
            else lab.absolute("conf.d/new.toml"))
    if drop_in == "REL":
        path = "/" + path  # a node path that climbs: ``..`` stops at the root
    run_and_check(lab, (*on_root(lab, "configure"), "--drop-in", path))


def test_a_named_config_outside_the_root_is_used_as_named_and_nothing_else(tmp_path: Path):
    lab = make_lab(tmp_path)
    named = lab.outside / "named.toml"
    named.write_text(f"imports = [{json.dumps(lab.deep('host.toml'))}]\n" + BASE_TEXT)
    run_and_check(lab, ("configure", "--root", str(lab.root), "--config", str(named),
                        "--containerd-version", "1.7"), own=(named,))


def test_a_named_base_is_read_as_named_and_its_imports_stay_in_the_root(tmp_path: Path):
    lab = make_lab(tmp_path)
    base = lab.outside / "base.toml"
    base.write_text(f"imports = [{json.dumps(lab.up('host.toml'))}]\n" + BASE_TEXT)
    lab.config.unlink()
    run_and_check(lab, (*on_root(lab, "setup"), "--base", str(base)), own=(base,))
    # refused (the import names no file inside the root) or written without the sentinel
    assert not lab.config.exists() or MARK not in lab.config.read_text()


def test_a_linked_runtimeclass_and_cdi_spec_are_not_read(tmp_path: Path):
    lab = make_lab(tmp_path)
    with_link(lab, "etc/cdi/nvidia.yaml", lab.up("nvidia.yaml", "etc/cdi"))
    with_link(lab, "root/toolkit/runtimeclass.yaml", lab.absolute("runtimeclass.yaml"))
    run_and_check(lab, on_root(lab, "doctor"))
    run_and_check(lab, ("cdi", "list", "--root", str(lab.root)))


# -- the sweep: every input, every command (--slow) -----------------------------------------------


LINKED = {  # node paths gpuready reads or writes, linked out of the root
    "config": (CONFIG, "host.toml"),
    "containerd-folder": ("etc/containerd", "conf.d"),
    "cdi-spec": ("etc/cdi/nvidia.yaml", "nvidia.yaml"),
    "cdi-folder": ("etc/cdi", "conf.d"),
    "toolkit": ("root/toolkit", "conf.d"),
    "runtimeclass": ("root/toolkit/runtimeclass.yaml", "runtimeclass.yaml"),
    "kubelet": ("var/lib/kubelet/config.yaml", "kubelet/config.yaml"),
    "backup": (CONFIG + ".gpuready.bak", "secret.txt"),
    "record": (CONFIG + ".gpuready.json", "secret.txt"),
    "drop-in": ("etc/containerd/conf.d/99-nvidia.toml", "conf.d/extra.toml"),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(IMPORT_ESCAPES))
def test_sweep_imports(tmp_path: Path, kind: str, command: str):
    lab = make_lab(tmp_path)
    with_import(lab, IMPORT_ESCAPES[kind](lab))
    run_and_check(lab, on_root(lab, command))


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("how", ["relative", "absolute"])
@pytest.mark.parametrize("linked", sorted(LINKED))
def test_sweep_links(tmp_path: Path, linked: str, how: str, command: str):
    lab = make_lab(tmp_path)
    node_path, target = LINKED[linked]
    if (lab.root / node_path).is_dir() and not (lab.root / node_path).is_symlink():
        for child in (lab.root / node_path).iterdir():
            child.unlink()
        (lab.root / node_path).rmdir()
    start = str(Path(node_path).parent)
    with_link(lab, node_path, lab.up(target, start) if how == "relative"
              else lab.absolute(target))
    if linked == "drop-in":
        lab.config.write_text('imports = ["/etc/containerd/conf.d/*.toml"]\n' + BASE_TEXT)
    run_and_check(lab, on_root(lab, command))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["unconfigure", "configure", "setup", "migrate"])
@pytest.mark.parametrize("named", ["host", "relative", "node-climb", "deep"])
def test_sweep_records(tmp_path: Path, named: str, command: str):
    lab = make_lab(tmp_path)
    path = {"host": lab.absolute("secret.txt"), "relative": lab.up("secret.txt", ""),
            "node-climb": "/../../../../outside/secret.txt",
            "deep": "/" + lab.deep("secret.txt")}[named]
    with_record(lab, path)
    run_and_check(lab, on_root(lab, command))


@pytest.mark.slow
@pytest.mark.parametrize(("option", "command"), [
    ("--toolkit-dir", "setup"), ("--toolkit-dir", "check"), ("--drop-in", "configure"),
    ("--config", "show-config"), ("--config", "lint"),
])
@pytest.mark.parametrize("value", ["rel", "climb", "deep", "node-climb"])
def test_sweep_path_options(tmp_path: Path, option: str, command: str, value: str):
    """Relative option values: a node path under --root, never a host path from the cwd."""
    lab = make_lab(tmp_path)
    text = {"rel": "outside/x", "climb": "../outside/x", "deep": lab.deep("x"),
            "node-climb": "/../../../../outside/x"}[value]
    if option == "--config":
        if value in ("rel", "climb", "deep"):  # from the cwd, outside the root: refused
            pytest.skip("a --config relative to a cwd outside the root is refused (exit 2)")
        (lab.outside / "x").write_text(SENTINEL_TOML)
        os.utime(lab.outside / "x", (OLD, OLD))
    run_and_check(lab, (*on_root(lab, command), option, text))


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["relative", "absolute", "deep"])
def test_sweep_inventory_paths(tmp_path: Path, entry: str):
    """An inventory named on the command line is read as named; the paths inside it are node
    paths: no sentinel file is read or linked into the spec's output."""
    lab = make_lab(tmp_path)
    target = {"relative": lab.up("secret.txt", ""), "absolute": lab.absolute("secret.txt"),
              "deep": lab.deep("secret.txt")}[entry]
    inventory = lab.outside / "inventory.json"
    inventory.write_text(json.dumps({"gpus": [{"index": 0, "uuid": "GPU-0", "minor": 0}],
                                     "libraries": [target], "devices": [target]}))
    run_and_check(lab, ("cdi", "generate", "--root", str(lab.root), "--inventory",
                        str(inventory), "--output", "/etc/cdi/nvidia.yaml"), own=(inventory,))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_sweep_runtimeclass_option_and_doctor_config(tmp_path: Path, how: str):
    lab = make_lab(tmp_path)
    named = lab.outside / "runtimeclass.yaml"
    with_import(lab, lab.up("host.toml") if how == "relative" else lab.absolute("host.toml"))
    run_and_check(lab, ("doctor", "--root", str(lab.root), "--containerd-version", "1.7",
                        "--runtimeclass", str(named)), own=(named,))


def test_the_detector_sees_a_write_outside(tmp_path: Path):
    """The harness itself: a config outside the root, written by a run on the machine itself
    (no --root) and not declared the user's own, is reported as changed (so a silent pass above
    means nothing escaped). Under --root the same --config names the root's file."""
    lab = make_lab(tmp_path)
    named = lab.outside / "named.toml"
    named.write_text(BASE_TEXT)
    with pytest.raises(AssertionError, match="escaped: changed or created outside the root"):
        run_and_check(lab, ("configure", "--config", str(named), "--containerd-version", "1.7"))
