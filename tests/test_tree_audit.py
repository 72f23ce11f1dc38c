"""Under ``--root`` gpuready touches nothing of the machine it runs on.

Each command runs in a child Python with an audit hook (``sys.addaudithook``: every ``open``,
directory listing, process start and ``exec``) and ``os.stat``/``os.lstat`` wrapped (stat has
no audit event; ``os.path`` and ``pathlib`` call them), logging every path it names. Outside the
root only the interpreter, its libraries, gpuready's own code, ``/proc/self`` and ``/dev/null``
may appear; no process may start but this run's own ``--restart-command``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, REPO

WRAPPER = r"""
import json, os, sys
log = open(sys.argv[1], "w")
seen = set()

def note(kind, path):
    if isinstance(path, int) or path is None:
        return
    path = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    key = (kind, path)
    if key not in seen:
        seen.add(key)
        log.write(json.dumps(key) + "\n")
        log.flush()

PATHS = {"open": 0, "os.listdir": 0, "os.scandir": 0, "os.chdir": 0, "os.mkdir": 0,
         "os.remove": 0, "os.rename": 0, "os.unlink": 0, "os.rmdir": 0, "shutil.copyfile": 0}
STARTS = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.fork")

def hook(event, args):
    if event in PATHS and args:
        note(event, args[0])
    elif event in STARTS:
        note("start", repr(args)[:200])

class Wrapped:
    # an instance, not a function: code that keeps os.stat as a class attribute still calls it
    # unbound, as the builtin it replaces
    def __init__(self, name):
        self.name, self.real = name, getattr(os, name)
    def __call__(self, path, *a, **k):
        note("os." + self.name, path)
        return self.real(path, *a, **k)

for name in ("stat", "lstat"):
    setattr(os, name, Wrapped(name))
sys.addaudithook(hook)
sys.argv = ["gpuready", *sys.argv[2:]]
from gpuready.cli.main import entrypoint
entrypoint()
"""


def allowed_prefixes() -> tuple[str, ...]:
    """Where the interpreter, its libraries and gpuready's code live, and /proc/self."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              str(REPO / "src"), "/proc/self", "/dev/null", "/dev/urandom",
              *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib",
                                                       "platlib"))}
    places |= {os.path.realpath(place) for place in list(places)}
    return tuple(sorted(places))


def touched(tmp_path: Path, root: Path, *argv: str) -> tuple[int, list[tuple[str, str]]]:
    """Run gpuready ``argv`` under the hooks: its exit code and each path it named outside
    ``root`` and the allowed places (and each process it started)."""
    log = tmp_path / "audit.log"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GPUREADY_LOCK_WAIT="5")
    env.pop("CONTAINERD_ADDRESS", None)
    result = subprocess.run([sys.executable, "-c", WRAPPER, str(log), *argv], env=env,
                            capture_output=True, text=True, timeout=120, cwd=root)
    assert "internal error" not in result.stderr, result.stderr
    allowed = allowed_prefixes()
    outside = []
    for line in log.read_text().splitlines():
        kind, path = json.loads(line)
        if kind == "start":
            outside.append((kind, path))
            continue
        absolute = os.path.abspath(os.path.join(root, path))
        if absolute == str(root) or absolute.startswith(str(root) + os.sep):
            continue
        if any(absolute == place or absolute.startswith(place.rstrip("/") + "/")
               for place in allowed):
            continue
        if kind.startswith("os.") and kind.endswith("stat") and any(
                (place + "/").startswith(absolute.rstrip("/") + "/")
                for place in (str(root), *allowed)):
            continue  # a folder above the root or the interpreter: resolving their own path
        outside.append((kind, absolute))
    return result.returncode, outside


def node(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    (root / "etc" / "containerd").mkdir(parents=True)
    (root / "etc" / "containerd" / "config.toml").write_text(LAB_BASE.read_text())
    (root / "etc" / "docker").mkdir()
    (root / "etc" / "docker" / "daemon.json").write_text("{}\n")
    (root / "etc" / "crio").mkdir()
    (root / "etc" / "crio" / "crio.conf").write_text("[crio.runtime]\n")
    return root


RESTART = "exit 0  # the operator's restart"  # the one process a run may start: its own command
COMMANDS = [
    ("setup", "--gpus", "1"),
    ("configure",),
    ("configure", "--drop-in"),
    ("unconfigure",),
    ("configure", "--dry-run", "--config", "/etc/containerd/config.toml"),
    ("show-config",),
    ("lint",),
    ("lint", "--fix"),
    ("doctor",),
    ("check",),
    ("migrate", "--to", "3", "--dry-run"),
    ("cdi", "generate", "--gpus", "1"),
    ("cdi", "refresh", "--gpus", "1"),
    ("cdi", "validate"),
    ("cdi", "list"),
    ("verify", "--live", "--timeout", "1"),
    ("configure", "--restart", "--restart-command", RESTART, "--restart-timeout", "1"),
    ("configure", "--engine", "docker"),
    ("lint", "--engine", "docker"),
    ("configure", "--engine", "crio"),
    ("doctor", "--engine", "crio"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_under_a_root_touches_nothing_of_this_machine(tmp_path, command):
    root = node(tmp_path)
    if command[0] == "unconfigure":  # something to take back
        subprocess.run([sys.executable, "-m", "gpuready", "configure", "--root", str(root)],
                       env=dict(os.environ, PYTHONPATH=str(REPO / "src")), check=True,
                       capture_output=True)
    line = () if command[0] in ("cdi", "migrate") or "--engine" in command else (
        "--containerd-version", "1.7")
    if command[0] == "migrate":
        line = ("--containerd-version", "2.1")
    if command[0] == "cdi":
        argv = (*command[:2], "--root", str(root), *command[2:])
    else:
        argv = (*command, "--root", str(root), *line)
    code, outside = touched(tmp_path, root, *argv)
    assert code in (0, 1, 3), (code, outside)
    if RESTART in command:  # started twice: on the change, then on the original (no CRI here)
        starts = [path for kind, path in outside if kind == "start"]
        assert starts and all(RESTART in start for start in starts), starts
        outside = [(kind, path) for kind, path in outside if kind != "start"]
    assert outside == [], f"{' '.join(command)} touched this machine: {outside[:12]}"
