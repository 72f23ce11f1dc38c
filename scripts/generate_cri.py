#!/usr/bin/env python3
"""Regenerate gpuready's CRI client modules from src/gpuready/cri/proto/*.proto.

Usage: python3 scripts/generate_cri.py [--out DIR]

Writes ``<name>_pb2.py``, ``<name>_pb2.pyi`` and ``<name>_pb2_grpc.py`` for every ``.proto`` into
src/gpuready/cri/generated/ (or DIR). The gRPC module that protoc writes imports its message
module as a top-level name (``import cri_runtime_v1_pb2``), which only works when the folder is on
``sys.path``; this script rewrites that line into a package-relative import.

The generated code pins itself to the protobuf and grpcio versions of the generator: the message
module refuses a protobuf runtime older than the protoc that wrote it, and the gRPC module refuses
an older grpcio. So the generator is pinned (GRPC_TOOLS_VERSION below) and pyproject.toml requires
protobuf and grpcio at least as new as it.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO / "src" / "gpuready" / "cri" / "proto"
GENERATED_DIR = REPO / "src" / "gpuready" / "cri" / "generated"

# The grpcio-tools release the checked-in modules were generated with.
GRPC_TOOLS_VERSION = "1.80.0"

_TOP_LEVEL_PB2_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def check_generator_version() -> str | None:
    """A reason to refuse when the installed grpcio-tools is not the pinned one, else None."""
    try:
        installed = metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        return (
            "grpcio-tools is not installed (pip install grpcio-tools==" + GRPC_TOOLS_VERSION + ")"
        )
    if installed != GRPC_TOOLS_VERSION:
        return (
            f"grpcio-tools {installed} is installed; the CRI modules are generated with "
            f"{GRPC_TOOLS_VERSION} (pip install grpcio-tools=={GRPC_TOOLS_VERSION})"
        )
    return None


def package_relative_imports(text: str) -> str:
    """Turn protoc's ``import x_pb2 as y`` into ``from . import x_pb2 as y``."""
    return _TOP_LEVEL_PB2_IMPORT.sub(r"from . import \1 as \2", text)


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on every .proto into ``out_dir``; return the files written."""
    from grpc_tools import protoc  # only the generator needs grpcio-tools

    out_dir.mkdir(parents=True, exist_ok=True)
    protos = sorted(PROTO_DIR.glob("*.proto"))
    for proto in protos:
        status = protoc.main(
            [
                "grpc_tools.protoc",
                f"--proto_path={PROTO_DIR}",
                f"--python_out={out_dir}",
                f"--pyi_out={out_dir}",
                f"--grpc_python_out={out_dir}",
                str(proto),
            ]
        )
        if status != 0:
            raise SystemExit(f"protoc failed on {proto.name} (exit {status})")
    written = []
    for proto in protos:
        stem = proto.stem
        grpc_module = out_dir / f"{stem}_pb2_grpc.py"
        grpc_module.write_text(package_relative_imports(grpc_module.read_text()))
        written += [out_dir / f"{stem}_pb2.py", out_dir / f"{stem}_pb2.pyi", grpc_module]
    init = out_dir / "__init__.py"
    if not init.exists():
        init.write_text('"""Modules generated from src/gpuready/cri/proto; do not edit."""\n')
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=GENERATED_DIR, help="output folder")
    args = parser.parse_args(argv)
    reason = check_generator_version()
    if reason:
        print(f"generate_cri: {reason}", file=sys.stderr)
        return 2
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
