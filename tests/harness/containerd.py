"""A real containerd started on a generated config inside a temporary folder.

``root``, ``state``, the gRPC socket and the ``opt`` folder all live in the folder, so the daemon
touches nothing of the machine's own containerd. The folder name must stay short: unix socket
paths are limited to 108 bytes (AF_UNIX), and containerd adds ``.ttrpc`` to the gRPC socket path.
Everything started is stopped by process id: the daemon, and any shim that names its socket.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import tomlkit

from gpuready.containerd.versions import spec_for

DATA = Path(__file__).resolve().parent.parent / "data"
LAB_BASE = DATA / "containerd" / "lab-base.toml"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def short_tempdir() -> Path:
    """A fresh folder under /tmp with a short name (room for the socket path)."""
    return Path(tempfile.mkdtemp(prefix="gr-", dir="/tmp"))


def sandboxed(config_text: str, folder: Path) -> str:
    """``config_text`` with containerd's own paths moved into ``folder``, ready to start here.

    The CRI plugin gets ``restrict_oom_score_adj = true``: containerd's sandbox lowers
    oom_score_adj otherwise, which unprivileged or nested test machines refuse. ``imports`` are
    dropped (a release's default imports the machine's /etc/containerd/conf.d). In a version 4
    file the sockets are set on the server plugins, since containerd 2.3 ignores a top-level
    ``[grpc]`` there (it would serve the machine's default socket).
    """
    document = tomlkit.parse(config_text)
    document["root"] = str(folder / "root")
    document["state"] = str(folder / "state")
    document.pop("imports", None)
    plugins = document.setdefault("plugins", tomlkit.table())
    if document.get("version", 1) >= 4:
        for server, address in (("grpc", "c.sock"), ("ttrpc", "c.sock.ttrpc")):
            table = plugins.setdefault(f"io.containerd.server.v1.{server}", tomlkit.table())
            table["address"] = str(folder / address)
    else:
        document.setdefault("grpc", tomlkit.table())["address"] = str(folder / "c.sock")
    plugins["io.containerd.internal.v1.opt"] = {"path": str(folder / "opt")}
    plugins[spec_for(document.get("version", 1)).cri_plugin]["restrict_oom_score_adj"] = True
    return tomlkit.dumps(document)


def lab_config(
    folder: Path,
    *,
    runtimes: dict[str, dict] | None = None,
    sandbox_image: str | None = None,
    disabled_plugins: list[str] | None = None,
) -> str:
    """The lab base config with its paths moved into ``folder`` and ``runtimes`` added.

    ``runtimes`` maps a name to ``{"runtime_type": ..., "options": {...}}``.
    """
    document = tomlkit.parse(sandboxed(LAB_BASE.read_text(), folder))
    if disabled_plugins:
        document["disabled_plugins"] = disabled_plugins
    cri = document["plugins"][spec_for(document["version"]).cri_plugin]
    if sandbox_image:
        cri["sandbox_image"] = sandbox_image
    table = cri["containerd"]["runtimes"]
    for name, entry in (runtimes or {}).items():
        runtime = tomlkit.table()
        runtime["runtime_type"] = entry.get("runtime_type", "io.containerd.runc.v2")
        options = tomlkit.table()
        for key, value in entry.get("options", {}).items():
            options[key] = value
        runtime["options"] = options
        table[name] = runtime
    return tomlkit.dumps(document)


class Containerd:
    """One containerd process on a config in ``folder``; stop() ends it and its shims by pid.

    ``config_path`` and ``socket``: where the config is written and the socket appears, when
    not in ``folder`` (a node tree's own paths)."""

    def __init__(self, config_text: str, folder: Path, *, binary: str = "containerd",
                 config_path: Path | None = None, socket: Path | None = None) -> None:
        self.folder = folder
        self.config_path = config_path or folder / "config.toml"
        self.config_path.write_text(config_text)
        self.socket = socket or folder / "c.sock"
        self.log_path = folder / "containerd.log"
        self.binary = binary
        self.process: subprocess.Popen | None = None
        if len(str(self.socket)) + len(".ttrpc") >= 108:
            raise ValueError(f"socket path too long for AF_UNIX: {self.socket}")

    @property
    def address(self) -> str:
        """The ``unix://`` address of the CRI socket."""
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int | None:
        """The daemon's process id while it runs."""
        return self.process.pid if self.process else None

    def log_text(self) -> str:
        """Everything the daemon logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> Containerd:
        """Start the daemon and wait until its CRI answers (or fail with its log)."""
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [self.binary, "--config", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self._wait_for_socket()
        return self

    def _wait_for_socket(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"containerd exited ({self.process.returncode}):\n{self.log_text()}"
                )
            if self.socket.exists() and "containerd successfully booted" in self.log_text():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"containerd did not come up in {START_TIMEOUT:g}s:\n{self.log_text()}")

    def shim_pids(self) -> list[int]:
        """Shim processes serving this daemon (their command line names its socket)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and b"containerd-shim" in argv[0] and str(self.socket).encode() in argv:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        """SIGTERM the daemon (SIGKILL after a while), then any of its shims left behind."""
        from tests.harness.processes import terminate

        terminate(self.process, timeout=STOP_TIMEOUT)
        terminate(None, timeout=STOP_TIMEOUT, leftovers=self.shim_pids())

    def restart(self) -> Containerd:
        """Stop and start again on the same folder (and the config file as it is now)."""
        self.stop()
        return self.start()

    def remove(self) -> None:
        """Stop, then delete the folder (unmounting what containerd left mounted under it)."""
        from tests.harness.processes import remove_folder

        self.stop()
        remove_folder(self.folder)
