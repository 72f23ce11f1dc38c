"""What the ownership rules look at: the owner's inputs and output, the kubelet's endpoint, and
every containerd installed on the node. Read-only, and read once per ``doctor`` run."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.document import load_config, load_config_text
from gpuready.containerd.versions import spec_of
from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.owners.detect import Detection
from gpuready.owners.table import OWNERS, EditKind, Owner
from gpuready.paths import KUBELET_CONFIG
from gpuready.records import Factory, MutableRecord, Record

FLAG = re.compile(r"--container-runtime-endpoint[= ]+(\S+)")
# MicroK8s's args files name snap folders by variable (canonical/microk8s default-args/kubelet).
SNAP_VARIABLES = {
    "${SNAP_COMMON}": "/var/snap/microk8s/common",
    "${SNAP_DATA}": "/var/snap/microk8s/current",
    "${SNAP}": "/snap/microk8s/current",
}
FLAG_READ_LIMIT = 256 * 1024


class KubeletEndpoint(Record):
    """The CRI endpoint the kubelet is configured with, and where that was read."""

    socket: PurePosixPath
    file: Path
    how: str


class Installation(Record):
    """One containerd binary on the node, and the owners that ship it."""

    binary: PurePosixPath
    owners: tuple[Owner, ...]


def socket_path(endpoint: str) -> PurePosixPath:
    """``unix:///run/x.sock`` or ``/run/x.sock`` as a path."""
    for name, value in SNAP_VARIABLES.items():
        endpoint = endpoint.replace(name, value)
    return PurePosixPath(endpoint.removeprefix("unix://"))


def _flag_endpoint(node: Node, path: Path) -> str | None:
    try:
        text = node.read_bytes(path, kind=FileKind.NODE_FACT).decode("utf-8", errors="replace")
    except InputError:
        return None
    match = FLAG.search(text)
    if match is None:
        # k3s and RKE2 take it as a key of their config.yaml
        key = re.search(r"^container-runtime-endpoint:\s*(\S+)", text, re.MULTILINE)
        return key.group(1).strip("\"'") if key else None
    words = shlex.split(match.group(1), posix=True) if match.group(1) else []
    return (words[0] if words else match.group(1)).strip("\"'")


def kubelet_endpoint(node: Node, detection: Detection) -> KubeletEndpoint | None:
    """The kubelet's ``containerRuntimeEndpoint`` (its config file), else the flag in the files
    the owners keep kubelet flags in; None when neither sets it."""
    config = node.path(KUBELET_CONFIG)
    if node.is_file(config):
        from gpuready.yamlfile import load_mapping

        try:
            data = load_mapping(node.read_text(config, kind=FileKind.MANIFEST), config)
        except InputError:  # doctor reports an unreadable kubelet config itself
            data = {}
        value = data.get("containerRuntimeEndpoint")
        if isinstance(value, str) and value:
            return KubeletEndpoint(socket_path(value), config, "containerRuntimeEndpoint")
    owners = (detection.owner, *(owner for owner in OWNERS if owner is not detection.owner))
    for owner in owners:
        for node_path in owner.kubelet_flag_files:
            if not node.is_file(node.path_text(node_path)):  # most are absent: no Path made
                continue
            path = node.path(node_path)
            value = _flag_endpoint(node, path)
            if value:
                return KubeletEndpoint(socket_path(value), path, "--container-runtime-endpoint")
    return None


def installations(node: Node) -> list[Installation]:
    """Every containerd binary the owner table knows of that is on the node."""
    found: dict[PurePosixPath, list[Owner]] = {}
    for owner in OWNERS:
        for binary in owner.binaries:
            if node.lexists(node.path_text(binary)):
                found.setdefault(binary, []).append(owner)
    return [Installation(binary, tuple(owners)) for binary, owners in found.items()]


def _runtimes_of(
    node: Node, path: Path, *, version: int | None = None
) -> dict[str, Mapping[str, Any]]:
    """The runtimes a config file (or a template body of ``version``) registers ({} if bad)."""
    try:
        if version is None:
            config = load_config(path, node=node)
        else:
            from gpuready.owners.template import parse_template

            template = parse_template(node.read_text(path, kind=FileKind.CONFIG), path)
            header = f"version = {version}\n" if template.has_base else ""
            config = load_config_text(header + template.body, path)
        return facts.runtimes(config.data, spec_of(config.data, path=path))
    except InputError:
        return {}


class OwnerState(MutableRecord):
    """The owner's files on one node, as the ownership rules need them."""

    node: Node
    detection: Detection
    checked_config: Path
    _cache: dict = Factory(dict)

    @property
    def owner(self) -> Owner:
        """The detected (or given) owner."""
        return self.detection.owner

    @property
    def generated(self) -> Path:
        """The config the owner makes containerd read."""
        return self.node.path(self.owner.config)

    @cached_property
    def generated_runtimes(self) -> dict[str, Mapping[str, Any]]:
        """The runtimes in that config (for k0s: in its CRI config, where drop-ins land)."""
        if self.owner.edit is EditKind.DROP_IN:
            return _runtimes_of(self.node, self.node.path(self.owner.edit_paths[1]))
        return _runtimes_of(self.node, self.generated) if self.node.is_file(self.generated) else {}

    @cached_property
    def inputs(self) -> list[tuple[Path, dict[str, Mapping[str, Any]]]]:
        """The files the owner renders from, with the runtimes each registers."""
        owner = self.owner
        if owner.edit is EditKind.GO_TEMPLATE:
            from gpuready.owners.template import template_version

            return [(path, _runtimes_of(self.node, path, version=template_version(path)))
                    for path in (self.node.path(p) for p in owner.edit_paths)
                    if self.node.is_file(path)][:1]
        if owner.edit is EditKind.TEMPLATE_FILE:
            path = self.node.path(owner.edit_paths[0])
            return [(path, _runtimes_of(self.node, path))] if self.node.is_file(path) else []
        if owner.edit is EditKind.DROP_IN:
            folder = self.node.path(owner.edit_paths[0])
            files = self.node.glob(folder / "*.toml") if self.node.is_dir(folder) else []
            return [(path, _runtimes_of(self.node, path)) for path in files]
        return []

    def input_runtimes(self) -> set[str]:
        """Names of the runtimes the owner's inputs register."""
        return {name for _, runtimes in self.inputs for name in runtimes}

    @cached_property
    def kubelet(self) -> KubeletEndpoint | None:
        """The kubelet's CRI endpoint, when configured on the node."""
        return kubelet_endpoint(self.node, self.detection)

    @cached_property
    def installations(self) -> list[Installation]:
        """The containerd binaries on the node."""
        return installations(self.node)
