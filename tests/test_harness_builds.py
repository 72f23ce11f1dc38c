"""GPUREADY_CONTAINERD_BUILDS runs every real-containerd test once more per named build."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.harness.builds import ENV, Build, builds
from tests.helpers import REPO


def collected(env_value: str | None) -> list[str]:
    """The test ids pytest collects for two real-containerd modules, with ENV set to a value."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_value is not None:
        env[ENV] = env_value
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/test_containerd_accepts.py", "tests/test_verify_live.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_without_the_variable_only_the_system_containerd(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert builds() == [Build(None)]
    ids = collected(None)
    assert ids and all("[system" in test_id for test_id in ids)


def test_each_named_build_repeats_every_real_containerd_test(tmp_path):
    first, second = tmp_path / "c2.1" / "bin", tmp_path / "c2.3"
    ids = collected(f"{first}:{second}")
    system = [i for i in ids if "[system" in i]
    assert system
    for build in ("[build-c2.1", "[build-c2.3"):
        assert len([i for i in ids if build in i]) == len(system)
