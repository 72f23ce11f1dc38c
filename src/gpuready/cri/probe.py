"""Start a throw-away pod sandbox through a runtime handler, the way the kubelet would.

A sandbox is the first thing the kubelet asks for a pod, with the RuntimeClass handler: if the
handler is unknown, or its runtime binary cannot start the pause container, containerd says so
here, before any GPU pod is scheduled. The sandbox uses the node's network namespace (no CNI
needed), carries gpuready's labels, and is always stopped and removed: on success, on failure, on
timeout, and on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from gpuready.cri.client import CriClient
from gpuready.cri.generated import cri_runtime_v1_pb2 as api
from gpuready.errors import GpureadyError

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PROBE_LABEL = "gpuready.io/probe"
PROBE_NAMESPACE = "gpuready-probe"
# With the systemd cgroup driver runc wants "slice:prefix:name"; containerd builds that form only
# from a parent ending in ".slice" (the kubelet passes kubepods-...slice), so the probe does too.
SYSTEMD_CGROUP_PARENT = "gpuready-probe.slice"
POLL_INTERVAL = 0.2
# How long clean-up waits for an unfinished RunPodSandbox after a timeout or an interrupt.
SETTLE_SECONDS = 30.0


@dataclass
class ProbeResult:
    """What the probe saw: whether the sandbox became ready, what containerd said, cleanup."""

    handler: str
    ok: bool
    message: str
    sandbox_id: str = ""
    seconds: float = 0.0
    removed: bool = False
    cleanup_error: str = ""

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready mapping."""
        return asdict(self)


class ProbeInterrupted(KeyboardInterrupt):
    """SIGTERM arrived while the probe ran (handled like Ctrl-C: clean up, then stop)."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into an exception inside the block, so ``finally`` clean-up runs."""

    def raise_interrupt(signum, frame):
        raise ProbeInterrupted()

    try:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def sandbox_config(probe_id: str, *, systemd_cgroup: bool) -> api.PodSandboxConfig:
    """A host-network sandbox named and labelled as gpuready's probe."""
    security = api.LinuxSandboxSecurityContext(
        namespace_options=api.NamespaceOption(network=api.NODE, pid=api.POD, ipc=api.POD)
    )
    linux = api.LinuxPodSandboxConfig(security_context=security)
    if systemd_cgroup:
        linux.cgroup_parent = SYSTEMD_CGROUP_PARENT
    return api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(
            name=f"gpuready-probe-{probe_id[:8]}", uid=probe_id, namespace=PROBE_NAMESPACE
        ),
        labels={MANAGED_BY_LABEL: "gpuready", PROBE_LABEL: probe_id},
        linux=linux,
    )


def wait_until_ready(client: CriClient, sandbox_id: str, *, deadline: float) -> bool:
    """Poll PodSandboxStatus until the sandbox is ready or ``deadline`` (monotonic) passes."""
    while True:
        if client.pod_sandbox_status(sandbox_id).ready:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)


def remove_probe_sandboxes(client: CriClient, probe_id: str, known_id: str) -> str:
    """Stop and remove every sandbox of this probe; an error message, or "" when all are gone."""
    try:
        ids = set(client.list_pod_sandboxes(labels={PROBE_LABEL: probe_id}))
        if known_id:
            ids.add(known_id)
        for sandbox_id in ids:
            client.stop_pod_sandbox(sandbox_id)
            client.remove_pod_sandbox(sandbox_id)
        left = client.list_pod_sandboxes(labels={PROBE_LABEL: probe_id})
    except GpureadyError as error:
        return f"could not remove the probe sandbox: {error.message()}"
    if left:
        return f"probe sandbox {', '.join(left)} is still there; remove it with crictl rmp -f"
    return ""


def run_probe(
    client: CriClient, *, handler: str, systemd_cgroup: bool, timeout: float
) -> ProbeResult:
    """Start a sandbox through ``handler``, wait for it, and always stop and remove it.

    A refusal or failure by containerd is a failed result carrying containerd's message. On
    timeout, Ctrl-C or SIGTERM the RunPodSandbox call is not cancelled: containerd is given
    ``SETTLE_SECONDS`` more to answer, so the sandbox it made can be removed; then an interrupt
    is re-raised.
    """
    probe_id = uuid.uuid4().hex
    started = time.monotonic()
    result = ProbeResult(handler=handler, ok=False, message="")
    call = None
    with terminate_as_interrupt():
        try:
            call = client.start_pod_sandbox(
                sandbox_config(probe_id, systemd_cgroup=systemd_cgroup),
                runtime_handler=handler,
                timeout=timeout + SETTLE_SECONDS,
            )
            result.sandbox_id = client.sandbox_id_of(call, wait=timeout) or ""
            ready = bool(result.sandbox_id) and wait_until_ready(
                client, result.sandbox_id, deadline=started + timeout
            )
            result.ok = ready
            result.message = (
                f"sandbox {result.sandbox_id[:12]} ready through handler {handler}"
                if ready
                else f"sandbox through handler {handler} not ready within {timeout:g}s"
            )
        except GpureadyError as error:
            result.message = getattr(error, "details", None) or error.message()
        finally:
            if call is not None and not result.sandbox_id:
                result.sandbox_id = settle(client, call)
            result.seconds = round(time.monotonic() - started, 2)
            result.cleanup_error = remove_probe_sandboxes(client, probe_id, result.sandbox_id)
            result.removed = not result.cleanup_error
    return result


def settle(client: CriClient, call) -> str:
    """The id of a sandbox still being created, once containerd answers ("" if it never does)."""
    try:
        return client.sandbox_id_of(call, wait=SETTLE_SECONDS) or ""
    except GpureadyError:  # containerd refused or rolled back: nothing to remove
        return ""
