#!/usr/bin/env python3
"""Build an offline install bundle of gpuready for air-gapped GPU nodes.

Run on a machine that can reach the package registries (Python 3.9 or newer, no third-party
packages needed):

    python3 scripts/build_bundle.py             # every target, into dist/gpuready-bundle-<version>
    python3 scripts/build_bundle.py --python 3.9 --platform x86_64 --out /tmp/bundle --tar

The bundle holds the wheels gpuready needs on CPython 3.9, 3.10, 3.11, 3.12 and 3.13, on x86_64
and aarch64 Linux (manylinux wheels, glibc 2.28 or older, so RHEL 8 and newer), or on the targets
chosen with --python and --platform (both repeatable):

    wheels/      gpuready's own wheel and every dependency, for each target
    SHA256SUMS   the checksum of every wheel
    install.sh   installs from wheels/ alone: sh install.sh [VENV_DIR] (default /opt/gpuready)

Copy the folder (or the .tar.gz that --tar writes beside it) to the node and run install.sh, or
install by hand:

    python3 -m venv /opt/gpuready && /opt/gpuready/bin/pip install \\
        --no-index --find-links ./gpuready-bundle-<version>/wheels gpuready

The wheels come through pip with this machine's pip configuration and PIP_* variables, so a
mirror or proxy configured for you is used; the bundle itself needs neither. A target that
cannot be resolved, or a registry that cannot be reached, ends the run with one line on stderr
and a non-zero exit status: 1 for a failed build or download, 3 when the registry was not
reached.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
ARCHES = ("x86_64", "aarch64")
NEWEST_GLIBC = 28  # manylinux_2_28 at most: glibc 2.28 is RHEL 8's, so the bundle runs there
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3
# What pip prints when it cannot reach an index (requests/urllib3 and socket errors).
UNREACHABLE_MARKERS = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ProxyError",
    "Failed to establish a new connection",
)


class BundleError(Exception):
    """A failure the user can act on; reported as one line, without a traceback."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def project_version(pyproject: Path) -> str:
    """The [project] version of pyproject.toml, read without a TOML library (Python 3.9)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError as error:
        raise BundleError(f"cannot read {pyproject}: {error.strerror}") from None
    section = re.search(r"^\[project\][ \t]*\n(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    found = section and re.search(
        r"""^version\s*=\s*(?:"([^"]+)"|'([^']+)')""", section.group(1), re.MULTILINE
    )
    if not found:
        raise BundleError(f"no version in the [project] table of {pyproject}")
    return found.group(1) or found.group(2)


def platform_tags(arch: str) -> list[str]:
    """The manylinux tags pip may take for ARCH, most compatible first.

    pip prefers the earliest tag it was given among the files of one release, so the wheel for
    the oldest glibc is taken whenever a release has several; nothing newer than glibc 2.28.
    """
    tags = ["manylinux2014", "manylinux_2_17"]
    if arch == "x86_64":  # aarch64 wheels start at manylinux2014
        tags += ["manylinux2010", "manylinux_2_12", "manylinux1", "manylinux_2_5"]
    tags += [f"manylinux_2_{minor}" for minor in range(18, NEWEST_GLIBC + 1)]
    return [f"{tag}_{arch}" for tag in tags]


def pip_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def run_pip(args: list[str], what: str, verbose: bool) -> None:
    """Run pip with the user's environment; turn a failure into one clear line."""
    captured = []
    try:
        with subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        ) as process:
            for line in process.stdout:
                captured.append(line)
                if verbose:
                    sys.stdout.write(line)
                    sys.stdout.flush()
            returncode = process.wait()
    except OSError as error:
        raise BundleError(f"{what}: cannot run {args[0]}: {error.strerror}") from None
    if returncode == 0:
        return
    output = "".join(captured)
    if "No module named pip" in output or "No module named 'pip'" in output:
        raise BundleError(f"{what}: pip is not installed for {sys.executable}")
    hint = "" if verbose else " (run again with --verbose for pip's output)"
    if any(marker in output for marker in UNREACHABLE_MARKERS):
        raise BundleError(
            f"{what}: cannot reach the package registry; run this where the registry is "
            f"reachable{hint}",
            EXIT_UNREACHABLE,
        )
    # The last "ERROR:" line says why, also when it comes from pip's build subprocess.
    lines = [line.strip(" |│╰─>") for line in output.splitlines()]
    errors = [line[len("ERROR:"):].strip() for line in lines if line.startswith("ERROR:")]
    reason = errors[-1] if errors else f"pip exited with status {returncode}"
    raise BundleError(f"{what}: {reason}{hint}")


