"""A real containerd that reads a node tree's files at their node paths, as on a node.

The daemon runs in a private mount namespace (``unshare --mount --propagation private``) in which
the tree's ``etc/containerd``, ``run/containerd`` and ``var/lib/containerd`` are bind-mounted over
``/etc/containerd``, ``/run/containerd`` and ``/var/lib/containerd``: it is started with
``--config /etc/containerd/config.toml`` and serves ``/run/containerd/containerd.sock``, which
the host side (gpuready with ``--root TREE``) reaches as the tree's
``run/containerd/containerd.sock``. The mounts exist only in that namespace (private
propagation): the host's own folders are never touched, and :meth:`NodeNamespace.start` checks
with ``findmnt`` that the host sees no new mount on them.

A holder process (``sleep``) keeps the namespace while no daemon runs; the restart command
enters it (``nsenter --mount=/proc/HOLDER/ns/mnt``) to stop the daemon and start a new one
there, as ``systemctl restart`` would on a node.

:class:`PidLog` counts the daemon's pid changes from outside: it samples the containerd
processes of the namespace (``/proc/PID/exe`` and ``/proc/PID/ns/mnt``), whoever restarted them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path, PurePosixPath

import tomlkit

from tests.harness.containerd import LAB_BASE
from tests.harness.restartable import RestartableContainerd

NODE_FOLDERS = ("/etc/containerd", "/run/containerd", "/var/lib/containerd")
NODE_CONFIG = "/etc/containerd/config.toml"
NODE_SOCKET = "/run/containerd/containerd.sock"
SAMPLE_S = 0.05  # a daemon lives at least its boot (about a second): none is missed


def node_config() -> str:
    """The lab base config at node paths (root, state and socket are containerd's defaults),
    with what containerd 1.6 would otherwise create outside them moved under
    ``/var/lib/containerd`` (the ``opt`` plugin's default is ``/opt/containerd``), and the
    OOM score kept as it is (a test machine refuses lowering it)."""
    document = tomlkit.parse(LAB_BASE.read_text())
    plugins = document["plugins"]
    plugins["io.containerd.internal.v1.opt"] = {"path": "/var/lib/containerd/opt"}
    plugins["io.containerd.grpc.v1.cri"]["restrict_oom_score_adj"] = True
    return tomlkit.dumps(document)


def mount_commands(root: Path, work: Path) -> list[str]:
    """The shell commands that put the tree's folders at their node paths in the namespace.

    A node folder this machine lacks (``/var/lib/containerd`` where containerd never ran) needs a
    mount point, and the test must not create one on the host: the nearest folder above it that
    exists gets an overlay whose upper layer lies in ``work``, so the new mount point is made in
    the namespace's view only (everything else in that folder stays visible)."""
    commands = []
    for number, folder in enumerate(NODE_FOLDERS):
        source = root / folder.lstrip("/")
        source.mkdir(parents=True, exist_ok=True)
        if not os.path.isdir(folder):
            above = next(str(parent) for parent in PurePosixPath(folder).parents
                         if os.path.isdir(parent))
            upper, scratch = work / f"overlay{number}/upper", work / f"overlay{number}/work"
            upper.mkdir(parents=True)
            scratch.mkdir(parents=True)
            options = f"lowerdir={above},upperdir={upper},workdir={scratch}"
            commands.append(f"mount -t overlay overlay -o {shlex.quote(options)} {above}")
            commands.append(f"mkdir -p {folder}")
        commands.append(f"mount --bind {shlex.quote(str(source))} {folder}")
    return commands


def host_mounts(targets) -> list[str]:
    """What the host (this process's namespace) has mounted at ``targets`` (``findmnt``)."""
    return [line for target in targets for line in _findmnt(target)]


def _findmnt(target: str, *, namespace_of: int | None = None) -> list[str]:
    """``TARGET SOURCE`` of each mount at ``target`` (in the mount namespace of the process
    ``namespace_of``)."""
    found = subprocess.run(
        ["findmnt", *(("-N", str(namespace_of)) if namespace_of else ()), "-rn", "-o",
         "TARGET,SOURCE", "--mountpoint", target], capture_output=True, text=True, check=False)
    return found.stdout.splitlines()


class NodeNamespace:
    """The private mount namespace in which the tree's folders are at their node paths."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root, self.work = root, work
        self.holder: subprocess.Popen | None = None

    def start(self) -> NodeNamespace:
        """Make the namespace and its mounts; fail when any mount shows on the host side."""
        targets = [*NODE_FOLDERS, *(str(p) for f in NODE_FOLDERS for p in PurePosixPath(f).parents
                                    if str(p) != "/")]
        before = [host_mounts([target]) for target in targets]
        script = " && ".join([*mount_commands(self.root, self.work), "echo ready",
                              "exec sleep infinity"])
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        if self.holder.stdout.readline().strip() != "ready":
            _, said = self.holder.communicate(timeout=10)
            raise RuntimeError(f"the node's mount namespace could not be made: {said}")
        leaked = [target for target, seen in zip(targets, before)
                  if host_mounts([target]) != seen]
        if leaked:
            self.stop()
            raise RuntimeError(f"a namespace mount shows on the host: {leaked}")
        return self

    @property
    def mnt(self) -> str:
        """The namespace's id (``mnt:[...]``)."""
        return os.readlink(f"/proc/{self.holder.pid}/ns/mnt")

    @property
    def enter(self) -> tuple[str, ...]:
        """The argv prefix that runs a command in the namespace."""
        return ("nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--")

    def mounts(self) -> dict[str, str]:
        """The namespace's mounts on the node folders: target -> source (``findmnt -N``)."""
        return dict(line.split(" ", 1) for folder in NODE_FOLDERS
                    for line in _findmnt(folder, namespace_of=self.holder.pid))

    def processes(self, name: str) -> list[int]:
        """The pids of the processes running the binary ``name`` in the namespace."""
        mnt, pids = self.mnt, []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if (os.path.basename(os.readlink(f"/proc/{entry.name}/exe")) == name
                        and os.readlink(f"/proc/{entry.name}/ns/mnt") == mnt):
                    pids.append(int(entry.name))
            except OSError:
                continue  # gone, or a kernel thread
        return pids

    def stop(self) -> None:
        """End the holder: the namespace and its mounts go with the last process in it."""
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=10)


class PidLog:
    """The daemon's pids in the order they appeared, sampled from a thread."""

    def __init__(self, namespace: NodeNamespace) -> None:
        self.namespace = namespace
        self.seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PidLog:
        """Sample until :meth:`stop`."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                for pid in self.namespace.processes("containerd"):
                    if pid not in self.seen:
                        self.seen.append(pid)
            self._stop.wait(SAMPLE_S)

    def changes(self) -> int:
        """How many times the daemon's pid changed since sampling began."""
        time.sleep(2 * SAMPLE_S)  # the latest sample is taken
        return max(len(self.seen) - 1, 0)

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(timeout=5)


class NamespacedContainerd(RestartableContainerd):
    """A restartable containerd in a :class:`NodeNamespace` of the tree ``root``: its config
    the tree's ``etc/containerd/config.toml``, its socket the tree's
    ``run/containerd/containerd.sock``; ``pids`` counts its pid changes."""

    def __init__(self, root: Path, folder: Path, *, binary: str = "containerd") -> None:
        self.namespace = NodeNamespace(root, folder).start()
        try:
            super().__init__(node_config(), folder, binary=binary,
                             config_path=root / NODE_CONFIG.lstrip("/"),
                             socket=root / NODE_SOCKET.lstrip("/"),
                             enter=self.namespace.enter, config_argument=NODE_CONFIG)
        except BaseException:
            self.namespace.stop()
            raise
        self.pids = PidLog(self.namespace).start()

    def shim_pids(self) -> list[int]:
        """The shims running in the namespace (their socket's node path is also the host's)."""
        return self.namespace.processes("containerd-shim-runc-v2")

    def remove(self) -> None:
        """Stop the daemon, its shims and the sampling, end the namespace, delete the folder."""
        try:
            self.pids.stop()
            self.stop()
        finally:
            self.namespace.stop()
            subprocess.run(["rm", "-rf", str(self.folder)], check=False)

