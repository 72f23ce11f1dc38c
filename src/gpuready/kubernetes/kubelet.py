"""What the node's kubelet is configured with, as far as gpuready's checks need it."""

from __future__ import annotations

from gpuready.node import FileKind, Node
from gpuready.paths import KUBELET_CONFIG


def cgroup_driver(node: Node) -> tuple[str | None, str | None]:
    """``(cgroupDriver, file)`` of the kubelet's config; ``(None, None)`` when there is none.

    An unset ``cgroupDriver`` is the kubelet's default, ``cgroupfs``. Bad YAML is bad input.
    """
    path = node.path(KUBELET_CONFIG)
    if not node.exists(path):
        return None, None
    from gpuready import yamlfile

    data = yamlfile.load(node.read_text(path, kind=FileKind.MANIFEST), path)
    driver = data.get("cgroupDriver", "cgroupfs") if isinstance(data, dict) else None
    return (driver if isinstance(driver, str) else None), str(path)
