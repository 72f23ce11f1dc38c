"""Start a throw-away pod sandbox through a runtime handler, the way the kubelet would.

A sandbox is the first thing the kubelet asks for a pod, with the RuntimeClass handler: if the
handler is unknown, or its runtime binary cannot start the pause container, containerd says so
here, before any GPU pod is scheduled. The sandbox uses the node's network namespace (no CNI
needed), carries gpuready's labels, and is always stopped and removed: on success, on failure, on
timeout, and on Ctrl-C or SIGTERM.

A ready sandbox alone proves little: through a runtime whose ``BinaryName`` containerd drops
(``binary_name``), the sandbox still comes up, through plain runc, which on a GPU node means
"pods run, but no GPU". So once it is ready the probe reads what containerd decoded for it
(``PodSandboxStatus`` verbose: ``info.runtimeType`` and ``info.runtimeOptions`` with
``binary_name`` and ``systemd_cgroup``, reported by 1.6, 2.1 and 2.3 alike) and compares it with
what the config intends; a difference fails the probe, and a containerd that does not report
these fields leaves the probe unproven, never passed.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class RuntimeIntent:
    """What the config means the handler's sandboxes to run with (None: plain runc's binary)."""

    runtime_type: str | None
    binary_name: str | None
    systemd_cgroup: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return asdict(self)


class Proof:
    """Whether the probe proved the decoded runtime: proven, differs, or unreadable."""

    PROVEN = "proven"
    DIFFERS = "differs"
    UNREADABLE = "unreadable"


@dataclass
class ProbeResult:
    """What the probe saw: whether the sandbox became ready, what containerd decoded for it
    compared with the intent (``proof``), what containerd said, and the clean-up."""

    handler: str
    ok: bool
    message: str
    sandbox_id: str = ""
    seconds: float = 0.0
    removed: bool = False
    cleanup_error: str = ""
    proof: str = ""
    intended: dict[str, Any] | None = None
    decoded: dict[str, Any] | None = None
    differences: list[str] = field(default_factory=list)

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


def decoded_runtime(info: dict[str, str]) -> dict[str, Any] | None:
    """What containerd decoded for a sandbox (verbose ``info["info"]``), or None if unreported.

    ``runtimeOptions`` is ``{}`` (1.6) or ``null`` (2.x) when no option reached the shim.
    """
    try:
        details = json.loads(info.get("info") or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(details, dict) or "runtimeType" not in details:
        return None
    if "runtimeOptions" not in details:
        return None
    options = details.get("runtimeOptions") or {}
    if not isinstance(options, dict):
        return None
    return {
        "runtime_type": details.get("runtimeType") or None,
        "binary_name": options.get("binary_name") or None,
        "systemd_cgroup": options.get("systemd_cgroup") is True,
    }


def _show(value: Any) -> str:
    if value is None:
        return "(not set: plain runc)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def differences(intent: RuntimeIntent, decoded: dict[str, Any]) -> list[str]:
    """One line per field where containerd decoded something other than the config intends."""
    found = []
    for label, key in (
        ("runtime_type", "runtime_type"),
        ("BinaryName", "binary_name"),
        ("SystemdCgroup", "systemd_cgroup"),
    ):
        wanted = getattr(intent, key)
        if wanted != decoded[key]:
            found.append(
                f"{label}: config {_show(wanted)}, containerd decoded {_show(decoded[key])}"
            )
    return found


def prove(client: CriClient, result: ProbeResult, intent: RuntimeIntent | None) -> None:
    """Compare what containerd decoded for the ready sandbox with ``intent``; fail on a change."""
    if intent is None:
        return
    result.intended = intent.to_dict()
    decoded = decoded_runtime(client.pod_sandbox_status(result.sandbox_id, verbose=True).info)
    if decoded is None:
        result.proof = Proof.UNREADABLE
        result.message += (
            "; unproven: containerd did not report the decoded runtime options "
            "(PodSandboxStatus verbose info.runtimeOptions), so the binary it used is unknown"
        )
        return
    result.decoded = decoded
    result.differences = differences(intent, decoded)
    if result.differences:
        result.proof = Proof.DIFFERS
        result.ok = False
        result.message += "; but " + "; ".join(result.differences)
    else:
        result.proof = Proof.PROVEN
        shown = _show(decoded["binary_name"])
        result.message += f", through {shown} as configured"


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
    client: CriClient,
    *,
    handler: str,
    systemd_cgroup: bool,
    timeout: float,
    intent: RuntimeIntent | None = None,
) -> ProbeResult:
    """Start a sandbox through ``handler``, wait for it, prove it, always stop and remove it.

    With ``intent``, a ready sandbox must also run what the config intends (:func:`prove`).

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
            if ready:
                prove(client, result, intent)
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
