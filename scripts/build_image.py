#!/usr/bin/env python3
"""Build gpuready's container image from Debian's packages and the PyPI wheels of the bundle.

One command, on Debian 12 or newer (apt-get install mmdebstrap umoci), as root or where
unprivileged user namespaces are allowed (mmdebstrap's unshare mode), with a Python that has pip
(the quick start's .venv):

    sudo .venv/bin/python scripts/build_image.py    # writes dist/image-<version>/
    sudo ctr -n k8s.io image import dist/image-<version>/gpuready.oci.tar

The image is two layers, pulled from no container registry:

    1. the base: Debian 12 (mmdebstrap's minbase variant, merged /usr, no manuals, no
       translations, documentation only its copyright files) with python3 and python3-venv;
       also written alone as base.oci.tar, the base the Containerfile in deploy/image/ builds on
       (buildah build --from oci-archive:.../base.oci.tar).
    2. /opt/gpuready: the offline bundle's install.sh run inside that Debian (a virtual
       environment, the bundle's wheels alone, no index), then pip and setuptools removed from
       it: no compiler, no pip, no pip cache.

Its entrypoint is /opt/gpuready/bin/gpuready, so the image runs any gpuready command given as
its arguments. Debian 12's own python3-grpcio, python3-protobuf and python3-tomlkit are older than
gpuready needs; the wheels come from the bundle (scripts/build_bundle.py for Debian 12's CPython
3.11 on this machine's architecture, from PyPI through your pip configuration) or from a bundle
built earlier (--bundle DIR). With --bundle and --source naming a Debian mirror you can reach
(a local mirror, a proxy), the build reaches nothing else.

A failure ends the run with one line on stderr and a non-zero exit status: 1 for a failed build,
2 for bad input (a missing tool, a bundle without the wheels), 3 when a package source was not
reached.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

# this script's folder is on sys.path when it runs: the bundle builder is a sibling
from build_bundle import BundleError, human_size, project_version

REPO = Path(__file__).resolve().parent.parent
BUNDLE_SCRIPT = REPO / "scripts" / "build_bundle.py"
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_UNREACHABLE = 3

SUITE = "bookworm"  # Debian 12
DEBIAN_PYTHON = "3.11"  # bookworm's python3 is CPython 3.11 (packages.debian.org/bookworm/python3)
SOURCES = (  # what debian:12-slim's /etc/apt/sources.list.d/debian.sources names
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
PACKAGES = ("python3", "python3-venv")  # python3-venv: the bundle's install.sh makes a venv
# Debian's architecture name -> (the bundle's name for it, OCI's name for it)
ARCHITECTURES = {"amd64": ("x86_64", "amd64"), "arm64": ("aarch64", "arm64")}
VENV = "/opt/gpuready"
IMAGE_PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Left out of the base as debian:12-slim leaves them out (and from what apt installs later on,
# since mmdebstrap keeps them in /etc/dpkg/dpkg.cfg.d/99mmdebstrap).
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)
# Without it, mmdebstrap installs Debian 12's usrmerge package, which pulls in the whole of perl
# (mmdebstrap(1), --merged-usr): this hook makes the /usr symlinks as debootstrap does.
MERGED_USR_HOOKS = Path("/usr/share/mmdebstrap/hooks/merged-usr")
# What apt prints when a source cannot be reached.
UNREACHABLE_MARKERS = (
    "Temporary failure resolving",
    "Could not resolve",
    "Could not connect",
    "Unable to connect",
    "Connection timed out",
    "Network is unreachable",
    "Connection refused",
)
TOOLS = {"mmdebstrap": "mmdebstrap", "umoci": "umoci"}  # program -> its Debian package


# A failure the user can act on, reported as one line without a traceback: the bundle's own
# (its project_version raises it too).
ImageError = BundleError


def run(args: list[str], what: str, *, verbose: bool) -> str:
    """Run one build step; its output is shown with --verbose, its last error line otherwise."""
    captured = []
    try:
        with subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, errors="replace",
        ) as process:
            for line in process.stdout:
                captured.append(line)
                if verbose:
                    sys.stdout.write(line)
                    sys.stdout.flush()
            returncode = process.wait()
    except OSError as error:
        raise ImageError(f"{what}: cannot run {args[0]}: {error.strerror}") from None
    output = "".join(captured)
    if returncode == 0:
        return output
    hint = "" if verbose else " (run again with --verbose for its output)"
    if any(marker in output for marker in UNREACHABLE_MARKERS):
        raise ImageError(
            f"{what}: a package source was not reached; name one you can reach with "
            f"--source{hint}",
            EXIT_UNREACHABLE,
        )
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("E:", "ERROR:", "install.sh:"))]
    reason = (errors or lines or [f"exit status {returncode}"])[-1]
    raise ImageError(f"{what}: {reason}{hint}")


def check_tools() -> None:
    """Every program the build runs is installed; otherwise name the Debian packages."""
    missing = sorted({package for tool, package in TOOLS.items() if not shutil.which(tool)})
    if missing:
        raise ImageError(
            f"{', '.join(missing)} not found: apt-get install {' '.join(missing)}", EXIT_INPUT
        )
    if not MERGED_USR_HOOKS.is_dir():
        raise ImageError(f"{MERGED_USR_HOOKS} not found: mmdebstrap 1.0 or newer needed",
                         EXIT_INPUT)


def debian_architecture() -> str:
    """This machine's Debian architecture, if the bundle has wheels for it."""
    if not shutil.which("dpkg"):
        raise ImageError("dpkg not found: the image is built on Debian or Ubuntu", EXIT_INPUT)
    answer = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                            check=False)
    architecture = answer.stdout.strip()
    if architecture not in ARCHITECTURES:
        raise ImageError(
            f"no wheels for this machine's architecture {architecture or '(unknown)'}; the image "
            f"is built for {' or '.join(ARCHITECTURES)}",
            EXIT_INPUT,
        )
    return architecture


