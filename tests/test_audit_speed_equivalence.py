"""What audit keeps between nodes never changes a node's verdict.

``gpuready audit`` checks many nodes in one process (and in forked worker processes): the line's
recorded defaults are parsed once and shared, a text seen again shares its parse, a clean CDI
spec is read without recording positions, and owner markers are ruled out by listing folders.
Each node's findings must still be exactly those ``doctor`` finds on that node in a process of
its own, whatever nodes were checked before it, in whichever worker.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import model
from gpuready.containerd.lines import LINES, NodeLine
from tests.helpers import DATA, LAB_BASE, REPO, run_cli

CONFIG = Path("etc/containerd/config.toml")
DEFAULTS = DATA / "containerd"
REGISTERED = REPO / "tests" / "data" / "lab-base-registered.toml"
NVIDIA_V2 = """
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"""
CLEAN_SPEC = """\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: '0'
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
"""
# Specs with something to report (where it is, too), or a form the short reading leaves alone.
SPECS = {
    "clean": CLEAN_SPEC,
    "repeated-key": CLEAN_SPEC + "kind: nvidia.com/gpu\n",
    "after-end-marker": CLEAN_SPEC + "...\nkind: other.com/x\n",
    "bad-env": CLEAN_SPEC.replace("deviceNodes:\n    - path: /dev/nvidia0",
                                  "env:\n    - NO_EQUALS_SIGN"),
    "anchored": CLEAN_SPEC.replace("containerEdits:\n", "containerEdits: &edits\n")
    + "- name: '1'\n  containerEdits: *edits\n",
    "merge-key": CLEAN_SPEC + "- <<: {containerEdits: {env: [A=1]}}\n  name: '1'\n"
    "  containerEdits: {env: [B=1]}\n",
    "old-version": CLEAN_SPEC.replace("0.5.0", "0.3.0"),
    "not-yaml": "cdiVersion: [\n",
}
RUNTIMECLASS = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\n" \
    "handler: {handler}\n"


def _node(fleet: Path, host: str, config: str, *, spec: str | None, handler: str | None,
          binary: bool, owner: str | None) -> None:
    root = fleet / host
    if owner:
        shutil.copytree(DATA / "owners" / owner, root)
    (root / CONFIG).parent.mkdir(parents=True, exist_ok=True)
    (root / CONFIG).write_text(f"# {host}\n" + config)
    if spec is not None:
        (root / "etc/cdi").mkdir(parents=True)
        (root / "etc/cdi/nvidia.yaml").write_text(spec)
    if handler is not None:
        (root / "root/toolkit").mkdir(parents=True)
        (root / "root/toolkit/runtimeclass.yaml").write_text(RUNTIMECLASS.format(handler=handler))
    if binary:
        installed = root / "usr/bin/nvidia-container-runtime"
        installed.parent.mkdir(parents=True, exist_ok=True)
        installed.write_bytes(b"")
        installed.chmod(0o755)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """Nodes of every kind, interleaved, enough of them for audit's worker processes."""
    folder = tmp_path_factory.mktemp("fleet")
    v16 = (DEFAULTS / "containerd-1.6.20-default.toml").read_text()
    configs = {
        "registered": REGISTERED.read_text(),
        "unregistered": LAB_BASE.read_text(),
        # 1.x: a runtimes table in a file replaces the built-in runc whole
        "runc-lost": 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
        '  default_runtime_name = "runc"\n' + NVIDIA_V2,
        "default-1.6": v16 + NVIDIA_V2,
        "default-2.1": (DEFAULTS / "containerd-2.1.9-default.toml").read_text(),
        "default-2.3": (DEFAULTS / "containerd-2.3.4-default.toml").read_text(),
        "broken": 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n',
    }
    kinds = sorted(configs)
    specs = sorted(SPECS)
    for index in range(96):
        kind = kinds[index % len(kinds)]
        spec = specs[index % len(specs)]
        _node(folder, f"n{index:03d}-{kind}-{spec}", configs[kind],
              spec=SPECS[spec] if index % 5 else None,
              handler=("nvidia", "nvidia-gpu", None)[index % 3],
              binary=index % 4 != 1, owner="k3s" if index % 11 == 0 else None)
    return folder


def _problems(result) -> dict[str, list]:
    return {Path(entry["node"]).name: entry["problems"]
            for entry in json.loads(result.out)["nodes"]}


