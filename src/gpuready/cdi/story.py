"""The CDI story of a node: which spec file each NVIDIA device comes from, and whether it is read.

It reuses what ``gpuready cdi list`` resolves (:func:`gpuready.cdi.validate.scan`: the CDI
cache's rules) and adds what a person asks next:

- **shadowed**: a device of an earlier directory's file is taken from a later directory's file.
  The loader reads the directories in order (``/etc/cdi``, then ``/var/run/cdi``) and the later
  one wins, so a spec gpuready writes to ``/etc/cdi/nvidia.yaml`` is silently overridden by
  ``/var/run/cdi/nvidia.yaml`` (what ``nvidia-cdi-refresh`` and the GPU Operator write);
- **conflicting**: the same device in two files of one directory. Surprisingly, the loader does
  not pick one: it drops the device from both, and it stays dropped even when a later directory
  defines it again;
- **read at all**: whether the engine resolves CDI devices (:func:`containerd_reader`).

NVIDIA kinds are those whose vendor is ``nvidia.com`` or ends with ``.nvidia.com``
(``nvidia.com/gpu``, the GPU Operator's ``management.nvidia.com/gpu``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from gpuready.cdi.validate import RULE_CONFLICT, Scan, SpecFile, scan
from gpuready.node import Node
from gpuready.paths import CDI_DIRS
from gpuready.problems import Severity
from gpuready.records import Factory, MutableRecord, Record


def is_nvidia_kind(kind: str) -> bool:
    """True for ``nvidia.com/gpu``, ``management.nvidia.com/gpu`` and other NVIDIA kinds."""
    vendor = kind.partition("/")[0]
    return vendor == "nvidia.com" or vendor.endswith(".nvidia.com")


def _kind_of(device: str) -> str:
    return device.partition("=")[0]


class Shadowed(MutableRecord):
    """A spec file whose devices (some or all) are taken from files of a later directory."""

    spec: SpecFile
    winners: dict[str, Path]  # device -> the file it is taken from

    @property
    def whole(self) -> bool:
        """True when none of the file's devices comes from it."""
        return set(self.winners) == set(self.spec.devices)


class Conflict(MutableRecord):
    """A device defined by two (or more) files of one directory: dropped by the loader."""

    device: str
    files: list[Path]


class Story(MutableRecord):
    """Where each device comes from, what is shadowed, what conflicts, in the scanned dirs."""

    dirs: list[Path]
    scan: Scan
    shadowed: list[Shadowed] = Factory(list)
    conflicts: list[Conflict] = Factory(list)

    def nvidia_devices(self) -> dict[str, Path]:
        """NVIDIA devices the loader resolves, with the file each comes from."""
        return {name: device.file for name, device in self.scan.devices.items()
                if is_nvidia_kind(_kind_of(name))}

    def nvidia_specs(self) -> list[SpecFile]:
        """Spec files of an NVIDIA kind that the loader reads (conflicts aside)."""
        return [spec for spec in self.scan.specs if spec.kind and is_nvidia_kind(spec.kind)
                and _readable_alone(spec)]

    def winning_specs(self) -> list[SpecFile]:
        """NVIDIA spec files at least one resolved device is taken from."""
        used = set(self.nvidia_devices().values())
        return [spec for spec in self.nvidia_specs() if spec.path in used]


def _readable_alone(spec: SpecFile) -> bool:
    """The loader accepts the file on its own: its only errors, if any, are conflicts."""
    return not any(p.severity is Severity.ERROR and p.rule != RULE_CONFLICT
                   for p in spec.problems)