def build_bundle(out: Path, arch: str, *, verbose: bool) -> Path:
    """The offline bundle for Debian 12's CPython on ARCH, built with scripts/build_bundle.py."""
    args = [sys.executable, str(BUNDLE_SCRIPT), "--python", DEBIAN_PYTHON, "--platform", arch,
            "--out", str(out)]
    if verbose:
        args.append("--verbose")
    answer = subprocess.run(args, capture_output=not verbose, text=True, check=False)
    if answer.returncode != 0:
        last = (answer.stderr or "").strip().splitlines()[-1:] or ["see its output above"]
        reason = last[0].removeprefix("build_bundle.py: error: ")
        raise ImageError(f"building the wheel bundle: {reason}", answer.returncode)
    return out


def bundle_version(bundle: Path, arch: str) -> str:
    """gpuready's version in BUNDLE, after checking it holds Debian 12's wheels for ARCH."""
    wheels = [path.name for path in (bundle / "wheels").glob("*.whl")]
    if not (bundle / "install.sh").is_file() or not wheels:
        raise ImageError(f"--bundle {bundle}: not a bundle (no install.sh or no wheels/)",
                         EXIT_INPUT)
    abi = "cp" + DEBIAN_PYTHON.replace(".", "")
    if not any(name.startswith("grpcio-") and f"-{abi}-" in name and arch in name
               for name in wheels):
        raise ImageError(
            f"--bundle {bundle} holds no wheels for CPython {DEBIAN_PYTHON} on {arch} "
            f"(Debian 12's python3); build one with scripts/build_bundle.py --python "
            f"{DEBIAN_PYTHON} --platform {arch}",
            EXIT_INPUT,
        )
    found = [re.match(r"gpuready-([^-]+)-", name) for name in wheels]
    versions = sorted({match.group(1) for match in found if match})
    if len(versions) != 1:
        raise ImageError(f"--bundle {bundle}: expected one gpuready wheel, found {len(versions)}",
                         EXIT_INPUT)
    return versions[0]


def mmdebstrap_command(
    bundle: Path, base_tar: Path, layer_tar: Path, sources: list[str]
) -> list[str]:
    """mmdebstrap: the base into BASE_TAR, gpuready's venv (built inside it) into LAYER_TAR."""
    inside = "/tmp/gpuready-bundle"
    venv_python = f"{VENV}/bin/python"
    hooks = [
        f'mkdir "$1{inside}"',
        f"sync-in {bundle} {inside}",
        f'chroot "$1" sh {inside}/install.sh {VENV}',
        # The venv keeps no installer: the image is not a place to install more.
        f'chroot "$1" {venv_python} -m pip uninstall --yes --disable-pip-version-check '
        "pip setuptools",
        f'rm -rf "$1{inside}" "$1/root/.cache"',
        # The second layer: the venv alone, as root's files.
        f'tar --create --file {shlex.quote(str(layer_tar))} --directory "$1" --sort=name '
        f"--numeric-owner --owner=0 --group=0 {VENV.lstrip('/')}",
        f'rm -rf "$1{VENV}"',
    ]
    return [
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        f"--hook-dir={MERGED_USR_HOOKS}",
        *(f"--dpkgopt={option}" for option in DPKG_EXCLUDES),
        "--skip=output/dev",  # the container runtime makes /dev; a layer holds no device nodes
        *(f"--customize-hook={hook}" for hook in hooks),
        SUITE,
        str(base_tar),
        *sources,
    ]


