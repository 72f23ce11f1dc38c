"""A real dockerd (Debian's docker.io) started inside a temporary folder.

Data root, exec root, pid file, the API socket, the daemon's own containerd and its trust key all
live in the folder; ``--iptables=false --ip6tables=false --bridge=none`` leave the machine's
network alone and ``--storage-driver=vfs`` needs no overlay mounts (nested test machines often
refuse them). The daemon.json it reads is ``folder/daemon.json``: tests edit it with gpuready and
reload it with SIGHUP, as on a real machine. Everything is stopped by process id and the folder is
removed afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.harness.processes import remove_folder, terminate

START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0


def base_daemon_json(folder: Path) -> dict:
    """The keys every test daemon needs in its daemon.json (not flags, so gpuready edits a file
    that already holds the operator's keys): its trust key inside the folder, and a log option."""
    return {"deprecated-key-path": str(folder / "key.json"), "log-level": "info"}


class Dockerd:
    """One dockerd on ``folder/daemon.json``; ``remove()`` stops it and deletes the folder."""

    def __init__(self, folder: Path, *, daemon_json: str | None = None,
                 quiet: bool = False) -> None:
        self.folder = folder
        self.quiet = quiet  # its output to /dev/null: no log for anyone to read
        self.config_path = folder / "daemon.json"
        self.socket = folder / "d.sock"
        self.pidfile = folder / "dockerd.pid"
        self.log_path = folder / "dockerd.log"
        self.process: subprocess.Popen | None = None
        if daemon_json is None:
            daemon_json = json.dumps(base_daemon_json(folder), indent=2) + "\n"
        self.config_path.write_text(daemon_json)
        if len(str(folder / "exec" / "containerd" / "containerd.sock.ttrpc")) >= 108:
            raise ValueError(f"folder name too long for AF_UNIX sockets: {folder}")

    @property
    def address(self) -> str:
        """The ``unix://`` address of the Engine API."""
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int | None:
        """The daemon's process id while it runs."""
        return self.process.pid if self.process and self.process.poll() is None else None

    def log_text(self) -> str:
        """Everything the daemon logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> Dockerd:
        """Start dockerd and wait until its API answers (or fail with its log)."""
        binary = shutil.which("dockerd") or "/usr/sbin/dockerd"
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [binary, "--config-file", str(self.config_path),
             "--data-root", str(self.folder / "data"), "--exec-root", str(self.folder / "exec"),
             "--pidfile", str(self.pidfile), "-H", self.address,
             "--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs"],
            stdout=subprocess.DEVNULL if self.quiet else log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dockerd exited ({self.process.returncode}):\n"
                                   f"{self.log_text()}")
            if self.socket.exists() and ("API listen on" in self.log_text() or (
                    self.quiet and self._answers())):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"dockerd did not come up in {START_TIMEOUT:g}s:\n{self.log_text()}")

    def _answers(self) -> bool:
        """True when the API answers ``/_ping`` (how a quiet daemon is seen to be up)."""
        import socket

        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as client:
            client.settimeout(2.0)
            client.connect(str(self.socket))
            client.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b" 200 " in client.recv(64)
        return False

    def reloads(self) -> int:
        """How many SIGHUP reloads dockerd has logged so far."""
        return self.log_text().count("Got signal to reload configuration")

    def children(self) -> list[int]:
        """Processes started by this daemon (its containerd, shims) still running."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes()
                if str(self.folder).encode() in argv and int(entry.name) != os.getpid():
                    found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """SIGTERM dockerd (SIGKILL after a while), then whatever of its own is left, by pid."""
        terminate(self.process, timeout=STOP_TIMEOUT)
        terminate(None, timeout=STOP_TIMEOUT, leftovers=self.children())

    def remove(self) -> None:
        """Stop, unmount what the daemon left mounted in the folder, delete the folder."""
        self.stop()
        remove_folder(self.folder)