def build_own_wheel(wheels: Path, version: str, verbose: bool) -> Path:
    """Build gpuready's wheel from a copy of the project, so the tree gets no build/ folder."""
    with tempfile.TemporaryDirectory(prefix="gpuready-wheel-") as scratch:
        source = Path(scratch) / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "setup.py", "setup.cfg", "MANIFEST.in"):
            if (REPO / name).is_file():
                shutil.copy2(REPO / name, source / name)
        for license_file in REPO.glob("LICEN[CS]E*"):
            shutil.copy2(license_file, source / license_file.name)
        shutil.copytree(
            REPO / "src",
            source / "src",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
        )
        built = Path(scratch) / "wheel"
        run_pip(
            pip_command("wheel", "--no-deps", "--wheel-dir", str(built), str(source)),
            "building gpuready's wheel",
            verbose,
        )
        found = sorted(built.glob(f"gpuready-{version}-*.whl"))
        if not found:
            raise BundleError(f"building gpuready's wheel: pip made no gpuready-{version} wheel")
        target = wheels / found[0].name
        shutil.copy2(found[0], target)
        return target


# pip download takes the target's tags from --python-version and --platform but evaluates
# environment markers (tomli; python_version < "3.11") against the Python running it
# (pypa/pip#11198). This runs pip with the marker environment of the target instead, and
# refuses to run if that cannot be checked.
MARKER_BOOTSTRAP = """\
import json, sys
target = json.loads(sys.argv[1])
try:
    from pip._vendor.packaging import markers
    from pip._internal.cli.main import main
except ImportError as error:
    sys.exit("ERROR: this pip cannot evaluate markers for another Python (%s); upgrade pip" % error)
host = markers.default_environment
def default_environment():
    environment = host()
    environment.update(target)
    return environment
markers.default_environment = default_environment
probe = 'python_version == "%(python_version)s" and platform_machine == "%(platform_machine)s"'
if not markers.Marker(probe % target).evaluate():
    sys.exit("ERROR: this pip cannot evaluate markers for another Python; upgrade pip")
sys.argv = ["pip"] + sys.argv[2:]
sys.exit(main(sys.argv[1:]))
"""


def target_pip_command(python: str, arch: str, *args: str) -> list[str]:
    """pip, evaluating markers as CPython PYTHON on ARCH Linux would."""
    environment = {
        "python_version": python,
        "python_full_version": python + ".0",
        "implementation_name": "cpython",
        "implementation_version": python + ".0",
        "platform_python_implementation": "CPython",
        "platform_machine": arch,
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
    }
    return [
        sys.executable, "-c", MARKER_BOOTSTRAP, json.dumps(environment),
        "--disable-pip-version-check", *args,
    ]


def download_target(own_wheel: Path, wheels: Path, python: str, arch: str, verbose: bool) -> None:
    """Put the wheels for one (CPython version, architecture) into WHEELS."""
    abi = "cp" + python.replace(".", "")
    args = [
        "download",
        "--only-binary=:all:",
        "--implementation", "cp",
        "--python-version", python,
        "--abi", abi,
    ]
    for tag in platform_tags(arch):
        args += ["--platform", tag]
    args += ["--dest", str(wheels), str(own_wheel)]
    what = f"pip download for CPython {python} on {arch}"
    run_pip(target_pip_command(python, arch, *args), what, verbose)


def glibc_needed(wheel_name: str) -> tuple[int, int]:
    """The oldest glibc one wheel runs on: (0, 0) for a pure-Python wheel."""
    platforms = wheel_name[: -len(".whl")].split("-")[-1].split(".")
    needed = []
    for tag in platforms:
        legacy = LEGACY_MANYLINUX.get(tag.split("_")[0])
        found = re.match(r"manylinux_(\d+)_(\d+)_", tag)
        if legacy:
            needed.append(legacy)
        elif found:
            needed.append((int(found.group(1)), int(found.group(2))))
    return min(needed) if needed else (0, 0)


INSTALL_SH = """\
#!/bin/sh
# Install gpuready {version} from this bundle alone: no index, no network.
#   sh install.sh [VENV_DIR]    (default /opt/gpuready)
# PYTHON=/path/to/python3 picks the interpreter (default: python3 on PATH).
# Bundled for CPython {pythons} on {arches} Linux, glibc {glibc} or newer.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TARGET=${{1:-/opt/gpuready}}
PYTHON=${{PYTHON:-python3}}
fail() {{ echo "install.sh: $*" >&2; exit 1; }}

command -v "$PYTHON" >/dev/null 2>&1 || fail "$PYTHON not found; set PYTHON=/path/to/python3"
command -v sha256sum >/dev/null 2>&1 || fail "sha256sum not found (coreutils)"
if ! sums=$(cd "$HERE" && sha256sum -c SHA256SUMS 2>&1); then
    printf '%s\\n' "$sums" | grep -v ': OK$' >&2
    fail "the bundle's wheels do not match SHA256SUMS; copy the bundle again"
fi
"$PYTHON" -c '
import platform, sys
pythons, arches = "{pythons}".split(", "), "{arches}".split(", ")
here = "%d.%d" % sys.version_info[:2]
arch = {{"amd64": "x86_64", "arm64": "aarch64"}}.get(platform.machine().lower(), platform.machine())
held = "install.sh: this bundle holds wheels for "
if sys.implementation.name != "cpython" or here not in pythons:
    sys.exit(held + "CPython " + ", ".join(pythons) + ", not Python " + here + " ("
             + sys.executable + "); name another with PYTHON=/path/to/python3")
if arch not in arches:
    sys.exit(held + ", ".join(arches) + ", not " + arch)
' || exit 1
"$PYTHON" -m venv "$TARGET" \\
    || fail "cannot create the virtual environment $TARGET (Debian/Ubuntu: python3-venv)"
# Neither the node's pip configuration nor PIP_* variables apply: only this bundle's wheels.
PIP_CONFIG_FILE=/dev/null "$TARGET/bin/python" -m pip install --isolated \\
    --disable-pip-version-check --no-index --find-links "$HERE/wheels" "gpuready=={version}" \\
    || fail "pip could not install gpuready from $HERE/wheels"
echo "gpuready {version} installed: $TARGET/bin/gpuready"
"""


