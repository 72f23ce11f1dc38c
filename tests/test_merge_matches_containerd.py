"""doctor merges a config and its imports as containerd does: checked against the real one.

For each layout of main file and drop-ins, the runtime table doctor computes must name the same
runtimes as ``containerd config dump``, which loads the same files. The installed containerd
decides which merge applies (1.x replaces a plugin table whole; 2.x merges key by key).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.files import FileContext, Options
from gpuready.containerd.imports import load_imports, merge
from gpuready.containerd.versions import spec_for
from tests.helpers import LAB_BASE, require_binary

pytestmark = pytest.mark.containerd

RUNTIME_ONLY = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{name}]
  runtime_type = "io.containerd.runc.v2"
"""

LAYOUTS = {
    "drop-in with only a runtime": {"conf.d/99-nvidia.toml": RUNTIME_ONLY.format(name="nvidia")},
    "drop-in copying the whole CRI table": {
        "conf.d/99-nvidia.toml": LAB_BASE.read_text().replace(
            "[plugins.\"io.containerd.grpc.v1.cri\".cni]",
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
            "      runtime_type = \"io.containerd.runc.v2\"\n\n"
            "    [plugins.\"io.containerd.grpc.v1.cri\".cni]",
        )
    },
    "two drop-ins, sorted by name": {
        "conf.d/10-a.toml": RUNTIME_ONLY.format(name="first"),
        "conf.d/20-b.toml": RUNTIME_ONLY.format(name="second"),
    },
    "drop-in without CRI settings": {
        "conf.d/50-debug.toml": "version = 2\n[debug]\n  level = 'info'\n",
    },
}


def _layout(folder: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    main = folder / "config.toml"
    main.write_text(
        LAB_BASE.read_text().replace(
            "version = 2\n", f'version = 2\nimports = ["{folder}/conf.d/*.toml"]\n', 1
        )
    )
    return main


def _dumped_runtimes(containerd: str, main: Path) -> set[str]:
    result = subprocess.run([containerd, "--config", str(main), "config", "dump"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = tomllib.loads(result.stdout)
    return set(facts.runtimes(data, spec_for(2)))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_doctor_merge_names_the_runtimes_containerd_loads(tmp_path: Path, layout: str) -> None:
    containerd = require_binary("containerd")
    version = subprocess.run([containerd, "--version"], capture_output=True, text=True).stdout
    major = int(version.split()[2].split(".")[0])
    main = _layout(tmp_path, LAYOUTS[layout])
    options = Options(root=Path("/"))
    files, missing = load_imports(FileContext(main, main.read_text(), options=options),
                                  options=options)
    assert missing == []
    merged, _ = merge(files, major=major)
    assert set(facts.runtimes(merged, spec_for(2))) == _dumped_runtimes(containerd, main)