def test_workers_and_one_process_find_what_doctor_finds_on_each_node_alone(fleet: Path) -> None:
    in_workers = _problems(run_cli("audit", str(fleet), "--format", "json", "--jobs", "2"))
    in_one = _problems(run_cli("audit", str(fleet), "--format", "json", "--jobs", "1"))
    assert len(in_workers) == 96
    assert in_workers == in_one
    # Every kind of config and of spec, an owner's nodes, nodes without a spec: each alone.
    hosts = sorted(in_one)
    for index in sorted({*range(10), *range(0, 96, 7), 11, 22, 33}):
        alone = run_cli("doctor", "--root", str(fleet / hosts[index]), "--format", "json")
        assert json.loads(alone.out)["problems"] == in_one[hosts[index]], hosts[index]


def test_a_problem_in_a_spec_keeps_its_line(fleet: Path) -> None:
    found = _problems(run_cli("audit", str(fleet), "--format", "json", "--jobs", "1"))
    host = next(name for name in found if name.endswith("-bad-env")
                and any(p["rule"] == "cdi-spec-invalid" for p in found[name]))
    (problem,) = [p for p in found[host] if p["rule"] == "cdi-spec-invalid"]
    assert problem["key_path"] == "devices[0].containerEdits.env[0]"
    assert (problem["line"], problem["column"]) == (7, 7)
    clean = next(name for name in found if name.endswith("-clean"))
    assert not [p for p in found[clean] if p["rule"].startswith("cdi-")]


def test_a_node_whose_file_replaces_a_default_table_leaves_the_next_node_alone() -> None:
    """The line's defaults are shared by every node a process checks: a node whose runtimes
    table replaces the built-in runc (1.x) must not take runc away from the next node."""
    line = NodeLine(LINES["1.7"], None, "test")
    replaced = tomllib.loads('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                             '  default_runtime_name = "runc"\n' + NVIDIA_V2)
    plain = tomllib.loads('version = 2\n')
    before = model.build([(Path("plain.toml"), plain)], line)
    lost = model.build([(Path("replaced.toml"), replaced)], line)
    after = model.build([(Path("plain.toml"), plain)], line)
    assert sorted(lost.runtimes) == ["nvidia"]
    assert lost.cri_error is not None and "runc" in lost.cri_error
    assert sorted(after.runtimes) == sorted(before.runtimes) == ["runc"]
    assert after.data == before.data
    assert after.cri_error is None
    recorded = tomllib.loads((DEFAULTS / "containerd-1.7.34-default.toml").read_text())
    assert line.line.defaults() == recorded


@pytest.mark.parametrize("name", sorted(LINES))
def test_every_line_decodes_a_file_over_its_defaults_as_a_fresh_copy_would(name: str) -> None:
    """Decoding over the shared defaults gives what decoding over a fresh copy gives, for every
    file in tests/data, and leaves the defaults and the file's data as they were."""
    line = NodeLine(LINES[name], None, "test")
    for path in sorted(DATA.rglob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
            continue
        kept = json.dumps(data, default=str)
        decoded = model.decode_over_defaults(data, line)
        assert decoded == _decoded_afresh(data, line), path
        assert json.dumps(data, default=str) == kept, path
    assert line.line.shared_defaults() == line.line.defaults()


def _decoded_afresh(data: dict, line: NodeLine) -> dict:
    """Decoding as containerd does, written plainly: over a fresh copy of the defaults."""
    result = line.line.defaults()
    for key, value in data.items():
        if key == "version":
            continue
        if key == "plugins" and isinstance(value, dict):
            plugins = result.setdefault("plugins", {})
            for plugin, table in value.items():
                earlier = plugins.get(plugin)
                if isinstance(earlier, dict) and isinstance(table, dict):
                    maps = model.MAPS_1X if (line.line.maps_replace_defaults
                                             and plugin == "io.containerd.grpc.v1.cri") else ()
                    _over(earlier, table, maps, ())
                else:
                    plugins[plugin] = table
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            _over(result[key], value, (), ())
        else:
            result[key] = value
    return result


def _over(target: dict, source: dict, maps, at: tuple) -> None:
    for key, value in source.items():
        path = (*at, key)
        if path not in maps and isinstance(value, dict) and isinstance(target.get(key), dict):
            _over(target[key], value, maps, path)
        else:
            target[key] = value