def tell(found: Scan, dirs: list[Path]) -> Story:
    """The story of ``found``, a scan of ``dirs`` (host paths, in the order the loader reads)."""
    story = Story(dirs, found)
    order = {directory: index for index, directory in enumerate(dirs)}
    by_dir: dict[int, dict[str, list[Path]]] = {}
    for spec in found.specs:
        if not spec.kind or not _readable_alone(spec):
            continue
        group = by_dir.setdefault(order.get(spec.path.parent, len(order)), {})
        for device in spec.devices:
            group.setdefault(device, []).append(spec.path)
    for group in by_dir.values():
        for device, files in group.items():
            if len(files) > 1:
                story.conflicts.append(Conflict(device, files))
    for spec in found.specs:
        if not spec.kind or not _readable_alone(spec):
            continue
        winners = {device: found.devices[device].file for device in spec.devices
                   if device in found.devices and found.devices[device].file != spec.path}
        if winners:
            story.shadowed.append(Shadowed(spec, winners))
    return story


def node_story(node: Node, dirs: list[str] | None = None, *,
               found: Scan | None = None) -> Story:
    """The story of the CDI directories ``dirs`` (node paths; default ``/etc/cdi`` then
    ``/var/run/cdi``) on ``node``; ``found`` is their scan when already made."""
    host_dirs = [node.path(d) for d in (dirs or [str(d) for d in CDI_DIRS])]
    if found is None:
        found = scan(host_dirs, missing_ok=True, node=node)
    return tell(found, host_dirs)


class Reader(Record):
    """Whether containerd resolves CDI devices on this node, and from which directories.

    ``reads`` is None when it depends on a release gpuready was not told (a version 1 or 2
    file read by 1.6, 1.7 or 2.x); ``why`` says which fact decided, ``fix`` how to turn CDI on.
    """

    reads: bool | None
    why: str
    fix: str = ""
    dirs: tuple[str, ...] = tuple(str(d) for d in CDI_DIRS)
    known_release: bool = True


ENABLE_FIX = ("gpuready configure --enable-cdi (sets enable_cdi = true and cdi_spec_dirs), then "
              "restart containerd")


def containerd_reader(config: Any) -> Reader:
    """Whether the containerd of ``config`` (a :class:`gpuready.rules.context.ConfigContext`)
    reads CDI specs, from the effective-config model (:attr:`ConfigContext.loaded`: the files
    decoded over the line's recorded ``config default``).

    Recorded facts: 1.6 has no ``enable_cdi``; 1.7's default is ``enable_cdi = false``; 2.x's is
    true; each lists ``cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]``.
    """
    from gpuready.containerd.facts import lookup

    loaded = config.loaded
    line = loaded.line
    written = lookup(config.data, (*config.spec.cri_path, "enable_cdi"))
    if config.semantics.release is None and not isinstance(written, bool) \
            and config.spec.number <= 2:
        # a version 1 or 2 file without enable_cdi: 1.6 never reads CDI, 1.7 does not by
        # default, 2.x (which migrates the file) does; only the release decides
        return Reader(None, f"config version {config.spec.number} without enable_cdi: "
                      "containerd 1.6 has no CDI, 1.7 reads it only with enable_cdi = true, "
                      "2.x by default, and the release is not known (--containerd-version)",
                      ENABLE_FIX, known_release=False)
    known = config.semantics.release is not None
    if not line.line.reads_cdi:
        return Reader(False, f"{line.line} has no CDI support (CDI came in containerd 1.7)",
                      "upgrade containerd to 1.7 or later, then " + ENABLE_FIX, (), known)
    table = loaded.cri_table
    dirs = table.get("cdi_spec_dirs")
    dirs = tuple(d for d in dirs if isinstance(d, str)) if isinstance(dirs, list) else ()
    if table.get("enable_cdi") is not True:
        if isinstance(written, bool):
            why = f"enable_cdi = false in the config ({line.line})"
        else:
            why = f"{line.line} reads CDI specs only with enable_cdi = true, and its default " \
                  "is false"
        return Reader(False, why, ENABLE_FIX, dirs, known)
    return Reader(True, f"{line.line} with enable_cdi = true", "", dirs, known)


def outside(reader: Reader, file: Path, node: Node) -> bool:
    """True when the engine reads CDI but not from the directory ``file`` is in."""
    if not reader.reads:
        return False
    folder = PurePosixPath(str(node.node_path(file))).parent
    return str(folder) not in {str(PurePosixPath(d)) for d in reader.dirs}


