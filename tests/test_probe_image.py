"""The offline probe image: a valid OCI layout whose blobs match their digests."""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from gpuready.cri import probe_image
from gpuready.errors import InputError
from tests.helpers import BUSYBOX, require


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def blob(files: dict[str, bytes], digest: str) -> bytes:
    data = files[f"blobs/sha256/{digest.split(':', 1)[1]}"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def test_archive_is_a_consistent_oci_layout(tmp_path):
    require(files=(BUSYBOX,))
    built = probe_image.build_archive(BUSYBOX, "example.test/pause:7", tmp_path / "p.tar")
    files = members(built.archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "example.test/pause:7"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "7"
    assert entry["digest"] == built.manifest_digest
    manifest = json.loads(blob(files, entry["digest"]))
    config = json.loads(blob(files, manifest["config"]["digest"]))
    (layer_ref,) = manifest["layers"]
    layer = blob(files, layer_ref["digest"])
    assert config["rootfs"]["diff_ids"] == [layer_ref["digest"]]
    assert config["architecture"] == entry["platform"]["architecture"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        busybox = tar.getmember("bin/busybox")
    assert busybox.size == BUSYBOX.stat().st_size and busybox.mode & 0o111


def test_same_input_same_digest(tmp_path):
    require(files=(BUSYBOX,))
    first = probe_image.build_archive(BUSYBOX, "a/b:1", tmp_path / "1.tar")
    second = probe_image.build_archive(BUSYBOX, "a/b:1", tmp_path / "2.tar")
    assert first.manifest_digest == second.manifest_digest


def test_dynamic_binary_is_refused(tmp_path):
    python = Path(sys.executable).resolve()
    if probe_image.is_static_elf(python):
        pytest.skip(f"{python} happens to be static")
    with pytest.raises(InputError, match="not a statically linked executable"):
        probe_image.build_archive(python, "a/b:1", tmp_path / "p.tar")


def test_missing_binary_names_the_package(tmp_path):
    with pytest.raises(InputError, match="busybox-static"):
        probe_image.build_archive(tmp_path / "none", "a/b:1", tmp_path / "p.tar")
