"""The CRI client against endpoints that are not a working CRI: always exit 3, never a traceback.

Each endpoint is real: a missing path, a regular file, a unix socket server that answers garbage,
one that never answers, and a gRPC server that serves no CRI service.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from gpuready.cri.client import CriClient
from gpuready.errors import ExitCode, RuntimeUnreachableError
from tests.cli_runner import run_cli
from tests.harness.containerd import short_tempdir


@pytest.fixture
def folder():
    path = short_tempdir()
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


class UnixServer:
    """A plain unix socket server: ``reply`` bytes then close, or (None) hold the line silently."""

    def __init__(self, path: Path, reply: bytes | None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.reply = reply
        self.stopping = threading.Event()
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            if self.reply is None:
                self.connections.append(conn)  # never answer
                continue
            with contextlib.suppress(OSError):
                conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(2)
        for conn in self.connections:
            conn.close()
        self.sock.close()


def verify_at(capsys, monkeypatch, address: str, tmp_path: Path, *extra: str):
    config = tmp_path / "config.toml"
    config.write_text("version = 2\n")
    return run_cli(
        capsys,
        monkeypatch,
        "verify",
        "--live",
        "--address",
        address,
        "--config",
        str(config),
        *extra,
    )


def assert_unreachable(result, *fragments: str) -> None:
    assert result.code == ExitCode.UNREACHABLE, result.out + result.err
    assert "Traceback" not in result.out + result.err
    assert result.err.count("\n") == 1  # one line
    for fragment in fragments:
        assert fragment in result.err


def test_missing_socket(capsys, monkeypatch, folder, tmp_path):
    result = verify_at(capsys, monkeypatch, f"unix://{folder}/none.sock", tmp_path)
    assert_unreachable(result, f"{folder}/none.sock: no such socket", "is containerd running?")


def test_regular_file_is_not_a_socket(capsys, monkeypatch, folder, tmp_path):
    (folder / "file.sock").write_text("")
    result = verify_at(capsys, monkeypatch, str(folder / "file.sock"), tmp_path)
    assert_unreachable(result, "not a unix socket")


def test_socket_speaking_garbage(capsys, monkeypatch, folder, tmp_path):
    server = UnixServer(folder / "g.sock", b"220 hello, this is not HTTP/2\r\n")
    try:
        result = verify_at(capsys, monkeypatch, f"unix://{folder}/g.sock", tmp_path)
    finally:
        server.close()
    assert_unreachable(result, "not a CRI endpoint", "is the CRI plugin disabled?")


def test_silent_socket_times_out(capsys, monkeypatch, folder, tmp_path):
    server = UnixServer(folder / "s.sock", None)
    try:
        result = verify_at(
            capsys, monkeypatch, f"unix://{folder}/s.sock", tmp_path, "--timeout", "1"
        )
    finally:
        server.close()
    assert_unreachable(result, "no answer to Version within 1s")


def test_grpc_server_without_cri(capsys, monkeypatch, folder, tmp_path):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_insecure_port(f"unix://{folder}/x.sock")
    server.start()
    try:
        result = verify_at(capsys, monkeypatch, f"unix://{folder}/x.sock", tmp_path)
    finally:
        server.stop(None)
    # something answers on the socket: a failed check (exit 1), not an unreachable runtime (3);
    # its config loads CRI by the model, so the daemon's own answer is the message
    assert result.code == ExitCode.CHECK_FAILED, result.err
    assert "not the CRI runtime.v1 Version call" in result.err
    assert "Traceback" not in result.err


def test_refused_connection(folder):
    # A socket file whose listener is gone: connecting is refused.
    path = folder / "r.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
    with (
        pytest.raises(RuntimeUnreachableError) as caught,
        CriClient(str(path), timeout=2) as client,
    ):
        client.version()
    assert "connection refused" in caught.value.message()
    assert caught.value.exit_code == ExitCode.UNREACHABLE


def test_other_scheme_is_refused():
    with pytest.raises(RuntimeUnreachableError, match="only unix sockets"):
        CriClient("tcp://127.0.0.1:1")