# Docker: CDI came in 25.0 as an opt-in (``features.cdi``); 28.2 turns it on by default
# (moby/moby#49963). An explicit ``features.cdi`` decides on every release that reads it.
DOCKER_CDI_DEFAULT_SINCE = (28, 2)
DOCKER_ENABLE_FIX = ("gpuready configure --engine docker --enable-cdi (sets features.cdi = true), "
                     "then restart dockerd")


def docker_reader(daemon: dict[str, Any], release: tuple[int, int] | None) -> Reader:
    """Whether the dockerd of ``release`` (None: not known) with daemon.json data ``daemon``
    resolves CDI devices, and from which directories (``cdi-spec-dirs``, else the defaults).
    The release is read through :mod:`gpuready.engines.docker.facts`."""
    from gpuready.engines.docker.facts import CDI_FEATURE_SINCE, render_release

    features = daemon.get("features")
    written = features.get("cdi") if isinstance(features, dict) else None
    dirs = daemon.get("cdi-spec-dirs")
    dirs = (tuple(d for d in dirs if isinstance(d, str)) if isinstance(dirs, list)
            else tuple(str(d) for d in CDI_DIRS))
    if release is None:
        return Reader(None, "the Docker release is not known (--docker-version): Docker reads "
                      "CDI from 25.0 with features.cdi = true, by default from 28.2",
                      DOCKER_ENABLE_FIX, dirs, known_release=False)
    shown = render_release(release)
    if release < CDI_FEATURE_SINCE:
        return Reader(False, f"Docker {shown} has no CDI (CDI came in Docker 25.0)",
                      "upgrade Docker to 25.0 or later, then " + DOCKER_ENABLE_FIX, ())
    if written is False:
        return Reader(False, f"features.cdi = false in daemon.json (Docker {shown})",
                      DOCKER_ENABLE_FIX, dirs)
    if written is True or release >= DOCKER_CDI_DEFAULT_SINCE:
        why = "features.cdi = true" if written is True else "CDI on by default since 28.2"
        return Reader(True, f"Docker {shown}: {why}", "", dirs)
    return Reader(False, f"Docker {shown} reads CDI specs only with features.cdi = true (on by "
                  "default from 28.2)", DOCKER_ENABLE_FIX, dirs)


def crio_reader(merged: dict[str, Any]) -> Reader:
    """CRI-O always resolves CDI devices, from ``cdi_spec_dirs`` in ``[crio.runtime]`` (the
    merged crio.conf and drop-ins ``merged``), by default ``/etc/cdi`` then ``/var/run/cdi``."""
    crio = merged.get("crio")
    runtime = crio.get("runtime") if isinstance(crio, dict) else None
    dirs = runtime.get("cdi_spec_dirs") if isinstance(runtime, dict) else None
    if isinstance(dirs, list):
        return Reader(True, "CRI-O reads CDI specs from cdi_spec_dirs",
                      "", tuple(d for d in dirs if isinstance(d, str)))
    return Reader(True, "CRI-O reads CDI specs (always on)")


def engine_reader(node: Node, engine: str, *,
                  docker_release: tuple[int, int] | None = None) -> Reader:
    """The :class:`Reader` of ``engine`` (``docker`` or ``crio``) on ``node``, its config read
    through the engine's own modules."""
    if engine == "docker":
        from gpuready.engines.docker.config import load_daemon_config
        from gpuready.engines.docker.facts import DAEMON_JSON

        data = load_daemon_config(node.path(DAEMON_JSON), node=node).data
        return docker_reader(data, docker_release)
    from gpuready.engines.crio.config import merge, node_files
    from gpuready.engines.crio.facts import DROPIN_DIR, MAIN_CONFIG

    return crio_reader(merge(node_files(node.path(MAIN_CONFIG), node.path(DROPIN_DIR),
                                        node=node)))
