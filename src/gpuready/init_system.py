"""Whether systemd runs on the node: the fact the cgroup verdict needs before any probe.

runc's systemd cgroup manager (``SystemdCgroup = true``) works only where systemd runs:
elsewhere every container fails with "systemd not running on this host, cannot use systemd
cgroups manager". runc asks as ``sd_booted()`` does: is ``/run/systemd/system`` a folder.

- On the machine gpuready runs on (root ``/``), that folder decides, as it does for runc; PID 1's
  name (``/proc/1/comm``) is said beside it. Where PID 1 is systemd but the folder is missing
  (gpuready sees another mount namespace than PID 1), the answer is unknown.
- Under ``--root DIR`` only what the root holds counts: its ``run/systemd/system``, its
  ``proc/1/comm``, and its init (``/sbin/init``, ``/usr/sbin/init``: a link to systemd, or to
  another init such as busybox or openrc-init). A root holding none of them (a sandbox) is
  unknown: never a reason to fault a config.

Reading costs a few ``lstat`` calls and one small read, all through the :class:`Node`.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.records import Record

SYSTEMD_RUNTIME_DIR = PurePosixPath("/run/systemd/system")
PID1_COMM = PurePosixPath("/proc/1/comm")
INIT_PATHS = (PurePosixPath("/sbin/init"), PurePosixPath("/usr/sbin/init"))
_COMM_LIMIT = 64  # the kernel's comm is at most 15 characters; a longer file is not one


class SystemdFact(Record):
    """Whether systemd runs on a node, and what showed it.

    ``running``: True (systemd runs), False (it does not), None (unknown: no evidence).
    ``evidence``: what was seen, for messages (empty when unknown for lack of evidence).
    """

    running: bool | None
    evidence: str = ""

    @property
    def absent(self) -> bool:
        """True when the node shows that systemd does not run."""
        return self.running is False


UNKNOWN = SystemdFact(None)


def systemd_fact(node: Node) -> SystemdFact:
    """Whether systemd runs on ``node`` (the live machine for root ``/``; else the root's own
    evidence only)."""
    runtime_dir = node.path(SYSTEMD_RUNTIME_DIR)
    if node.is_dir(runtime_dir):
        return SystemdFact(True, f"{runtime_dir} exists")
    comm = pid1_comm(node)
    pid1 = f"PID 1 is {comm!r} ({node.path(PID1_COMM)})" if comm else ""
    if node.is_host:
        if comm == "systemd":  # PID 1's /run is not the one gpuready sees
            return SystemdFact(None, f"{pid1}, but {runtime_dir} does not exist here")
        return SystemdFact(False, f"{runtime_dir} does not exist" + (f"; {pid1}" if pid1 else ""))
    if comm:
        if comm == "systemd":
            return SystemdFact(True, pid1)
        return SystemdFact(False, f"{pid1}; {runtime_dir} does not exist")
    return _from_init(node)


def pid1_comm(node: Node) -> str | None:
    """PID 1's command name on ``node`` (``/proc/1/comm``), None when it cannot be read."""
    path = node.path(PID1_COMM)
    try:
        if not node.exists(path):
            return None
        data = node.read_bytes(path, kind=FileKind.NODE_FACT)
    except (InputError, OSError):
        return None
    text = data.decode("utf-8", errors="replace").strip()
    name = text.splitlines()[0].strip() if text else ""
    if not name or len(name) > _COMM_LIMIT or not name.isprintable():
        return None
    return name


def _from_init(node: Node) -> SystemdFact:
    """What the root's init says: a link that ends at systemd, or at another init program.

    A regular file at ``/sbin/init`` (sysvinit, or a copy) says nothing gpuready can read
    without running it: unknown.
    """
    for init in INIT_PATHS:
        path = node.path_text(init)
        try:
            if not node.is_link(path) or not node.is_file(path):
                continue
            target = node.resolve(path)
        except (InputError, OSError):
            continue
        shown = node.node_path(target)
        if target.name == "systemd":
            return SystemdFact(True, f"{path} links to {shown}")
        return SystemdFact(False, f"{path} links to {shown}, not systemd; "
                                  f"{node.path(SYSTEMD_RUNTIME_DIR)} does not exist")
    return UNKNOWN
