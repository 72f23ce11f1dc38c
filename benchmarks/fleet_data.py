"""Generate a fleet of node folders from the real default configs, with injected faults.

Each node is laid out as the collection's ``gpuready_facts`` copies a node for doctor
(``FLEET/HOST/etc/containerd/config.toml``, the RuntimeClass, the CDI spec where the node has one,
and an empty stand-in with the mode of each runtime binary the config names and the node has).
The configs start from the ``containerd config default`` output of real releases (1.6.20, 2.1.9,
2.3.4, in tests/data/containerd/) with the NVIDIA runtime registered at the table the config's
version reads; variations: binary path, CDI spec present or not. One node in ``FAULT_EVERY`` gets
one fault, each with the rule that must report it.

Nodes configured alike have byte-identical files, as a fleet deployed by one playbook has;
``distinct=True`` starts every file with a comment naming its host instead, so that no two nodes
share a text (what ``gpuready audit`` gains from identical texts is then zero).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from gpuready.containerd.document import parse_toml
from gpuready.containerd.versions import render_key_path, spec_of

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "containerd"
DEFAULTS = ("containerd-1.6.20-default.toml", "containerd-2.1.9-default.toml",
            "containerd-2.3.4-default.toml")
FAULT_EVERY = 10
CDI_SPEC = """\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: '0'
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  deviceNodes:
  - path: /dev/nvidiactl
"""
RUNTIMECLASS = """\
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: {name}
handler: {handler}
"""


@dataclass(frozen=True)
class Base:
    """A real default config and the headers its version reads."""

    name: str
    text: str
    runtime_header: str
    runtime_number: int


def bases() -> list[Base]:
    """The real defaults, each with the runtime table header of its config version."""
    found = []
    for name in DEFAULTS:
        text = (DATA / name).read_text()
        spec = spec_of(parse_toml(text, name), path=name)
        header = render_key_path(spec.runtime_path("NAME"))
        found.append(Base(name, text, header, spec.number))
    return found


def runtime_table(header: str, name: str, *, binary: str, systemd: str) -> str:
    """The NVIDIA runtime's tables as gpuready writes them, for ``name``."""
    table = header.replace("NAME", name)
    return (f"\n[{table}]\n  runtime_type = \"io.containerd.runc.v2\"\n\n"
            f"  [{table}.options]\n    BinaryName = \"{binary}\"\n"
            f"    SystemdCgroup = {systemd}\n")


# Each fault: the rule that must report it, and how it changes (config, runtimeclass handler).
# The node has the binary its config names, except where the fault is that it does not.
FAULTS = {
    "binary-missing": lambda base, name: (
        base.text + runtime_table(base.runtime_header, name, binary=UNINSTALLED,
                                  systemd="false"), name),
    "runtime-not-registered": lambda base, name: (base.text, name),
    "bool-as-string": lambda base, name: (
        base.text + runtime_table(base.runtime_header, name, binary=BINARY,
                                  systemd='"false"'), name),
    "handler-mismatch": lambda base, name: (_registered(base, name), name + "-gpu"),
    "toml-syntax": lambda base, name: (_registered(base, name) + "\n[plugins\n", name),
    "default-runtime-missing": lambda base, name: (
        re.sub(r"default_runtime_name = [\"']runc[\"']", 'default_runtime_name = "crun"',
               _registered(base, name)), name),
}
BINARY = "/usr/bin/nvidia-container-runtime"
# Where the NVIDIA runtime lives: the toolkit's package, and the GPU Operator's install folder.
BINARIES = (BINARY, BINARY, "/usr/local/nvidia/toolkit/nvidia-container-runtime")
UNINSTALLED = "/opt/nvidia/bin/nvidia-container-runtime"


def _registered(base: Base, name: str) -> str:
    return base.text + runtime_table(base.runtime_header, name, binary=BINARY, systemd="false")


def generate(folder: Path, count: int, *, seed: int = 7, distinct: bool = False
             ) -> dict[str, str]:
    """Write ``count`` nodes below ``folder``; return ``{host: expected rule}`` for faulty ones."""
    rng = random.Random(seed)
    known = bases()
    faults = sorted(FAULTS)
    expected: dict[str, str] = {}
    for index in range(count):
        host = f"gpu{index:05d}"
        base = known[index % len(known)]
        name = "nvidia"
        if index % FAULT_EVERY == FAULT_EVERY - 1:
            fault = faults[(index // FAULT_EVERY) % len(faults)]
            config, handler = FAULTS[fault](base, name)
            expected[host] = fault
        else:
            # runc of every default uses cgroupfs: the runtime matches it, as inherit does.
            binary = rng.choice(BINARIES)
            config = base.text + runtime_table(base.runtime_header, name, binary=binary,
                                               systemd="false")
            handler = name
        _write_node(folder / host, config, name, handler, with_cdi=rng.random() < 0.9,
                    header=f"# {host}\n" if distinct else "")
    return expected


def _installed(config: str) -> list[str]:
    """The runtime binaries a config names that the node has (all but the uninstalled one)."""
    return [binary for binary in dict.fromkeys(BINARIES) if f'"{binary}"' in config]


def _write_node(root: Path, config: str, name: str, handler: str, *, with_cdi: bool,
                header: str) -> None:
    (root / "etc" / "containerd").mkdir(parents=True)
    (root / "etc" / "containerd" / "config.toml").write_text(header + config)
    toolkit = root / "root" / "toolkit"
    toolkit.mkdir(parents=True)
    (toolkit / "runtimeclass.yaml").write_text(
        header + RUNTIMECLASS.format(name=name, handler=handler))
    if with_cdi:
        (root / "etc" / "cdi").mkdir(parents=True)
        (root / "etc" / "cdi" / "nvidia.yaml").write_text(header + CDI_SPEC)
    for binary in _installed(config):  # an empty stand-in, as the collection's copy has
        stand_in = root / binary.lstrip("/")
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        stand_in.write_bytes(b"")
        stand_in.chmod(0o755)


def node_files(root: Path) -> list[Path]:
    """The files of a generated node that a checker reads."""
    return sorted(p for p in root.rglob("*") if p.is_file())
