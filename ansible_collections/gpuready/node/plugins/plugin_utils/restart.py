# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""``restart: true``: gpuready's restart transaction, driven from the controller.

:func:`gpuready.workflow.transaction.run_transaction` runs unchanged (pre-flight, write, restart,
verify, roll back); only what it does to the node goes through Ansible here:

- pre-flight: the candidate files are staged on the controller as the command line stages them,
  copied into a temporary folder on the node, and the node's own ``containerd config dump`` reads
  them there;
- files are written and put back through ``gpuready.node.node_file``
  (:class:`~.runtime.RuntimeChange`);
- the restart command runs on the node under ``timeout``;
- the CRI is asked through :mod:`gpuready.node.cri_call` on the node, its messages encoded and
  decoded here with the CRI's generated classes.
"""

from __future__ import annotations

import base64
import contextlib
import posixpath
from pathlib import Path

import tomllib

from gpuready.cri.client import CriCallError, CriClient, normalize_address, socket_path
from gpuready.errors import GpureadyError, InputError, RuntimeUnreachableError
from gpuready.fsio import backup_path

CRI_CALL = "gpuready.node.cri_call"


class AnsibleHost:
    """The node of one task, as the restart transaction's host."""

    def __init__(self, runtime, *, containerd: str = "containerd") -> None:
        self.runtime = runtime
        self.mirror = runtime.mirror
        self.node = runtime.mirror.node
        self.containerd = containerd

    def locked(self, node, paths):
        """Ansible runs one task per host at a time; nothing else to hold here."""
        return contextlib.nullcontext()

    def release(self) -> tuple[int, int] | None:
        """The node's ``containerd --version``."""
        from gpuready.containerd.versions import parse_release

        return parse_release(self.node.ask([self.containerd, "--version"]) or "")

    def dump(self, node, candidates: dict, *, options) -> dict:
        """The node's ``containerd config dump`` of the staged files."""
        from gpuready.containerd.effective import staged

        with staged(node.config, root=node.root, candidates=candidates) as stage:
            remote = self.node.temporary_folder()
            try:
                for local in sorted(p for p in stage.folder.rglob("*") if p.is_file()):
                    text = local.read_text(encoding="utf-8").replace(str(stage.folder), remote)
                    target = posixpath.join(remote, local.relative_to(stage.folder).as_posix())
                    self.node.put(target, text)
                main = posixpath.join(remote, stage.path(node.config).relative_to(
                    stage.folder).as_posix())
                code, out, err = self.node.run([self.containerd, "--config", main,
                                                "config", "dump"])
            finally:
                self.node.remove_folder(remote)
        if code != 0:
            first = (err.strip().splitlines() or ["no output"])[-1]
            raise GpureadyError(f"containerd refuses the new files: {first}")
        return tomllib.loads(out.replace(remote, ""))

    def new_backups(self, node, plans) -> list[Path]:
        """The backups the write would create: those the node does not have yet."""
        fresh = []
        for plan in plans:
            if plan.changes and plan.before is not None and plan.after is not None:
                backup = backup_path(plan.path)
                if not self.node.stat(self.mirror.node_file(str(backup)))["exists"]:
                    fresh.append(backup)
        return fresh

    def write(self, node, plans) -> list:
        """Write through ``gpuready.node.node_file``; the plans written."""
        from ansible_collections.gpuready.node.plugins.plugin_utils.runtime import Change

        return self.runtime.write(Change(list(plans), node.config))

    def put_back(self, node, written, backups) -> None:
        """Each written file's text as before (a new one removed), then the new backups."""
        for plan in reversed(written):
            path = self.mirror.node_file(str(plan.path))
            if plan.before is None:
                self.node.remove(path)
            else:
                # a removed file's folder may have gone with it (the empty folders gpuready
                # created go after the record): it comes back with the file
                self.node.make_folder(posixpath.dirname(path))
                self.node.write(path, plan.before)
            self.runtime.keep_local(plan.path, plan.before)
        for backup in backups:
            self.node.remove(self.mirror.node_file(str(backup)))

    def shell(self, command: str, *, timeout: float) -> tuple[int, str] | None:
        """The restart command through the node's shell under coreutils' ``timeout``."""
        code, _output, err = self.node.run(["timeout", f"{timeout:g}", "sh", "-c", command])
        return None if code == 124 else (code, err)

    def connect(self, address: str, *, timeout: float):
        """A CRI client whose calls go through :mod:`gpuready.node.cri_call` on the node."""
        return RelayClient(self.node, address, timeout=timeout)


class RelayClient(CriClient):
    """:class:`CriClient`'s calls, each made on the node by the ``cri_call`` module."""

    local = False  # the socket is on the node: this machine's /proc knows nothing of it

    def __init__(self, node, address: str, *, timeout: float) -> None:
        self.address = normalize_address(address)
        self.timeout = timeout
        self.sandbox_timeout = timeout
        self._sandbox_deadline = timeout
        self._runtime = _Service(node, self.address, "runtime.v1.RuntimeService")
        self._images = _Service(node, self.address, "runtime.v1.ImageService")

    def close(self) -> None:
        """No connection is held between calls."""


class _Service:
    """A stub whose methods send their request through the node."""

    def __init__(self, node, address: str, name: str) -> None:
        self._node = node
        self._address = address
        self._name = name

    def __getattr__(self, method: str) -> _Call:
        return _Call(self._node, self._address, f"/{self._name}/{method}", method)


class _Call:
    """One method of a :class:`_Service`: called as a gRPC stub's method is, or as its
    ``future`` (which here has its answer by the time it is returned)."""

    def __init__(self, node, address: str, path: str, method: str) -> None:
        self._node = node
        self._address = address
        self._path = path
        self._method = method

    def __call__(self, request, *, timeout: float):
        from gpuready.cri.generated import cri_runtime_v1_pb2 as api

        try:
            result = self._node.module_named(
                CRI_CALL, socket=str(socket_path(self._address)), method=self._path,
                request=base64.b64encode(request.SerializeToString()).decode("ascii"),
                timeout=timeout,
            )
        except InputError as error:
            raise RuntimeUnreachableError(error.message()) from None
        if result.get("failed"):
            if result.get("unreachable_socket") is False:
                raise CriCallError(self._method, "UNKNOWN", str(result.get("msg")))
            raise RuntimeUnreachableError(str(result.get("msg")))
        answer_type = getattr(api, f"{self._method}Response")
        return answer_type.FromString(base64.b64decode(result["answer"]))

    def future(self, request, *, timeout: float) -> _Answered:
        """The call made now; its answer (or error) kept for ``result``."""
        try:
            return _Answered(self(request, timeout=timeout), None)
        except GpureadyError as error:
            return _Answered(None, error)


class _Answered:
    """A call that has its answer, in the shape of a gRPC future."""

    def __init__(self, reply, error: GpureadyError | None) -> None:
        self._reply = reply
        self._error = error

    def result(self, timeout: float | None = None):
        """The answer, or the call's error raised."""
        if self._error is not None:
            raise self._error
        return self._reply
