"""The checked-in CRI modules are exactly what scripts/generate_cri.py makes from the .proto."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GENERATED = REPO / "src" / "gpuready" / "cri" / "generated"


def load_script():
    spec = importlib.util.spec_from_file_location("generate_cri", REPO / "scripts/generate_cri.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_modules_are_current(tmp_path):
    """Regenerating the CRI modules changes nothing. The generator (the ``generate`` extra) pins
    protobuf below 7, so an environment that tests the newest protobuf runs it with another
    Python: ``GPUREADY_GENERATOR_PYTHON`` (.ci/run names its 3.9 environment's)."""
    from importlib import metadata

    script = load_script()
    try:
        metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        generator = os.environ.get("GPUREADY_GENERATOR_PYTHON")
        if not generator:
            reason = ("grpcio-tools is not installed here (pip install -e '.[generate]') and "
                      "GPUREADY_GENERATOR_PYTHON names no Python that has it")
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        result = subprocess.run([generator, str(REPO / "scripts/generate_cri.py"), "--out",
                                 str(tmp_path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        written = [Path(line) for line in result.stdout.split()]
    else:
        reason = script.check_generator_version()
        if reason:
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        written = script.generate(tmp_path)
    assert written
    for fresh in written:
        checked_in = GENERATED / fresh.name
        assert checked_in.exists(), f"{fresh.name} missing: run python3 scripts/generate_cri.py"
        assert checked_in.read_text() == fresh.read_text(), (
            f"{fresh.name} is stale: run python3 scripts/generate_cri.py"
        )


def test_grpc_module_imports_messages_through_the_package():
    text = (GENERATED / "cri_runtime_v1_pb2_grpc.py").read_text()
    assert "from . import cri_runtime_v1_pb2 as" in text
    assert "\nimport cri_runtime_v1_pb2" not in text


def test_field_numbers_match_the_public_cri_api():
    """Spot-check the wire contract: these numbers come from the CRI api.proto (runtime.v1)."""
    from gpuready.cri.generated import cri_runtime_v1_pb2 as api

    def number(message, field):
        return message.DESCRIPTOR.fields_by_name[field].number

    assert number(api.RunPodSandboxRequest, "runtime_handler") == 2
    assert number(api.PodSandboxConfig, "labels") == 6
    assert number(api.PodSandboxConfig, "linux") == 8
    assert number(api.LinuxSandboxSecurityContext, "namespace_options") == 1
    assert number(api.PodSandboxStatus, "runtime_handler") == 9
    assert number(api.StatusResponse, "info") == 2
    assert api.NODE == 2 and api.SANDBOX_READY == 0
    assert api.DESCRIPTOR.package == "runtime.v1"
