"""Properties that hold for any input, checked with hypothesis.

- Registering any valid runtime name into any version's config only adds lines, lands where that
  version reads, and a second run is a no-op.
- No byte string given as a config makes ``configure`` crash: it registers or gives a one-line
  error, and a file it refuses stays as it was.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.document import load_config_text
from gpuready.containerd.register import CgroupMode, RuntimeRequest, plan_registration
from gpuready.containerd.versions import spec_of
from gpuready.errors import GpureadyError
from tests.helpers import CONTAINERD_DATA, added_lines_only

BASES = sorted(CONTAINERD_DATA.glob("*.toml"))
runtime_names = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}[a-z0-9]\Z").filter(lambda n: n != "runc")
binaries = st.from_regex(r"\A/[A-Za-z0-9_./-]{1,40}\Z")
comments = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    name=runtime_names,
    binary=binaries,
    mode=st.sampled_from(list(CgroupMode)),
    comment=comments,
)
def test_registration_adds_lines_lands_right_and_is_idempotent(base, name, binary, mode, comment):
    text = f"# {comment}\n" + base.read_text()
    config = load_config_text(text, base)
    request = RuntimeRequest(name=name, binary=binary, systemd_cgroup=mode)
    plan = plan_registration(config, request)
    assert added_lines_only(text, plan.after)
    data = tomllib.loads(plan.after)
    entry = facts.runtime(data, spec_of(data), name)
    assert entry["options"]["BinaryName"] == binary
    again = plan_registration(load_config_text(plan.after, base), request)
    assert not again.changes


@settings(max_examples=150, deadline=None)
@given(raw=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_register_or_fail_with_a_positioned_error(raw: bytes) -> None:
    from gpuready.textfile import decode

    try:
        config = load_config_text(decode(raw, "config.toml"), "config.toml")
        plan = plan_registration(config, RuntimeRequest())
    except GpureadyError as error:
        assert "\n" not in error.message()
        assert error.message().startswith("config.toml")
        return
    assert facts.runtime(tomllib.loads(plan.after), spec_of(config.data), "nvidia") is not None


def test_a_refused_file_on_disk_keeps_its_bytes(tmp_path: Path) -> None:
    """A refused file stays byte for byte as it was (the property above, on disk)."""
    from tests.helpers import run_cli

    path = tmp_path / "config.toml"
    raw = b'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\nx = [\n'
    path.write_bytes(raw)
    result = run_cli("configure", "--config", str(path))
    assert result.code == 2 and path.read_bytes() == raw


KEYS = st.sampled_from([
    "plugins", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "cri", "containerd",
    "runtimes", "runc", "nvidia", "crun", "options", "runtime_type", "SystemdCgroup",
    "BinaryName", "default_runtime_name",
])
SCALARS = st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from(["runc", "nvidia", "x"]))
SHAPES = st.recursive(
    SCALARS, lambda inner: st.dictionaries(KEYS, inner, max_size=4) | st.lists(SCALARS, max_size=2),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(tree=st.dictionaries(KEYS, SHAPES, max_size=4), version=st.sampled_from([None, 1, 2, 3, 4]))
def test_any_shape_of_valid_toml_registers_or_says_why(tree: dict, version: int | None) -> None:
    import tomlkit

    if version is not None:
        tree = {"version": version, **tree}
    text = tomlkit.dumps(tree)
    config = load_config_text(text, "config.toml")
    try:
        plan = plan_registration(config, RuntimeRequest())
    except GpureadyError as error:
        assert "\n" not in error.message() and error.message().startswith("config.toml")
        # Every valid layout is edited: the only refusal is a key on the way that holds a
        # value TOML cannot add a table to.
        assert "not a table" in error.message(), error.message()
        return
    data = tomllib.loads(plan.after)
    assert facts.runtime(data, spec_of(data), "nvidia")["options"]["SystemdCgroup"] is True
