"""Every valid TOML layout of a config is edited: tables in any order, dotted keys, inline tables.

Each case is a layout real tools write. The runtime must land where containerd reads it, every
existing line must stay (inline tables excepted: TOML keeps them on one line, and that edit says
so), and a second run must be a no-op.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.configure import ConfigureRequest, plan_configure
from gpuready.containerd.document import load_config_text
from gpuready.containerd.register import RuntimeRequest, plan_registration
from gpuready.containerd.versions import spec_of
from tests.helpers import added_lines_only, run_cli

CRI = 'plugins."io.containerd.grpc.v1.cri"'

LAYOUTS = {
    # kind's node config: the parent tables come after the runtimes.
    "parent-after-children": f"""version = 2

[{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{CRI}.containerd.runtimes.runc.options]
  SystemdCgroup = true

[{CRI}.containerd]
  default_runtime_name = "runc"

[{CRI}]
  sandbox_image = "registry.k8s.io/pause:3.9"
""",
    "runtimes-table-after-its-runtime": f"""version = 2
[{CRI}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[{CRI}.containerd.runtimes]
[{CRI}.containerd]
snapshotter = "overlayfs"
""",
    # k3s and cloud images: one plugin's tables spread across the file.
    "spread-across-the-file": f"""version = 2
root = "/var/lib/rancher/k3s/agent/containerd"

[{CRI}]
  stream_server_address = "127.0.0.1"

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/rancher/k3s/agent/containerd"

[{CRI}.containerd]
  snapshotter = "overlayfs"

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/var/lib/rancher/k3s/data/current/bin"

[{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.snapshotter.v1.overlayfs"]
  mount_options = []

[{CRI}.containerd.runtimes.runc.options]
  SystemdCgroup = true
""",
    "blank-line-after-header": f"""version = 2
[{CRI}.containerd.runtimes.runc]

  runtime_type = "io.containerd.runc.v2"
  [{CRI}.containerd.runtimes.runc.options]

    SystemdCgroup = true
""",
    "dotted-keys": f"""version = 2
[{CRI}.containerd]
default_runtime_name = "runc"
runtimes.runc.runtime_type = "io.containerd.runc.v2"
runtimes.runc.options.SystemdCgroup = true
""",
    "dotted-from-the-plugins-table": """version = 2
[plugins]
"io.containerd.grpc.v1.cri".containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2"
"io.containerd.grpc.v1.cri".containerd.runtimes.runc.options.SystemdCgroup = true
""",
    "implied-super-tables-only": f"""version = 2
[{CRI}.containerd.runtimes.runc.options]
SystemdCgroup = true
""",
    "sibling-as-inline-table": f"""version = 2
[{CRI}.containerd.runtimes]
  runc = {{ runtime_type = "io.containerd.runc.v2", options = {{ SystemdCgroup = true }} }}
[{CRI}.cni]
  bin_dir = "/opt/cni/bin"
""",
    "tabs-trailing-spaces-comments-single-quotes": """version = 2 \t
# comment
[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.'runc']   # runc
\truntime_type = 'io.containerd.runc.v2'\t
\t# options follow
\t[ plugins . 'io.containerd.grpc.v1.cri' . containerd.runtimes.runc.options ]
\t\tSystemdCgroup = true # systemd
""",
    "no-trailing-newline": (
        f'version = 2\n[{CRI}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"'
    ),
    "multi-line-values": f'''version = 2
[{CRI}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
pod_annotations = [
  "a",  # ] not the end
  """b
[not.a.header]""",
]
''',
    "array-of-tables-nearby": f"""version = 2
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
[{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/arm64"
""",
    "version-3-single-quotes": """version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    SystemdCgroup = true
""",
}

INLINE = {
    "runtimes-inline": f"""version = 2
[{CRI}.containerd]
runtimes = {{ runc = {{ runtime_type = "io.containerd.runc.v2" }} }}
""",
    "containerd-inline-empty-runtimes": f"""version = 2
[{CRI}]
containerd = {{ default_runtime_name = "runc", runtimes = {{}} }}
""",
}


def _register(text: str):
    config = load_config_text(text, "config.toml")
    plan = plan_registration(config, RuntimeRequest())
    data = tomllib.loads(plan.after)
    return config, plan, data


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_layout_is_registered_keeping_every_line(name: str) -> None:
    config, plan, data = _register(LAYOUTS[name])
    nvidia = facts.runtime(data, spec_of(data), "nvidia")
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"] == {
        "BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True,
    }
    assert added_lines_only(config.text, plan.after)
    assert not [note for note in plan.notes if "inline table" in note]
    again = plan_registration(load_config_text(plan.after, "config.toml"), RuntimeRequest())
    assert not again.changes and "already registered" in again.summary


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_nothing_but_the_runtime_changes_in_the_data(name: str) -> None:
    config, _, data = _register(LAYOUTS[name])
    spec = spec_of(data)
    del facts.lookup(data, spec.runtimes_path)["nvidia"]
    # The only tables an edit may create are the ones on the way to the runtime.
    before = config.data
    assert _without_empty_tables(data) == _without_empty_tables(before)


def _without_empty_tables(value):
    if isinstance(value, dict):
        kept = {k: _without_empty_tables(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v != {}}
    return value


def test_the_new_runtime_is_written_as_its_neighbours_are() -> None:
    dotted = _register(LAYOUTS["dotted-keys"])[1].after
    assert 'runtimes.nvidia.options.BinaryName = "/usr/bin/nvidia-container-runtime"' in dotted
    inline = _register(LAYOUTS["sibling-as-inline-table"])[1].after
    assert "\n  nvidia = { runtime_type = " in inline
    assert inline.index("nvidia = {") < inline.index("[plugins.\"io.containerd.grpc.v1.cri\".cni]")
    quoted = _register(LAYOUTS["version-3-single-quotes"])[1].after
    assert "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]" in quoted
    assert "runtime_type = 'io.containerd.runc.v2'" in quoted
    kind = _register(LAYOUTS["parent-after-children"])[1].after
    assert kind.index("runtimes.nvidia]") < kind.index(f"[{CRI}.containerd]\n")


@pytest.mark.parametrize("name", sorted(INLINE))
def test_an_inline_table_gets_the_smallest_change_and_a_note_saying_why(name: str) -> None:
    config, plan, data = _register(INLINE[name])
    assert facts.runtime(data, spec_of(data), "nvidia")["options"]["SystemdCgroup"] is True
    before, after = config.text.splitlines(), plan.after.splitlines()
    assert len(before) == len(after)
    changed = [(old, new) for old, new in zip(before, after) if old != new]
    assert len(changed) == 1
    old, new = changed[0]
    # Only inserted into: the old line is the new one with one piece taken out.
    assert any(new.startswith(old[:cut]) and new.endswith(old[cut:])
               for cut in range(len(old) + 1))
    notes = [note for note in plan.notes if "inline table" in note]
    assert len(notes) == 1 and notes[0].startswith("line 3 changed, not only added to")


def test_a_blank_line_after_a_header_is_no_internal_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(LAYOUTS["blank-line-after-header"])
    result = run_cli("configure", "--config", str(path))
    assert result.code == 0, result.err
    assert "internal error" not in result.err
    assert "runtimes.nvidia" in path.read_text()


def test_kinds_layout_is_registered_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(LAYOUTS["parent-after-children"])
    result = run_cli("configure", "--config", str(path))
    assert result.code == 0, result.err
    assert "rewrite it as [table] headers" not in result.err
    assert added_lines_only(LAYOUTS["parent-after-children"], path.read_text())


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_cdi_and_the_default_runtime_are_set_in_any_layout(name: str) -> None:
    config = load_config_text(LAYOUTS[name], "config.toml")
    request = ConfigureRequest(RuntimeRequest(), enable_cdi=True, set_as_default=True)
    plan = plan_configure(config, request)
    data = tomllib.loads(plan.after)
    spec = spec_of(data)
    assert facts.lookup(data, (*spec.cri_path, "enable_cdi")) is True
    assert facts.default_runtime_name(data, spec) == "nvidia"
    kept = plan.after.replace('default_runtime_name = "nvidia"', 'default_runtime_name = "runc"')
    assert added_lines_only(config.text, kept)


def test_an_existing_runtime_written_as_dotted_keys_is_fixed_on_its_own_line() -> None:
    text = f"""version = 2
[{CRI}.containerd]
runtimes.nvidia.runtime_type = "io.containerd.runc.v2"
runtimes.nvidia.options.SystemdCgroup = "true"  # keep
"""
    config = load_config_text(text, "config.toml")
    plan = plan_registration(config, RuntimeRequest())
    assert plan.after.splitlines()[3] == "runtimes.nvidia.options.SystemdCgroup = true  # keep"
    assert 'runtimes.nvidia.options.BinaryName = "/usr/bin/nvidia-container-runtime"' in plan.after
