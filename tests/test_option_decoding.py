"""Each row of the option-decoding table (gpuready.containerd.decoding) against what containerd did.

Two sources, one per kind of line:

- containerd 1.6 (and any build the harness is pointed at, see tests/harness/builds.py) is
  measured live here: a real daemon with one runtime per spelling, each BinaryName a stand-in that
  records how the shim called it; a sandbox is started through every runtime, and the stand-in
  that was called (and whether with ``--systemd-cgroup``) and the sandbox's verbose status
  (``runtimeOptions``) must be what the table predicts for the running line.
- containerd 2.1 and 2.3 cannot run here: their rows are checked against the answers recorded
  from 2.1.9 and 2.3.4 (tests/data/cri/observed), the same measurement made on those daemons.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import decoding
from gpuready.containerd.decoding import LINES_BY_NAME, Spelling, Verdict
from gpuready.cri.client import CriClient
from gpuready.cri.probe import decoded_runtime, remove_probe_sandboxes, sandbox_config
from tests.harness.replay import config_used, recorded
from tests.harness.standin import recorded_calls, subcommand

# The runtimes of the recorded config, each one row (or pair row) of the table.
ROWS = {
    "pascal": (Spelling.EXACT,),
    "camel": (Spelling.CAMEL,),
    "upper": (Spelling.UPPER,),
    "snake": (Spelling.SNAKE,),
    "both": (Spelling.EXACT, Spelling.CAMEL),
    "bothrev": (Spelling.CAMEL, Spelling.EXACT),
}
RECORDED_LINES = {"1.6": "1.6.20", "2.1": "2.1.9", "2.3": "2.3.4"}
FIELDS = ("BinaryName", "SystemdCgroup")


def recorded_options(release: str) -> dict[str, Mapping]:
    """Each runtime's ``options`` table in the config the recorded daemon ran with."""
    data = tomllib.loads(config_used(release).read_text())
    plugin = "io.containerd.grpc.v1.cri" if data["version"] == 2 else "io.containerd.cri.v1.runtime"
    runtimes = data["plugins"][plugin]["containerd"]["runtimes"]
    return {name: runtimes[name]["options"] for name in ROWS}


def predicted(options: Mapping, line) -> dict:
    """What the table says the shim gets, in the sandbox status's terms."""
    binary = decoding.read_field(options, "BinaryName", line)
    systemd = decoding.read_field(options, "SystemdCgroup", line)
    assert binary.verdict is not Verdict.UNKNOWN and systemd.verdict is not Verdict.UNKNOWN
    return {
        "binary_name": binary.value(options),
        "systemd_cgroup": systemd.value(options) is True,
    }


@pytest.mark.parametrize("runtime", sorted(ROWS))
def test_the_recorded_config_spells_each_row(runtime):
    options = recorded_options("2.3.4")[runtime]
    for field_name in ("BinaryName",):
        found = decoding.spellings_of(options, field_name)
        assert tuple(found.values()) == ROWS[runtime]


@pytest.mark.parametrize("line_name", sorted(RECORDED_LINES))
@pytest.mark.parametrize("runtime", sorted(ROWS))
def test_row_matches_the_recorded_answers(line_name, runtime):
    """What the release decoded (sandbox status) and which stand-in it called, per the table."""
    release = RECORDED_LINES[line_name]
    line = LINES_BY_NAME[line_name]
    options = recorded_options(release)[runtime]
    expected = predicted(options, line)
    sandbox = recorded(release, "sandbox-status-info")[runtime]["info"]
    decoded = decoded_runtime({"info": _json(sandbox["info"])})
    assert decoded["binary_name"] == expected["binary_name"]
    assert decoded["systemd_cgroup"] == expected["systemd_cgroup"]
    # The recording keys each stand-in by name: /usr/local/bin/standin-NAME.
    for name, call in recorded(release, "standin-calls").items():
        if f"/usr/local/bin/standin-{name}" not in options.values():
            continue
        assert call["called"] == (expected["binary_name"] == f"/usr/local/bin/standin-{name}")
        if call["called"]:
            assert call["systemd_cgroup_flag"] == expected["systemd_cgroup"]


def _json(value) -> str:
    return json.dumps(value)


def test_unrecorded_mixes_are_unknown_on_every_line():
    for line in decoding.LINES:
        assert decoding.read_field({"binaryNAME": "/x"}, "BinaryName", line).verdict is (
            Verdict.UNKNOWN
        )
        mixed = {"BINARYNAME": "/a", "BinaryName": "/b"}
        reading = decoding.read_field(mixed, "BinaryName", line)
        assert reading.verdict is Verdict.UNKNOWN and reading.key is None
        three = {"BinaryName": "/a", "binaryName": "/b", "BINARYNAME": "/c"}
        assert decoding.read_field(three, "BinaryName", line).verdict is Verdict.UNKNOWN


