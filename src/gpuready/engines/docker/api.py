"""A small client for the Docker Engine API over its unix socket (``http.client``, no SDK).

Only what gpuready needs: ``GET /info`` (runtimes, default runtime, cgroup driver, version),
importing a root file system as an image, and one throw-away container's life. Every call has a
timeout, and every failure to reach dockerd is a :class:`RuntimeUnreachableError` (exit 3).
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from gpuready.errors import GpureadyError, RuntimeUnreachableError

if TYPE_CHECKING:
    from gpuready.engines.docker.address import DockerAddress

API_VERSION = "v1.41"  # Docker 20.10's API; later daemons serve it too
MAX_RESPONSE = 16 * 1024 * 1024


class DockerApiError(GpureadyError):
    """dockerd answered a request with an error status."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"dockerd answered {status}: {message}")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, socket_path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def socket_of(address: str | DockerAddress) -> str:
    """The socket path of ``unix:///var/run/docker.sock`` (or of a bare path, or of a
    :class:`~gpuready.engines.docker.address.DockerAddress`)."""
    return getattr(address, "address", address).removeprefix("unix://")


class DockerApi:
    """The Engine API of the dockerd listening on ``address``."""

    def __init__(self, address: str | DockerAddress, *, timeout: float = 10.0) -> None:
        # address: "unix:///PATH", or a DockerAddress, whose origin errors then name
        text = getattr(address, "address", address)
        self.address = address.shown() if hasattr(address, "shown") else text
        self.socket_path = socket_of(text)
        self.timeout = timeout

    def request(self, method: str, path: str, *, query: dict | None = None,
                body: bytes | None = None, content_type: str = "application/json",
                timeout: float | None = None) -> Any:
        """One request; the decoded JSON answer (None for an empty one)."""
        return _decode(self._exchange(method, path, query=query, body=body,
                                      content_type=content_type, timeout=timeout))

    def _exchange(self, method: str, path: str, *, query: dict | None = None,
                  body: bytes | None = None, content_type: str = "application/json",
                  timeout: float | None = None) -> bytes:
        """One request; the answer's bytes (an error status raises :class:`DockerApiError`)."""
        url = f"/{API_VERSION}{path}" + (f"?{urlencode(query)}" if query else "")
        connection = _UnixConnection(self.socket_path, timeout or self.timeout)
        try:
            headers = {"Content-Type": content_type} if body is not None else {}
            connection.request(method, url, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read(MAX_RESPONSE)
        except (OSError, http.client.HTTPException) as error:
            raise RuntimeUnreachableError(
                f"{self.address}: cannot reach dockerd: {getattr(error, 'strerror', None) or error}"
            ) from None
        finally:
            connection.close()
        if response.status >= 400:
            raise DockerApiError(response.status, _error_message(raw))
        return raw

    def info(self) -> dict[str, Any]:
        """``GET /info``: what ``docker info`` shows."""
        answer = self.request("GET", "/info")
        if not isinstance(answer, dict) or "Runtimes" not in answer:
            raise RuntimeUnreachableError(f"{self.address}: the answer to /info is not dockerd's")
        return answer

    def events(self, *, since_ns: int, until_ns: int, filters: dict[str, list[str]]) -> list:
        """``GET /events`` between two times (nanoseconds since the epoch, on this machine's
        clock, which is dockerd's): the events already logged, each one decoded."""
        query = {"since": _timestamp(since_ns), "until": _timestamp(until_ns),
                 "filters": json.dumps(filters)}
        raw = self._exchange("GET", "/events", query=query)
        events = []
        for line in raw.splitlines():  # one JSON object per event
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events

    def import_image(self, archive: bytes, *, repo: str, tag: str) -> None:
        """``docker import``: a tar of a root file system becomes image ``repo:tag``."""
        self.request("POST", "/images/create", query={"fromSrc": "-", "repo": repo, "tag": tag},
                     body=archive, content_type="application/x-tar", timeout=60.0)

    def image_exists(self, name: str) -> bool:
        """True when dockerd has image ``name``."""
        try:
            self.request("GET", f"/images/{quote(name, safe='')}/json")
        except DockerApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    def remove_image(self, name: str) -> None:
        """Remove image ``name``."""
        self.request("DELETE", f"/images/{quote(name, safe='')}", query={"force": "1"})

    def create_container(self, spec: dict[str, Any], *, name: str) -> str:
        """Create a container; its id."""
        answer = self.request("POST", "/containers/create", query={"name": name},
                              body=json.dumps(spec).encode())
        return answer["Id"]

    def start_container(self, container_id: str) -> None:
        """Start a created container."""
        self.request("POST", f"/containers/{container_id}/start")

    def wait_container(self, container_id: str, *, timeout: float) -> dict[str, Any]:
        """Wait until the container stops; its exit status."""
        return self.request("POST", f"/containers/{container_id}/wait", timeout=timeout)

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        """``docker inspect`` of one container."""
        return self.request("GET", f"/containers/{container_id}/json")

    def remove_container(self, container_id: str) -> None:
        """Remove a container, stopping it first if it runs."""
        self.request("DELETE", f"/containers/{container_id}", query={"force": "1"})


def _timestamp(nanoseconds: int) -> str:
    """The Engine API's ``seconds.nanoseconds`` form of a time."""
    return f"{nanoseconds // 1_000_000_000}.{nanoseconds % 1_000_000_000:09d}"


def _decode(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        # /images/create streams one JSON object per line of progress
        lines = [json.loads(line) for line in raw.splitlines() if line.strip()]
        return lines[-1] if lines else None


def _error_message(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("message", raw[:200]))
    except (ValueError, AttributeError):
        return raw[:200].decode(errors="replace")
