"""A small CRI ``runtime.v1`` client: the calls gpuready needs, each with a timeout.

Every failure to reach the runtime (socket missing, refused, silent, or not serving the CRI)
becomes :class:`~gpuready.errors.RuntimeUnreachableError` (exit 3) with one readable line. A call
the runtime answers with an error (an unknown handler, a failed sandbox) is :class:`CriCallError`,
which callers such as the probe turn into a result.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# gRPC's fork handlers pause its threads around every fork(); gpuready forks only to exec (ctr,
# systemctl) and never uses a channel in a child. Before Python 3.10, subprocess forks with fork()
# rather than vfork(), so the handlers run and can deadlock the fork while a channel is open (a
# probe that runs 'ctr images import' hung on Python 3.9 with grpcio 1.80). An operator's own
# setting wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

import grpc  # noqa: E402  (after the fork setting, which gRPC reads when it loads)

from gpuready.cri.generated import cri_runtime_v1_pb2 as api
from gpuready.cri.generated import cri_runtime_v1_pb2_grpc as api_grpc
from gpuready.errors import CriNotLoadedError, GpureadyError, RuntimeUnreachableError
from gpuready.paths import CONTAINERD_SOCKET

DEFAULT_ADDRESS = f"unix://{CONTAINERD_SOCKET}"
DEFAULT_TIMEOUT = 10.0
# RunPodSandbox may pull the pause image first; give it longer than a status call.
RUN_SANDBOX_TIMEOUT = 120.0

HINT = "is containerd running? is the CRI plugin disabled?"

# The gRPC codes that mean "nobody answered as a CRI runtime", not "the runtime said no".
_UNREACHABLE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNIMPLEMENTED,
}


class CriCallError(GpureadyError):
    """The runtime answered a call with an error; ``details`` is the runtime's own message."""

    def __init__(self, call: str, code: str, details: str) -> None:
        self.call = call
        self.code = code
        self.details = details
        super().__init__(f"{call} failed ({code}): {details}")


@dataclass(frozen=True)
class RuntimeVersion:
    """What ``Version`` says: runtime name and version, and the CRI API version it speaks."""

    runtime_name: str
    runtime_version: str
    runtime_api_version: str


@dataclass(frozen=True)
class RuntimeStatus:
    """What ``Status`` says: the conditions (RuntimeReady, NetworkReady) and the verbose info."""

    conditions: dict[str, bool]
    condition_messages: dict[str, str]
    info: dict[str, str] = field(default_factory=dict)

    def config(self) -> dict[str, Any] | None:
        """``info["config"]`` decoded: the CRI config the runtime runs with (``crictl info``)."""
        raw = self.info.get("config")
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class SandboxStatus:
    """What ``PodSandboxStatus`` says about one sandbox."""

    sandbox_id: str
    ready: bool
    runtime_handler: str
    labels: dict[str, str]
    info: dict[str, str]


def socket_path(address: str) -> Path:
    """The filesystem path of a ``unix://`` (or ``unix:``, or bare path) address."""
    if address.startswith("unix://"):
        return Path(address[len("unix://") :])
    if address.startswith("unix:"):
        return Path(address[len("unix:") :])
    return Path(address)


def normalize_address(address: str) -> str:
    """``unix:///abs/path`` for any accepted spelling; other schemes are refused."""
    if "://" in address and not address.startswith("unix://"):
        raise RuntimeUnreachableError(
            f"{address}: only unix sockets are supported (unix:///run/containerd/containerd.sock)"
        )
    path = socket_path(address)
    return f"unix://{path.resolve() if not path.is_absolute() else path}"


def check_socket(address: str) -> None:
    """Fail fast, with the path in the message, when there is no socket to dial."""
    path = socket_path(address)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise RuntimeUnreachableError(f"{path}: no such socket ({HINT})") from None
    except PermissionError:
        raise RuntimeUnreachableError(f"{path}: permission denied (run as root?)") from None
    if not stat.S_ISSOCK(mode):
        raise RuntimeUnreachableError(f"{path}: not a unix socket ({HINT})")
    if not os.access(path, os.R_OK | os.W_OK):
        raise RuntimeUnreachableError(f"{path}: permission denied (run as root?)")


def unreachable(address: str, call: str, error: grpc.RpcError, timeout: float) -> GpureadyError:
    """The one-line error for a gRPC failure: unreachable (exit 3) or the runtime's own answer."""
    code = error.code()
    details = (error.details() or "").strip()
    path = socket_path(address)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RuntimeUnreachableError(f"{path}: no answer to {call} within {timeout:g}s ({HINT})")
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return CriNotLoadedError(
            f"{path}: answers gRPC but not the CRI runtime.v1 {call} call ({details or code.name}; "
            "is the CRI plugin disabled, or containerd older than 1.6?)"
        )
    if code is grpc.StatusCode.UNAVAILABLE:
        reason = "connection refused" if "refused" in details.lower() else "not a CRI endpoint"
        return RuntimeUnreachableError(f"{path}: {reason} ({details or code.name}; {HINT})")
    return CriCallError(call, code.name, details)


