"""The RuntimeClass that lets a pod opt in to the NVIDIA runtime.

A pod with ``runtimeClassName: nvidia`` is run by the containerd runtime whose name equals the
RuntimeClass's ``handler``; a handler that names no runtime fails only when the pod starts, with
``RunContainerError``, which is why gpuready checks it before any pod is scheduled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuready.node import HOST, FileKind, Node
from gpuready.records import Record

API_VERSION = "node.k8s.io/v1"
KIND = "RuntimeClass"
# RFC 1123 DNS label, as Kubernetes validates both metadata.name and handler.


class RuntimeClass(Record):
    """One RuntimeClass as read from a manifest; ``line`` is where its document starts."""

    name: str | None
    handler: str | None
    file: str
    line: int


def manifest(name: str, handler: str) -> dict[str, Any]:
    """The RuntimeClass manifest, with the four fields the contract requires."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "handler": handler,
    }


def render(name: str, handler: str) -> str:
    """The manifest as YAML text."""
    import yaml

    return yaml.safe_dump(manifest(name, handler), sort_keys=False, default_flow_style=False)


def load(path: Path, *, node: Node = HOST) -> list[RuntimeClass]:
    """Every RuntimeClass in a (possibly multi-document) YAML file, read through ``node``."""
    text = node.read_text(path, kind=FileKind.MANIFEST)
    return parse(text, path)


def require_some(found: list[RuntimeClass], path: Path | str) -> list[RuntimeClass]:
    """``found``, or :class:`InputError` when a file given to be checked holds no RuntimeClass."""
    if not found:
        from gpuready.errors import InputError

        raise InputError(path, "no RuntimeClass (kind: RuntimeClass) in this file")
    return found


def parse(text: str, path: Path | str) -> list[RuntimeClass]:
    """Every RuntimeClass document in ``text``; YAML errors carry their line and column."""
    import yaml

    from gpuready import yamlfile

    try:
        nodes = yamlfile.compose_all(text)
        documents = [yamlfile.construct(node) for node in nodes]
    except yaml.YAMLError as error:
        raise yamlfile.yaml_error(error, path) from None
    found = []
    for node, document in zip(nodes, documents):
        if isinstance(document, dict) and document.get("kind") == KIND:
            metadata = document.get("metadata") or {}
            found.append(
                RuntimeClass(
                    name=metadata.get("name") if isinstance(metadata, dict) else None,
                    handler=document.get("handler"),
                    file=str(path),
                    line=node.start_mark.line + 1 if node is not None else 1,
                )
            )
    return found
