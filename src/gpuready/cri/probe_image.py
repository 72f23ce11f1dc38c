"""A tiny pause image built on the node, for probing an air-gapped containerd.

The CRI starts every pod sandbox from the pause image named in containerd's config
(``sandbox_image``); a node that cannot pull it cannot start any pod. With
``gpuready verify --live --probe --probe-image build`` gpuready writes an OCI image archive whose
only file is a static binary already on the node (Debian's ``busybox-static`` gives
``/bin/busybox``), tags it with the configured pause image name, and imports it with
``ctr --address SOCKET -n k8s.io images import`` so the probe runs offline.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import shutil
import struct
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from gpuready.errors import InputError, UsageError

DEFAULT_STATIC_BINARY = Path("/bin/busybox")
CRI_NAMESPACE = "k8s.io"
IMPORT_TIMEOUT = 120.0

# A pause stand-in: PID 1 that exits on SIGTERM and reaps children (the shell's wait does).
PAUSE_SCRIPT = "trap 'exit 0' TERM INT; while :; do /bin/busybox sleep 3600 & wait $!; done"

_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_PT_INTERP = 3


@dataclass(frozen=True)
class BuiltImage:
    """An image archive on disk and the name it will have once imported."""

    name: str
    archive: Path
    manifest_digest: str


def is_static_elf(path: Path) -> bool:
    """True for an ELF executable without a program interpreter (statically linked)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(path, error.strerror or str(error)) from None
    if data[:4] != b"\x7fELF":
        return False
    is_64 = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    if is_64:
        (phoff,) = struct.unpack_from(order + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(order + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x2A)
    for index in range(phnum):
        (p_type,) = struct.unpack_from(order + "I", data, phoff + index * phentsize)
        if p_type == _PT_INTERP:
            return False
    return True


def image_architecture() -> str:
    """This machine's architecture as OCI platforms spell it."""
    machine = platform.machine().lower()
    return _GOARCH.get(machine, machine)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add_file(archive: tarfile.TarFile, name: str, data: bytes, *, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    archive.addfile(info, io.BytesIO(data))


def _add_dir(archive: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = 0
    archive.addfile(info)


def layer_bytes(binary: Path) -> bytes:
    """An uncompressed layer tar holding ``/bin/busybox`` and the usual empty mount points."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for folder in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            _add_dir(layer, folder)
        _add_file(layer, "bin/busybox", binary.read_bytes(), mode=0o755)
    return buffer.getvalue()


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def build_archive(binary: Path, name: str, destination: Path) -> BuiltImage:
    """Write an OCI image-layout tar at ``destination`` whose image is called ``name``."""
    if not binary.is_file():
        raise InputError(
            binary, "no such file (install a static binary: apt-get install busybox-static)"
        )
    if not is_static_elf(binary):
        raise InputError(binary, "not a statically linked executable (use busybox-static)")
    arch = image_architecture()
    layer = layer_bytes(binary)
    config = _json_bytes(
        {
            "architecture": arch,
            "os": "linux",
            "config": {"Entrypoint": ["/bin/busybox", "sh", "-c", PAUSE_SCRIPT]},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        }
    )
    manifest = _json_bytes(
        {
            "schemaVersion": 2,
            "mediaType": _OCI_MANIFEST,
            "config": {"mediaType": _OCI_CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": _OCI_LAYER, "digest": _digest(layer), "size": len(layer)}],
        }
    )
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = _json_bytes(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": _OCI_MANIFEST,
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": arch, "os": "linux"},
                    # ctr names the imported image after this annotation.
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
    )
    with tarfile.open(destination, mode="w", format=tarfile.PAX_FORMAT) as archive:
        _add_file(archive, "oci-layout", _json_bytes({"imageLayoutVersion": "1.0.0"}))
        _add_dir(archive, "blobs")
        _add_dir(archive, "blobs/sha256")
        for blob in (layer, config, manifest):
            _add_file(archive, f"blobs/sha256/{_digest(blob).split(':', 1)[1]}", blob)
        _add_file(archive, "index.json", index)
    return BuiltImage(name=name, archive=destination, manifest_digest=_digest(manifest))


def import_command(archive: Path, *, socket: Path, ctr: str = "ctr") -> list[str]:
    """The ``ctr`` command line that imports ``archive`` into the CRI's image namespace."""
    return [ctr, "-a", str(socket), "-n", CRI_NAMESPACE, "images", "import", str(archive)]


def import_archive(archive: Path, *, socket: Path) -> None:
    """Import an image archive with ``ctr`` into the ``k8s.io`` namespace (what the CRI sees)."""
    ctr = shutil.which("ctr")
    if ctr is None:
        raise UsageError(
            "ctr not found on PATH; it comes with containerd (apt-get install containerd)"
        )
    command = import_command(archive, socket=socket, ctr=ctr)
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=IMPORT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"{' '.join(command)}: no result within {IMPORT_TIMEOUT:g}s") from None
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"{' '.join(command)} failed: {last[0]}")