class CriClient:
    """A connection to one CRI runtime; use as a context manager so the channel is closed.

    ``timeout`` applies to each call (seconds); ``RunPodSandbox`` gets ``sandbox_timeout``.
    """

    # The socket is on this machine (its /proc says which process serves it).
    local = True

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        sandbox_timeout: float = RUN_SANDBOX_TIMEOUT,
    ) -> None:
        self.address = normalize_address(address)
        self.timeout = timeout
        self.sandbox_timeout = sandbox_timeout
        self._sandbox_deadline = sandbox_timeout
        check_socket(self.address)
        # No retries in the background: one clear answer per call.
        self._channel = grpc.insecure_channel(self.address, options=[("grpc.enable_retries", 0)])
        self._runtime = api_grpc.RuntimeServiceStub(self._channel)
        self._images = api_grpc.ImageServiceStub(self._channel)

    def __enter__(self) -> CriClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the gRPC channel."""
        self._channel.close()

    def _call(self, name: str, method, request, *, timeout: float | None = None):
        limit = self.timeout if timeout is None else timeout
        try:
            return method(request, timeout=limit)
        except grpc.RpcError as error:
            raise unreachable(self.address, name, error, limit) from None

    def version(self) -> RuntimeVersion:
        """The runtime's name and version; the first call, proving the socket speaks CRI."""
        reply = self._call("Version", self._runtime.Version, api.VersionRequest(version="v1"))
        return RuntimeVersion(reply.runtime_name, reply.runtime_version, reply.runtime_api_version)

    def status(self, *, verbose: bool = True) -> RuntimeStatus:
        """The runtime's conditions and, with ``verbose``, its info (the loaded CRI config)."""
        reply = self._call("Status", self._runtime.Status, api.StatusRequest(verbose=verbose))
        conditions = {c.type: c.status for c in reply.status.conditions}
        messages = {c.type: c.message or c.reason for c in reply.status.conditions}
        return RuntimeStatus(conditions, messages, dict(reply.info))

    def run_pod_sandbox(self, config: api.PodSandboxConfig, *, runtime_handler: str) -> str:
        """Create and start a pod sandbox through ``runtime_handler``; its id."""
        request = api.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        reply = self._call(
            "RunPodSandbox", self._runtime.RunPodSandbox, request, timeout=self.sandbox_timeout
        )
        return reply.pod_sandbox_id

    def start_pod_sandbox(
        self, config: api.PodSandboxConfig, *, runtime_handler: str, timeout: float
    ) -> grpc.Future:
        """Send RunPodSandbox without waiting; collect the id with :meth:`sandbox_id_of`.

        Waiting separately lets a caller give up waiting (timeout, Ctrl-C) without cancelling
        the call, so containerd finishes and the caller still learns the id to remove.
        """
        request = api.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        self._sandbox_deadline = timeout
        return self._runtime.RunPodSandbox.future(request, timeout=timeout)

    def sandbox_id_of(self, call: grpc.Future, *, wait: float) -> str | None:
        """The sandbox id once RunPodSandbox answered, None if it has not within ``wait``."""
        try:
            return call.result(timeout=wait).pod_sandbox_id
        except grpc.FutureTimeoutError:
            return None
        except grpc.RpcError as error:
            raise unreachable(
                self.address, "RunPodSandbox", error, self._sandbox_deadline
            ) from None

    def pod_sandbox_status(self, sandbox_id: str, *, verbose: bool = False) -> SandboxStatus:
        """The state of one sandbox."""
        request = api.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=verbose)
        reply = self._call("PodSandboxStatus", self._runtime.PodSandboxStatus, request)
        status = reply.status
        return SandboxStatus(
            sandbox_id=status.id,
            ready=status.state == api.SANDBOX_READY,
            runtime_handler=status.runtime_handler,
            labels=dict(status.labels),
            info=dict(reply.info),
        )

    def list_pod_sandboxes(self, *, labels: Mapping[str, str] | None = None) -> list[str]:
        """The ids of the sandboxes whose labels include ``labels``."""
        request = api.ListPodSandboxRequest(
            filter=api.PodSandboxFilter(label_selector=dict(labels or {}))
        )
        reply = self._call("ListPodSandbox", self._runtime.ListPodSandbox, request)
        return [item.id for item in reply.items]

    def stop_pod_sandbox(self, sandbox_id: str) -> None:
        """Stop a sandbox (idempotent in the CRI)."""
        request = api.StopPodSandboxRequest(pod_sandbox_id=sandbox_id)
        self._call("StopPodSandbox", self._runtime.StopPodSandbox, request)

    def remove_pod_sandbox(self, sandbox_id: str) -> None:
        """Remove a stopped sandbox (idempotent in the CRI)."""
        request = api.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id)
        self._call("RemovePodSandbox", self._runtime.RemovePodSandbox, request)

    def image_present(self, reference: str) -> bool:
        """True when the image ``reference`` is in the runtime's CRI image store."""
        request = api.ImageStatusRequest(image=api.ImageSpec(image=reference))
        reply = self._call("ImageStatus", self._images.ImageStatus, request)
        return reply.HasField("image") and bool(reply.image.id)