def umoci_build(layout: Path, base_tar: Path, layer_tar: Path, oci_arch: str, version: str,
                *, verbose: bool) -> None:
    """An OCI layout with two tags: ``base`` (the Debian layer) and ``gpuready`` (both layers)."""
    labels = {
        "org.opencontainers.image.title": "gpuready",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.description": (
            "Registers the NVIDIA container runtime with containerd and proves it correct"
        ),
    }
    steps = [
        ["init", "--layout", str(layout)],
        ["new", "--image", f"{layout}:base"],
        ["config", "--image", f"{layout}:base", "--os", "linux", "--architecture", oci_arch,
         "--config.env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
         "--config.cmd", "/bin/bash"],
        ["raw", "add-layer", "--image", f"{layout}:base", "--history.created_by",
         f"mmdebstrap --variant=minbase --include={','.join(PACKAGES)} {SUITE}", str(base_tar)],
        ["raw", "add-layer", "--image", f"{layout}:base", "--tag", "gpuready",
         "--history.created_by", f"install.sh {VENV} (gpuready {version}'s offline bundle)",
         str(layer_tar)],
        ["config", "--image", f"{layout}:gpuready", "--config.env", f"PATH={IMAGE_PATH}",
         "--clear=config.cmd", "--config.entrypoint", f"{VENV}/bin/gpuready",
         *(arg for key, value in labels.items() for arg in ("--config.label", f"{key}={value}"))],
        ["gc", "--layout", str(layout)],
    ]
    for step in steps:
        run(["umoci", *step], f"umoci {step[0]}", verbose=verbose)


def blob_path(layout: Path, digest: str) -> Path:
    """Where an OCI layout keeps the blob DIGEST."""
    algorithm, _, hexdigest = digest.partition(":")
    return layout / "blobs" / algorithm / hexdigest


