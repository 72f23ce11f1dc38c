"""A CRI server that replays what a real containerd answered, for lines that cannot run here.

Only Debian's containerd 1.6 installs on the test machines. What 1.6.20, 2.1.9 and 2.3.4 (the
latter two built from their release tags) answered was recorded, each daemon running
``containerd-V-config-used.toml`` with a stand-in runtime per spelling of the runc options
(``tests/data/cri/observed``, see its SOURCE.md). :class:`RecordedContainerd` serves those
answers over a real gRPC unix socket with the CRI ``runtime.v1`` API, so gpuready's real client,
``verify --live`` and the probe talk to it exactly as to a containerd:

- ``Version``: the recorded release (``1.6.20~ds1``, ``v2.1.9``, ``v2.3.4``);
- ``Status`` verbose: the recorded ``info`` (its ``config`` is the live CRI config);
- ``RunPodSandbox`` through a recorded runtime: a ready sandbox whose ``PodSandboxStatus``
  verbose ``info`` is the one recorded for that runtime (``runtimeType``, ``runtimeOptions``);
  an unknown handler is refused with containerd's message;
- ``ImageStatus``: present for the images in ``images`` (the recorded pause image by default).

``rename`` maps a handler name to a recorded runtime (``{"nvidia": "pascal"}`` answers for
``nvidia`` what the release answered for ``pascal``), in Status and in the sandbox answers alike.
It replays a recording; it decides nothing itself.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from gpuready.cri.generated import cri_runtime_v1_pb2 as api
from gpuready.cri.generated import cri_runtime_v1_pb2_grpc as api_grpc

OBSERVED = Path(__file__).resolve().parent.parent / "data" / "cri" / "observed"
RELEASES = ("1.6.20", "2.1.9", "2.3.4")
# How each release spelled its version in the CRI Version answer.
RUNTIME_VERSION = {"1.6.20": "1.6.20~ds1", "2.1.9": "v2.1.9", "2.3.4": "v2.3.4"}


def recorded(release: str, what: str) -> Any:
    """One recorded JSON file of ``release``: ``cri-status-info``, ``sandbox-status-info``,
    ``standin-calls``."""
    return json.loads((OBSERVED / f"containerd-{release}-{what}.json").read_text())


def config_used(release: str) -> Path:
    """The config file the recorded daemon of ``release`` ran with."""
    return OBSERVED / f"containerd-{release}-config-used.toml"


class _Runtime(api_grpc.RuntimeServiceServicer):
    def __init__(self, replay: RecordedContainerd) -> None:
        self.replay = replay

    def Version(self, request, context):  # noqa: N802 (gRPC method names)
        return api.VersionResponse(
            version="0.1.0",
            runtime_name="containerd",
            runtime_version=RUNTIME_VERSION[self.replay.release],
            runtime_api_version="v1",
        )

    def Status(self, request, context):  # noqa: N802
        conditions = [
            api.RuntimeCondition(type="RuntimeReady", status=True),
            api.RuntimeCondition(type="NetworkReady", status=True),
        ]
        info = self.replay.status_info() if request.verbose else {}
        return api.StatusResponse(status=api.RuntimeStatus(conditions=conditions), info=info)

    def RunPodSandbox(self, request, context):  # noqa: N802
        handler = request.runtime_handler
        if self.replay.sandbox_record(handler) is None:
            context.abort(
                grpc.StatusCode.UNKNOWN,
                f'failed to get sandbox runtime: no runtime for "{handler}" is configured',
            )
        return api.RunPodSandboxResponse(pod_sandbox_id=self.replay.add_sandbox(request))

    def PodSandboxStatus(self, request, context):  # noqa: N802
        sandbox = self.replay.sandboxes.get(request.pod_sandbox_id)
        if sandbox is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "an error occurred when try to find sandbox")
        status = api.PodSandboxStatus(
            id=request.pod_sandbox_id,
            metadata=sandbox["config"].metadata,
            state=sandbox["state"],
            labels=dict(sandbox["config"].labels),
            runtime_handler=sandbox["handler"],
        )
        info = {}
        if request.verbose:
            record = self.replay.sandbox_record(sandbox["handler"])
            info = {key: json.dumps(value) for key, value in record["info"].items()}
        return api.PodSandboxStatusResponse(status=status, info=info)

    def ListPodSandbox(self, request, context):  # noqa: N802
        wanted = dict(request.filter.label_selector)
        items = [
            api.PodSandbox(id=sandbox_id, state=sandbox["state"], labels=sandbox["config"].labels)
            for sandbox_id, sandbox in list(self.replay.sandboxes.items())
            if all(sandbox["config"].labels.get(k) == v for k, v in wanted.items())
        ]
        return api.ListPodSandboxResponse(items=items)

    def StopPodSandbox(self, request, context):  # noqa: N802
        sandbox = self.replay.sandboxes.get(request.pod_sandbox_id)
        if sandbox is not None:
            sandbox["state"] = api.SANDBOX_NOTREADY
        return api.StopPodSandboxResponse()

    def RemovePodSandbox(self, request, context):  # noqa: N802
        self.replay.sandboxes.pop(request.pod_sandbox_id, None)
        return api.RemovePodSandboxResponse()


class _Images(api_grpc.ImageServiceServicer):
    def __init__(self, replay: RecordedContainerd) -> None:
        self.replay = replay

    def ImageStatus(self, request, context):  # noqa: N802
        name = request.image.image
        self.replay.images_asked.append(name)
        if name not in self.replay.images:
            return api.ImageStatusResponse()
        return api.ImageStatusResponse(
            image=api.Image(id="sha256:" + uuid.uuid5(uuid.NAMESPACE_URL, name).hex, size=1)
        )


class RecordedContainerd:
    """A gRPC CRI server at ``folder/c.sock`` replaying the recorded answers of ``release``."""

    def __init__(
        self,
        release: str,
        folder: Path,
        *,
        rename: dict[str, str] | None = None,
        images: set[str] | None = None,
    ) -> None:
        if release not in RELEASES:
            raise ValueError(f"no recording of containerd {release}")
        self.release = release
        self.socket = folder / "c.sock"
        self.rename = dict(rename or {})
        self.status = recorded(release, "cri-status-info")
        self.sandbox_records = recorded(release, "sandbox-status-info")
        self.images = set(images) if images is not None else {self.recorded_pause_image()}
        self.images_asked: list[str] = []
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_grpc.add_RuntimeServiceServicer_to_server(_Runtime(self), self._server)
        api_grpc.add_ImageServiceServicer_to_server(_Images(self), self._server)
        self._server.add_insecure_port(f"unix://{self.socket}")

    @property
    def address(self) -> str:
        """The ``unix://`` address of the socket."""
        return f"unix://{self.socket}"

    def recorded_pause_image(self) -> str:
        """The pause image the recorded sandboxes ran from."""
        first = next(iter(self.sandbox_records.values()))
        return first["info"]["info"]["image"]

    def _recorded_name(self, handler: str) -> str:
        return self.rename.get(handler, handler if handler not in self.rename.values() else "")

    def sandbox_record(self, handler: str) -> dict[str, Any] | None:
        """What the release answered for a sandbox through ``handler`` (None: not configured)."""
        return self.sandbox_records.get(self._recorded_name(handler))

    def status_info(self) -> dict[str, str]:
        """The recorded Status info, runtimes renamed, each value JSON-encoded (as containerd)."""
        info = copy.deepcopy(self.status)
        runtimes = info["config"]["containerd"]["runtimes"]
        for new, old in self.rename.items():
            runtimes[new] = runtimes.pop(old)
        return {key: json.dumps(value) for key, value in info.items()}

    def add_sandbox(self, request) -> str:
        """A new ready sandbox for ``request``; its id."""
        sandbox_id = uuid.uuid4().hex + uuid.uuid4().hex
        with self._lock:
            self.sandboxes[sandbox_id] = {
                "config": request.config,
                "handler": request.runtime_handler,
                "state": api.SANDBOX_READY,
            }
        return sandbox_id

    def start(self) -> RecordedContainerd:
        """Serve until :meth:`stop`."""
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        self._server.stop(grace=None)
        self.socket.unlink(missing_ok=True)