def test_every_line_cites_where_its_facts_come_from():
    assert "measured live" in LINES_BY_NAME["1.6"].source
    assert "2.1.9" in LINES_BY_NAME["2.1"].source and "2.3.4" in LINES_BY_NAME["2.3"].source


# --- measured live on the containerd this machine runs ------------------------------------------

LIVE_RUNTIMES = {
    "pascal": {"BinaryName": "STANDIN-pascal", "SystemdCgroup": True},
    "camel": {"binaryName": "STANDIN-camel", "systemdCgroup": True},
    "upper": {"BINARYNAME": "STANDIN-upper", "SYSTEMDCGROUP": True},
    "snake": {"binary_name": "STANDIN-snake", "systemd_cgroup": True},
    "both": {"BinaryName": "STANDIN-both-pascal", "binaryName": "STANDIN-both-camel"},
    "bothrev": {"binaryName": "STANDIN-rev-camel", "BinaryName": "STANDIN-rev-pascal"},
}


@pytest.fixture
def measured(start_containerd, probe_archive):
    """A real containerd with one runtime per row; a sandbox started through each."""
    runtimes = {
        name: {"runtime_type": "io.containerd.runc.v2", "options": dict(options)}
        for name, options in LIVE_RUNTIMES.items()
    }
    daemon = start_containerd(runtimes=runtimes, image=probe_archive)
    answers = {}
    with CriClient(daemon.address, timeout=30) as client:
        version = client.version().runtime_version
        for name in LIVE_RUNTIMES:
            config = sandbox_config(f"decode{name}".ljust(32, "0"), systemd_cgroup=False)
            sandbox_id = client.run_pod_sandbox(config, runtime_handler=name)
            status = client.pod_sandbox_status(sandbox_id, verbose=True)
            answers[name] = decoded_runtime(status.info)
            remove_probe_sandboxes(client, f"decode{name}".ljust(32, "0"), sandbox_id)
    return daemon, version, runtimes, answers


def test_every_row_measured_live(measured):
    daemon, version, runtimes, answers = measured
    line = decoding.line_of_version(version)
    if line is None:
        pytest.skip(f"no recorded facts for containerd {version}; the table claims none")
    for name, entry in runtimes.items():
        options = entry["options"]
        expected = predicted(options, line)
        assert answers[name]["binary_name"] == expected["binary_name"], name
        assert answers[name]["systemd_cgroup"] == expected["systemd_cgroup"], name
        for standin in {v for v in options.values() if isinstance(v, str)}:
            creates = [
                call
                for call in recorded_calls(daemon.folder / f"{standin.rsplit('/', 1)[-1]}.log")
                if subcommand(call) == "create"
            ]
            assert bool(creates) == (standin == expected["binary_name"]), (name, standin)
            for call in creates:
                assert ("--systemd-cgroup" in call["argv"]) == expected["systemd_cgroup"]


# --- what lint says, from the same table ----------------------------------------------------


def _lint(path):
    from gpuready.containerd.files import Options
    from gpuready.rules.engine import lint_paths
    from gpuready.rules.registry import REGISTRY

    return lint_paths([path], options=Options(), selected=frozenset(REGISTRY)).problems


def test_two_spellings_are_an_error_naming_each_lines_value():
    problems = [p for p in _lint(config_used("1.6.20")) if p.rule == "option-spelled-twice"]
    by_runtime = {p.key_path.split(".")[-3]: p for p in problems}
    assert set(by_runtime) == {"both", "bothrev"}
    both = by_runtime["both"].message
    assert 'containerd 1.6 uses BinaryName = "/usr/local/bin/standin-both-Pascal"' in both
    assert 'containerd 2.1 and 2.3 use binaryName = "/usr/local/bin/standin-both-camel"' in both
    assert all(p.severity.value == "error" for p in problems)


def test_spellings_lint_as_the_table_says():
    problems = _lint(config_used("2.3.4"))
    rules = {(p.key_path.split(".")[-3], p.key_path.split(".")[-1]): p.rule for p in problems
             if ".options." in p.key_path and p.rule != "binary-missing"}
    assert rules[("camel", "binaryName")] == "option-spelling"
    assert rules[("upper", "BINARYNAME")] == "option-spelling"
    assert rules[("snake", "binary_name")] == "option-outside-options"
    assert ("pascal", "BinaryName") not in rules
    severities = {p.rule: p.severity.value for p in problems}
    assert severities["option-spelling"] == "warning"
    assert severities["option-outside-options"] == "error"
