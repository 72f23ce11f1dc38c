"""Which process serves a unix socket, and which config file it was started with.

Read from ``/proc`` (Linux, and root to see other users' file descriptors). Used to say *which*
file a running containerd reads when what it loaded differs from the file on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuready.paths import CONTAINERD_CONFIG

_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix "Flags"


@dataclass(frozen=True)
class ServingProcess:
    """The process listening on a socket: its pid, command line, config file and start time."""

    pid: int
    argv: tuple[str, ...]
    config_path: Path
    started_at: float  # seconds since the epoch


def listening_inodes(socket: Path, *, proc: Path = Path("/proc")) -> set[str]:
    """Inodes of the listening unix sockets bound to ``socket``."""
    try:
        lines = (proc / "net" / "unix").read_text().splitlines()[1:]
    except OSError:
        return set()
    inodes = set()
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == str(socket) and int(fields[3], 16) & _LISTENING:
            inodes.add(fields[6])
    return inodes


def pid_holding(inodes: set[str], *, proc: Path = Path("/proc")) -> int | None:
    """The first process with an open file descriptor on one of the socket ``inodes``."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    return int(entry.name)
        except OSError:  # the process ended, or we may not look
            continue
    return None


def config_argument(argv: tuple[str, ...], cwd: Path) -> Path:
    """The ``--config``/``-c`` value of a containerd command line (its default when absent)."""
    for index, arg in enumerate(argv):
        if arg in ("--config", "-c") and index + 1 < len(argv):
            return cwd / argv[index + 1]
        for prefix in ("--config=", "-c="):
            if arg.startswith(prefix):
                return cwd / arg[len(prefix) :]
    return Path(CONTAINERD_CONFIG)


def start_time(pid: int, *, proc: Path = Path("/proc")) -> float:
    """When process ``pid`` started, in seconds since the epoch."""
    stat = (proc / str(pid) / "stat").read_text()
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after "(comm)"
    boot = next(
        int(line.split()[1])
        for line in (proc / "stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def serving_process(socket: Path, *, proc: Path = Path("/proc")) -> ServingProcess | None:
    """The process listening on ``socket``, or None where /proc cannot tell."""
    pid = pid_holding(listening_inodes(socket, proc=proc), proc=proc)
    if pid is None:
        return None
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
        cwd = Path(os.readlink(proc / str(pid) / "cwd"))
        started = start_time(pid, proc=proc)
    except (OSError, ValueError, StopIteration):
        return None
    argv = tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return ServingProcess(pid, argv, config_argument(argv, cwd), started)