def write_archive(layout: Path, tag: str, name: str, oci_arch: str, archive: Path) -> str:
    """One tag of LAYOUT as an OCI archive that ``ctr image import`` names NAME.

    ``ctr image import`` (containerd 1.6) takes the name from the ``io.containerd.image.name``
    annotation; from ``org.opencontainers.image.ref.name`` alone, the bare tag umoci writes, it
    names the image ``import-<date>:<tag>``. The index names it both ways. Returns the manifest's
    digest.
    """
    index = json.loads((layout / "index.json").read_text())
    (entry,) = [m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    manifest = json.loads(blob_path(layout, entry["digest"]).read_bytes())
    digests = [entry["digest"], manifest["config"]["digest"],
               *(layer["digest"] for layer in manifest["layers"])]
    descriptor = {
        "mediaType": entry["mediaType"],
        "digest": entry["digest"],
        "size": entry["size"],
        "annotations": {
            "io.containerd.image.name": name,
            "org.opencontainers.image.ref.name": name.rpartition(":")[2],
        },
        "platform": {"architecture": oci_arch, "os": "linux"},
    }
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(
            {"schemaVersion": 2, "manifests": [descriptor]}, indent=2
        ).encode(),
    }
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        for member, data in files.items():
            add_bytes(tar, member, data)
        for digest in sorted(set(digests)):
            path = blob_path(layout, digest)
            tar.add(path, arcname=str(path.relative_to(layout)), filter=as_root)
    os.replace(partial, archive)
    return entry["digest"]


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """Add DATA to TAR as the file NAME, root's and readable by all."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """An archive member as root's, readable by all, without this build's time."""
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def prepare_out(out: Path) -> None:
    """An empty folder for the archives; replaces an earlier build, never anything else."""
    if out.exists():
        if not out.is_dir():
            raise ImageError(f"--out {out} is a file, not a folder", EXIT_INPUT)
        entries = {entry.name for entry in out.iterdir()}
        if not entries <= {"gpuready.oci.tar", "base.oci.tar", "SHA256SUMS"}:
            raise ImageError(f"--out {out} holds other files than an image; name another folder",
                             EXIT_INPUT)
        shutil.rmtree(out)
    out.mkdir(parents=True)


def parse_args(argv: list[str] | None, version: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="build_image.py",
        description=(
            "Build gpuready's container image as an OCI archive that 'ctr image import' loads: "
            "Debian 12 with python3 from Debian's packages (mmdebstrap), gpuready and its "
            "dependencies from the offline bundle's wheels, assembled with umoci."
        ),
        epilog=(
            "example: python3 scripts/build_image.py\n"
            "then:    ctr -n k8s.io image import dist/image-VERSION/gpuready.oci.tar\n"
            "offline: python3 scripts/build_image.py --bundle DIR "
            "--source 'deb http://mirror.example/debian bookworm main'"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", default=REPO / "dist" / f"image-{version}",
        help=f"folder for gpuready.oci.tar and base.oci.tar (default: dist/image-{version})",
    )
    parser.add_argument(
        "--name", metavar="REF", help="the image's name in the archive (default: "
        "localhost/gpuready:VERSION; the base is localhost/gpuready-base:VERSION)",
    )
    parser.add_argument(
        "--bundle", type=Path, metavar="DIR",
        help="an offline bundle built earlier (scripts/build_bundle.py --python 3.11); "
        "default: build one from PyPI",
    )
    parser.add_argument(
        "--source", action="append", metavar="LINE",
        help="an apt source in one-line form, repeatable (default: deb.debian.org's bookworm, "
        "bookworm-updates and bookworm-security)",
    )
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show the output of pip, mmdebstrap and umoci")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    options = parse_args(argv, project_version(REPO / "pyproject.toml"))
    debian_arch = debian_architecture()
    arch, oci_arch = ARCHITECTURES[debian_arch]
    if options.bundle:
        bundle_version(options.bundle, arch)  # a bad bundle is refused before anything runs
    check_tools()
    out = options.out.resolve()
    prepare_out(out)
    with tempfile.TemporaryDirectory(prefix="gpuready-image-") as scratch:
        work = Path(scratch)
        if options.bundle:
            bundle = options.bundle.resolve()
        else:
            print(f"[1/3] the wheels: CPython {DEBIAN_PYTHON} on {arch}, from PyPI", flush=True)
            bundle = build_bundle(work / "bundle", arch, verbose=options.verbose)
        version = bundle_version(bundle, arch)
        name = options.name or f"localhost/gpuready:{version}"
        base_tar, layer_tar = work / "base.tar", work / "gpuready.tar"
        print(f"[2/3] Debian 12 with {', '.join(PACKAGES)} (mmdebstrap), gpuready {version} "
              f"installed from the bundle", flush=True)
        run(mmdebstrap_command(bundle, base_tar, layer_tar, options.source or list(SOURCES)),
            "mmdebstrap", verbose=options.verbose)
        print("[3/3] the OCI image (umoci)", flush=True)
        layout = work / "layout"
        umoci_build(layout, base_tar, layer_tar, oci_arch, version, verbose=options.verbose)
        base_name = f"{name.rpartition(':')[0] or name}-base:{version}"
        write_archive(layout, "base", base_name, oci_arch, out / "base.oci.tar")
        write_archive(layout, "gpuready", name, oci_arch, out / "gpuready.oci.tar")
    sums = "".join(
        f"{hashlib.sha256((out / file).read_bytes()).hexdigest()}  {file}\n"
        for file in ("gpuready.oci.tar", "base.oci.tar")
    )
    (out / "SHA256SUMS").write_text(sums, encoding="utf-8")
    image = out / "gpuready.oci.tar"
    print(f"image: {image} ({name}, {human_size(image.stat().st_size)})")
    print(f"base:  {out / 'base.oci.tar'} ({base_name}, the Containerfile's base)")
    print(f"load:  ctr -n k8s.io image import {image}")
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


def entrypoint() -> int:
    try:
        return main()
    except ImageError as error:
        print(f"build_image.py: error: {error}", file=sys.stderr)
        return error.code
    except OSError as error:
        print(f"build_image.py: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("build_image.py: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(entrypoint())