def write_bundle_files(out: Path, version: str, pythons: list[str], arches: list[str]) -> str:
    """Write SHA256SUMS and install.sh; return the glibc the bundle needs, as text."""
    wheels = sorted((out / "wheels").glob("*.whl"))
    lines = []
    for wheel in wheels:
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{digest}  wheels/{wheel.name}\n")
    (out / "SHA256SUMS").write_text("".join(lines), encoding="utf-8")
    major, minor = max((glibc_needed(wheel.name) for wheel in wheels), default=(0, 0))
    glibc = f"{major}.{minor}" if major else "any"
    script = out / "install.sh"
    script.write_text(
        INSTALL_SH.format(
            version=version, pythons=", ".join(pythons), arches=", ".join(arches), glibc=glibc
        ),
        encoding="utf-8",
    )
    script.chmod(0o755)
    return glibc


def prepare_out(out: Path) -> None:
    """Start from an empty folder; replace an earlier bundle, never anything else."""
    if out.exists():
        if not out.is_dir():
            raise BundleError(f"--out {out} is a file, not a folder")
        entries = {entry.name for entry in out.iterdir()}
        if entries and not entries <= {"wheels", "SHA256SUMS", "install.sh"}:
            raise BundleError(f"--out {out} holds other files than a bundle; name another folder")
        shutil.rmtree(out)
    (out / "wheels").mkdir(parents=True)


def write_tar(out: Path) -> Path:
    archive = out.with_name(out.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    return archive


def human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def parse_args(argv: list[str] | None, version: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="build_bundle.py",
        description=(
            "Build an offline install bundle of gpuready: its wheel and every dependency for "
            "each (CPython version, Linux architecture), SHA256SUMS and install.sh."
        ),
        epilog=(
            "example: python3 scripts/build_bundle.py --python 3.9 --platform x86_64 --tar\n"
            "on the node: sh gpuready-bundle-VERSION/install.sh [/opt/gpuready]"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        default=REPO / "dist" / f"gpuready-bundle-{version}",
        help=f"bundle folder (default: dist/gpuready-bundle-{version} in the project)",
    )
    parser.add_argument(
        "--python",
        action="append",
        choices=PYTHONS,
        metavar="X.Y",
        help=f"CPython version of the nodes, repeatable (default: all of {', '.join(PYTHONS)})",
    )
    parser.add_argument(
        "--platform",
        action="append",
        choices=ARCHES,
        help="Linux architecture of the nodes, repeatable (default: both)",
    )
    parser.add_argument(
        "--tar", action="store_true", help="also write DIR.tar.gz beside the bundle folder"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show pip's output")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    version = project_version(REPO / "pyproject.toml")
    options = parse_args(argv, version)
    pythons = [p for p in PYTHONS if p in (options.python or PYTHONS)]
    arches = [a for a in ARCHES if a in (options.platform or ARCHES)]
    out = options.out.resolve()
    prepare_out(out)
    wheels = out / "wheels"

    print(f"building gpuready {version}'s wheel", flush=True)
    own_wheel = build_own_wheel(wheels, version, options.verbose)
    targets = [(python, arch) for python in pythons for arch in arches]
    for number, (python, arch) in enumerate(targets, 1):
        print(f"[{number}/{len(targets)}] CPython {python} on {arch}", flush=True)
        download_target(own_wheel, wheels, python, arch, options.verbose)

    glibc = write_bundle_files(out, version, pythons, arches)
    files = sorted(wheels.glob("*.whl"))
    size = sum(path.stat().st_size for path in files)
    print(f"bundle: {out} ({len(files)} wheels, {human_size(size)}, glibc {glibc} or newer)")
    if options.tar:
        archive = write_tar(out)
        print(f"archive: {archive} ({human_size(archive.stat().st_size)})")
    print(f"on the node: sh {out.name}/install.sh [/opt/gpuready]")
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


def entrypoint() -> int:
    try:
        return main()
    except BundleError as error:
        print(f"build_bundle.py: error: {error}", file=sys.stderr)
        return error.code
    except OSError as error:
        print(f"build_bundle.py: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("build_bundle.py: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(entrypoint())
