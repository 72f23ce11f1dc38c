"""The node's facts before the contract's defaults: whether systemd runs decides the cgroup
verdict of setup, check, lint, doctor and audit, before any probe.

Each node is a sandbox root holding the contract's base fixture and, where a case says so, the
evidence of its init: ``run/systemd/system`` (systemd runs), ``proc/1/comm`` naming another
PID 1 (it does not), or nothing (unknown: the Quick start's sandbox).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.containerd.runc_options import is_runc
from gpuready.containerd.versions import spec_of
from gpuready.init_system import systemd_fact
from gpuready.node import Node
from gpuready.textfile import without_bom
from gpuready.workflow.setup import runc_on_cgroupfs
from tests.helpers import DATA, added_lines_only, run_cli, stage_fixture

RULE = "systemd-cgroup-without-systemd"
RUNC_SAYS = "systemd not running on this host, cannot use systemd cgroups manager"
CONTRACT_REPORT = ("CONFIG_VERSION=2\nRUNTIME=nvidia\nRUNTIME_TYPE=io.containerd.runc.v2\n"
                   "SYSTEMD_CGROUP=true\nHANDLER=nvidia\n")


def _node(tmp_path: Path, *, pid1: str | None = None, systemd_dir: bool = False,
          kubelet: str | None = None, name: str = "node") -> Path:
    root = tmp_path / name
    stage_fixture(root)
    if pid1 is not None:
        (root / "proc/1").mkdir(parents=True)
        (root / "proc/1/comm").write_text(f"{pid1}\n")
    if systemd_dir:
        (root / "run/systemd/system").mkdir(parents=True)
    if kubelet is not None:
        (root / "var/lib/kubelet").mkdir(parents=True)
        (root / "var/lib/kubelet/config.yaml").write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"cgroupDriver: {kubelet}\n")
    return root


def _options(root: Path) -> dict[str, object]:
    """Each runtime's options, as tomllib reads the node's config."""
    data = tomllib.loads((root / "etc/containerd/config.toml").read_text())
    runtimes = data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    return {name: entry.get("options", {}) for name, entry in runtimes.items()}


def _setup(root: Path, *extra: str):
    return run_cli("setup", "--root", str(root), "--containerd-version", "1.7", *extra)


def _checks(root: Path) -> tuple[int, dict[str, dict]]:
    result = run_cli("check", "--root", str(root), "--containerd-version", "1.7",
                     "--format", "json")
    return result.code, {c["name"]: c for c in json.loads(result.out)["checks"]}


def _rules(command: str, root: Path) -> tuple[int, list[dict]]:
    result = run_cli(command, "--root", str(root), "--containerd-version", "1.7",
                     # the cgroup verdict alone: a 1.7 node reads setup's CDI spec only with
                     # enable_cdi (cdi-not-read), which is not this file's concern
                     "--format", "json", "--ignore", "binary-missing,cdi-not-read")
    assert result.code in (0, 1), result.out + result.err
    return result.code, json.loads(result.out)["problems"]


# -- no systemd on the node ------------------------------------------------------------------


@pytest.mark.parametrize("pid1", ["init", "tini", "openrc-init"])
def test_setup_writes_cgroupfs_where_the_root_shows_no_systemd(tmp_path, pid1):
    root = _node(tmp_path, pid1=pid1)
    result = _setup(root)
    assert result.code == 0, result.out + result.err
    options = _options(root)
    assert options["nvidia"]["SystemdCgroup"] is False
    assert options["runc"]["SystemdCgroup"] is False  # the staged base's runc as well
    assert "SystemdCgroup = false" in result.out
    assert f"note: systemd does not run on this node (PID 1 is {pid1!r}" in result.out
    assert "note: the staged base's runc runtimes get SystemdCgroup = false as well" in result.out
    # the report is parsed back from the files: it says what was written
    assert "SYSTEMD_CGROUP=false\n" in (root / "root/toolkit/report.txt").read_text()
    code, checks = _checks(root)
    assert code == 0
    assert checks["SystemdCgroup is a boolean"]["ok"]
    assert checks["cgroup drivers agree"]["ok"] and not checks["cgroup drivers agree"]["warning"]
    for command in ("lint", "doctor"):
        assert _rules(command, root) == (0, []), command


def test_setup_dry_run_plans_cgroupfs_and_writes_nothing(tmp_path):
    root = _node(tmp_path, pid1="tini")
    result = _setup(root, "--dry-run")
    assert result.code == 0, result.out + result.err
    added = [line for line in result.out.splitlines() if line.startswith("+")]
    assert [line.strip() for line in added if "SystemdCgroup" in line] == [
        "+            SystemdCgroup = false"] * 2  # runc's and nvidia's
    assert not (root / "etc/containerd/config.toml").exists()


def test_an_explicit_systemd_cgroup_true_is_written_and_judged(tmp_path):
    root = _node(tmp_path, pid1="openrc-init")
    result = _setup(root, "--systemd-cgroup", "true")
    assert result.code == 1, result.out + result.err
    options = _options(root)
    assert options["nvidia"]["SystemdCgroup"] is True and options["runc"]["SystemdCgroup"] is True
    assert f"FAIL cgroup drivers agree: {RULE}: runtimes 'nvidia' and 'runc' have " \
           "SystemdCgroup = true but systemd does not run on this node" in result.out
    assert RUNC_SAYS in result.out
    assert "fix: set SystemdCgroup = false (the cgroupfs driver) in the options of runtimes " \
           "'nvidia' and 'runc' ('gpuready configure --systemd-cgroup false' does it for " \
           "'nvidia')" in result.out
    # one verdict: check, lint (the node) and doctor give the same error, with the same fix
    code, checks = _checks(root)
    assert code == 1
    cgroup = checks["cgroup drivers agree"]
    assert not cgroup["ok"] and cgroup["detail"].startswith(f"{RULE}: ")
    assert checks["SystemdCgroup is a boolean"]["ok"]  # one cause, one failure
    for command in ("lint", "doctor"):
        code, problems = _rules(command, root)
        assert code == 1, command
        assert [(p["rule"], p["severity"]) for p in problems] == [(RULE, "error")], problems
        assert problems[0]["message"] == cgroup["detail"][len(RULE) + 2:]
        assert problems[0]["fix"] == cgroup["fix"]
        assert problems[0]["key_path"].endswith(".runtimes.nvidia.options.SystemdCgroup")
        assert problems[0]["line"] and problems[0]["column"]


def test_the_fix_the_finding_names_clears_it(tmp_path):
    root = _node(tmp_path, pid1="tini")
    assert _setup(root, "--systemd-cgroup", "true").code == 1
    configured = run_cli("configure", "--root", str(root), "--containerd-version", "1.7",
                         "--systemd-cgroup", "false")
    # configure says what is left at once: the operator's runc, with the same fix as lint
    assert configured.code == 1, configured.out + configured.err
    assert f"error {RULE}: runtime 'runc' has SystemdCgroup = true" in configured.out
    code, problems = _rules("lint", root)
    # runc is the operator's own: its SystemdCgroup = true is what is left, and said so
    assert code == 1
    assert [p["key_path"].split(".")[-3] for p in problems] == ["runc"]
    assert problems[0]["fix"] == ("set SystemdCgroup = false (the cgroupfs driver) in the options "
                                  "of runtime 'runc', or run the node with systemd")
    config = root / "etc/containerd/config.toml"
    config.write_text(config.read_text().replace("SystemdCgroup = true", "SystemdCgroup = false"))
    assert _rules("lint", root) == (0, [])
    again = _setup(root)  # the toolkit files follow the config again
    assert again.code == 0, again.out + again.err
    assert "SYSTEMD_CGROUP=false\n" in (root / "root/toolkit/report.txt").read_text()
    assert _checks(root)[0] == 0


def test_an_existing_config_keeps_its_runc_and_setup_says_what_is_left(tmp_path):
    root = _node(tmp_path, pid1="tini")
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes((root / "opt/fixtures/gpu-airgap/containerd/config.toml.base").read_bytes())
    before = config.read_text()
    result = _setup(root)
    assert result.code == 1, result.out + result.err
    options = _options(root)
    assert options["nvidia"]["SystemdCgroup"] is False
    assert options["runc"]["SystemdCgroup"] is True  # the operator's runc is not edited
    assert "staged base" not in result.out
    assert f"FAIL cgroup drivers agree: {RULE}: runtime 'runc' has SystemdCgroup = true" \
           in result.out
    assert added_lines_only(before, config.read_text())


def test_runc_alone_on_systemd_is_found_before_any_gpu_runtime_is_registered(tmp_path):
    root = _node(tmp_path, pid1="tini")
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes((root / "opt/fixtures/gpu-airgap/containerd/config.toml.base").read_bytes())
    for command in ("lint", "doctor"):
        code, problems = _rules(command, root)
        assert code == 1, command
        rules = {(p["rule"], p["key_path"].split(".")[-3]) for p in problems if p["rule"] == RULE}
        assert rules == {(RULE, "runc")}, problems


def test_the_kubelet_systemd_driver_without_systemd_is_the_error_at_the_kubelet(tmp_path):
    root = _node(tmp_path, pid1="tini", kubelet="systemd")
    result = _setup(root)
    assert result.code == 1, result.out + result.err
    kubelet = str(root / "var/lib/kubelet/config.yaml")
    assert f"the kubelet's cgroupDriver is systemd ({kubelet}) but systemd does not run" \
           in result.out
    assert f"fix: set cgroupDriver: cgroupfs in {kubelet}" in result.out
    code, problems = _rules("doctor", root)
    assert code == 1
    assert [(p["rule"], p["file"], p["key_path"]) for p in problems] == [
        (RULE, kubelet, "cgroupDriver")]
    # the kubelet on cgroupfs: every driver agrees with the node
    Path(kubelet).write_text(Path(kubelet).read_text().replace("systemd", "cgroupfs"))
    assert _rules("doctor", root) == (0, [])
    assert _checks(root)[0] == 0


def test_audit_gives_each_node_its_own_verdict(tmp_path):
    fleet = tmp_path / "fleet"
    without = _node(fleet, pid1="tini", name="without-systemd")
    sandbox = _node(fleet, name="sandbox")
    for root in (without, sandbox):
        assert _setup(root, "--systemd-cgroup", "true").code in (0, 1)
    result = run_cli("audit", str(fleet), "--containerd-version", "1.7", "--format", "json",
                     "--jobs", "1")
    nodes = {Path(n["node"]).name: n for n in json.loads(result.out)["nodes"]}
    assert RULE in {p["rule"] for p in nodes["without-systemd"]["problems"]}
    assert RULE not in {p["rule"] for p in nodes["sandbox"]["problems"]}


# -- systemd runs on the node ----------------------------------------------------------------


def test_where_systemd_runs_the_contract_stays_exactly(tmp_path):
    root = _node(tmp_path, systemd_dir=True, pid1="systemd")
    assert systemd_fact(Node(root)).running is True  # the root's own evidence, not this machine's
    result = _setup(root)
    assert result.code == 0, result.out + result.err
    assert "note: systemd" not in result.out
    assert _options(root)["nvidia"]["SystemdCgroup"] is True
    assert (root / "root/toolkit/report.txt").read_text() == CONTRACT_REPORT
    code, checks = _checks(root)
    assert code == 0 and checks["SystemdCgroup is the boolean true"]["ok"]
    for command in ("lint", "doctor"):
        assert _rules(command, root) == (0, []), command


def test_where_systemd_runs_false_against_the_kubelet_is_the_driver_mismatch(tmp_path):
    root = _node(tmp_path, systemd_dir=True, kubelet="systemd")
    assert systemd_fact(Node(root)).running is True
    result = _setup(root, "--systemd-cgroup", "false")
    assert result.code == 1, result.out + result.err
    assert "FAIL cgroup drivers agree: cgroup-driver-mismatch: runtime 'nvidia' has " \
           "SystemdCgroup = false but the kubelet's cgroupDriver is systemd" in result.out
    assert "fix: set SystemdCgroup = true in runtime 'nvidia''s options" in result.out
    code, problems = _rules("doctor", root)
    assert code == 1 and [p["rule"] for p in problems] == ["cgroup-driver-mismatch"]
    assert RULE not in result.out


# -- nothing says (the Quick start's sandbox) ------------------------------------------------


def test_a_sandbox_without_evidence_is_unknown_and_keeps_the_contract(tmp_path):
    root = tmp_path / "demo"  # the Quick start: setup creates the root
    result = run_cli("setup", "--root", str(root))
    assert result.code == 0, result.out + result.err
    assert systemd_fact(Node(root)).running is None  # whatever this machine runs
    assert "note: systemd" not in result.out and RULE not in result.out
    assert (root / "root/toolkit/report.txt").read_text() == CONTRACT_REPORT
    assert _options(root)["nvidia"]["SystemdCgroup"] is True
    for command in ("check", "lint", "doctor"):
        shown = run_cli(command, "--root", str(root))
        assert shown.code == 0, command + shown.out + shown.err
        assert RULE not in shown.out and "systemd does not run" not in shown.out
        assert "error" not in shown.out.replace("0 errors", "")


def test_an_explicit_false_is_kept_on_an_unknown_node(tmp_path):
    root = _node(tmp_path)
    assert systemd_fact(Node(root)).running is None
    result = _setup(root, "--systemd-cgroup", "false")
    assert "note: systemd" not in result.out and RULE not in result.out
    options = _options(root)
    assert options["nvidia"]["SystemdCgroup"] is False
    assert options["runc"]["SystemdCgroup"] is True  # no evidence: the base stays as it is


def test_rules_documents_the_rule():
    result = run_cli("rules", RULE)
    assert result.code == 0, result.err
    assert result.out.startswith(f"{RULE} (error; checked by lint, doctor)")
    assert "/run/systemd/system" in result.out and "proc/1/comm" in result.out
    assert "gpuready configure --systemd-cgroup false" in result.out


# -- the base a node without systemd gets ----------------------------------------------------

CORPUS = sorted(path for folder in ("corpus-real", "corpus", "containerd")
                for path in (DATA / folder).glob("*.toml"))


@pytest.mark.parametrize("source", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_staged_base_loses_only_its_systemd_cgroup_true(source):
    """Every real layout (BOM and CRLF, dotted keys, inline tables): each runc runtime's
    SystemdCgroup = true becomes false, and no other line changes."""
    text = source.read_bytes().decode("utf-8")
    after = runc_on_cgroupfs(text, source)
    changed = [line for line in difflib.ndiff(text.splitlines(True), after.splitlines(True))
               if line[:2] in ("- ", "+ ")]
    assert all("SystemdCgroup" in line for line in changed), changed
    assert [line[:2] for line in changed] == ["- ", "+ "] * (len(changed) // 2)
    data = tomllib.loads(without_bom(after))
    spec = spec_of(data)
    for name, entry in facts.runtimes(data, spec).items():
        if is_runc(entry):
            assert facts.runtime_options(entry).get("SystemdCgroup") is not True, name
    if any(facts.runtime_options(entry).get("SystemdCgroup") is True
           for entry in facts.runtimes(tomllib.loads(without_bom(text)), spec).values()
           if is_runc(entry)):
        assert changed  # a runc on systemd's driver was there: the edit is not vacuous
