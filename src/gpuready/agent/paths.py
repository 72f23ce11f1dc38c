"""The node paths the agent reads and writes: the DaemonSet mounts these and no others, each
at ``/host/<path>`` (``deploy/kubernetes/daemonset.yaml``; a test keeps the two the same).

Built from the tables that say where each fact lives (the owners' files, sockets and units, the
CDI folders, the driver's files, the package databases), so a new owner brings its paths here.
A path below another mount of at least its access is left out: the outer mount holds it.
"""

from __future__ import annotations

from pathlib import PurePosixPath as P

from gpuready.records import Record

FEATURES_DIR = P("/etc/kubernetes/node-feature-discovery/features.d")
FEATURE_FILE = FEATURES_DIR / "gpuready"
DBUS_SOCKET = P("/run/dbus/system_bus_socket")
HOST_ROOT = "/host"  # where the DaemonSet mounts the node


class NodeMount(Record):
    """One node path the agent uses: a folder (or, ``file``, one file), written or only read."""

    path: str
    writable: bool
    why: str
    file: bool = False


def _owner_paths() -> list[NodeMount]:
    from gpuready.owners.table import OWNERS

    found = []
    for owner in OWNERS:
        if owner.engine != "containerd":
            continue
        found.append(NodeMount(str(owner.config.parent), True, f"{owner.name}'s config"))
        for path in owner.edit_paths:
            folder = path if not path.suffix else path.parent
            found.append(NodeMount(str(folder), True, f"where gpuready writes for {owner.name}"))
        found.append(NodeMount(str(owner.socket.parent), False, f"{owner.name}'s CRI socket"))
        for marker in owner.markers:
            found.append(NodeMount(str(marker.path.parent), False,
                                   f"how {owner.name} is detected"))
        for flags in owner.kubelet_flag_files:
            found.append(NodeMount(str(flags.parent), False, "the kubelet's flags"))
    return found


def _fact_paths() -> list[NodeMount]:
    from gpuready.cdi.node import LIBRARY_DIRS
    from gpuready.init_system import SYSTEMD_RUNTIME_DIR
    from gpuready.paths import CDI_DIRS, KUBELET_CONFIG, NVIDIA_RUNTIME_BINARY

    return [
        *(NodeMount(str(folder), False, "CDI specs (reported, not written)")
          for folder in CDI_DIRS),
        NodeMount("/dev", False, "the driver's device nodes (CDI inputs)"),
        NodeMount("/proc/driver/nvidia", False, "the loaded driver (CDI inputs)"),
        NodeMount("/sys/module/nvidia", False, "the loaded driver's version (CDI inputs)"),
        *(NodeMount(folder, False, "the driver's libraries (CDI inputs)")
          for folder in LIBRARY_DIRS),
        NodeMount(str(P(NVIDIA_RUNTIME_BINARY).parent), False, "the NVIDIA runtime's binary"),
        NodeMount(str(P(KUBELET_CONFIG).parent), False, "the kubelet's config"),
        NodeMount("/var/lib/dpkg", False, "the package database (the containerd line)"),
        NodeMount("/lib/apk/db", False, "the package database (the containerd line)"),
        NodeMount(str(SYSTEMD_RUNTIME_DIR), False, "whether systemd runs the node"),
        NodeMount("/etc/machine-id", False, "the node's id in a transaction journal", file=True),
        NodeMount(str(DBUS_SOCKET.parent), False, "systemd's bus (restart method systemd)"),
        NodeMount(str(FEATURES_DIR), True, "Node Feature Discovery's local feature file"),
    ]


def _collapse(mounts: list[NodeMount]) -> tuple[NodeMount, ...]:
    """One mount per path (written wins), less those inside another of at least their access."""
    merged: dict[str, NodeMount] = {}
    for mount in mounts:
        kept = merged.get(mount.path)
        if kept is None or (mount.writable and not kept.writable):
            merged[mount.path] = mount
    def covered(mount: NodeMount) -> bool:
        return any(other.path != mount.path and not other.file
                   and P(mount.path).is_relative_to(P(other.path))
                   and (other.writable or not mount.writable) for other in merged.values())
    return tuple(sorted((m for m in merged.values() if not covered(m)), key=lambda m: m.path))


NODE_PATHS: tuple[NodeMount, ...] = _collapse(_owner_paths() + _fact_paths())
"""Every node path the agent uses, sorted: what the DaemonSet mounts at ``/host/<path>``."""


def volume_name(path: str) -> str:
    """The DaemonSet's volume name for a node path (a DNS label: 63 characters at most)."""
    import hashlib

    name = "host" + path.replace("/", "-").replace("_", "-").replace(".", "-").lower()
    if len(name) <= 63:
        return name
    return name[:54].rstrip("-") + "-" + hashlib.sha256(path.encode()).hexdigest()[:8]
