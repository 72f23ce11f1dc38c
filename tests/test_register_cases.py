"""Table-driven: a config in, the config with the runtime registered out, for every version.

Each folder of tests/data/register holds ``case.json`` (the input file and the request) and
``expected.toml``. Every case also checks the properties that hold for all of them: the edit only
adds lines (or changes only the values gpuready owns), the result parses, and a second run is a
no-op.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.document import load_config, load_config_text
from gpuready.containerd.register import CgroupMode, RuntimeRequest, plan_registration
from gpuready.containerd.versions import spec_of
from tests.helpers import DATA, added_lines_only

CASES = sorted(path for path in (DATA / "register").iterdir() if path.is_dir())


def _load_case(case: Path):
    spec = json.loads((case / "case.json").read_text())
    request = dict(spec["request"])
    if "systemd_cgroup" in request:
        request["systemd_cgroup"] = CgroupMode(request["systemd_cgroup"])
    return load_config(case / spec["input"]), RuntimeRequest(**request)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_registration_matches_expected_file(case: Path) -> None:
    config, request = _load_case(case)
    plan = plan_registration(config, request)
    assert plan.changes
    assert plan.after == (case / "expected.toml").read_text()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_second_run_is_a_no_op_with_a_reason(case: Path) -> None:
    config, request = _load_case(case)
    once = plan_registration(config, request)
    twice = plan_registration(load_config_text(once.after, config.path), request)
    assert not twice.changes
    assert twice.after == once.after
    assert "already registered" in twice.summary


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_runtime_lands_at_the_table_of_the_files_version(case: Path) -> None:
    config, request = _load_case(case)
    data = tomllib.loads(plan_registration(config, request).after)
    spec = spec_of(data)
    entry = facts.runtime(data, spec, request.name)
    assert entry is not None, f"no [{'.'.join(spec.runtime_path(request.name))}]"
    assert entry["runtime_type"] == "io.containerd.runc.v2"
    options = entry["options"]
    assert options["BinaryName"] == request.binary
    if request.systemd_cgroup is CgroupMode.INHERIT:
        runc = facts.runtime_options(facts.runtime(data, spec, "runc"))
        assert options.get("SystemdCgroup", False) == runc.get("SystemdCgroup", False)
    else:
        assert options["SystemdCgroup"] is (request.systemd_cgroup is CgroupMode.TRUE)
    assert facts.default_runtime_name(data, spec) == facts.default_runtime_name(config.data, spec)


NEW_RUNTIME_CASES = [case for case in CASES if "fix-" not in case.name]


@pytest.mark.parametrize("case", NEW_RUNTIME_CASES, ids=[c.name for c in NEW_RUNTIME_CASES])
def test_registering_a_new_runtime_only_adds_lines(case: Path) -> None:
    config, request = _load_case(case)
    assert added_lines_only(config.text, plan_registration(config, request).after)


def test_fixing_an_existing_runtime_changes_only_the_owned_value_and_keeps_comments() -> None:
    config, request = _load_case(DATA / "register" / "v2-fix-string-systemd")
    after = plan_registration(config, request).after
    assert len(config.text.splitlines()) == len(after.splitlines())
    changed = [
        (old, new)
        for old, new in zip(config.text.splitlines(), after.splitlines())
        if old != new
    ]
    assert changed == [
        ('      SystemdCgroup = "true"  # keep this comment',
         "      SystemdCgroup = true  # keep this comment"),
    ]


@pytest.mark.parametrize("version,table", [
    (1, "plugins.cri.containerd.runtimes.nvidia"),
    (2, 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia'),
    (3, 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia'),
    (4, 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia'),
])
def test_each_version_writes_its_own_header(version: int, table: str) -> None:
    config = load_config_text(f"version = {version}\n", "config.toml")
    after = plan_registration(config, RuntimeRequest()).after
    assert f"[{table}]" in after
    assert f"[{table}.options]" in after
