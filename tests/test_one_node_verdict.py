"""One verdict for one node: setup, check, lint, doctor and audit agree on whether containerd
loads the GPU runtime, on the node's containerd line.

Every fixture and corpus file is a node's config (under a root); `setup` runs on it first (or
refuses it, writing nothing). Then `check`, `lint` (without FILE: the node as containerd reads
it), `doctor` and `audit` are asked about the same node on the same line, named with
`--containerd-version` (1.7 for a version 1 or 2 file, 2.1 for 3, 2.3 for 4). Their answers to
"can a pod use runtime nvidia" must be one. `verify --live` gives the same answer from a running
containerd (tests/test_never_break.py starts one on the results).
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.textfile import without_bom
from tests.helpers import DATA, into_root, run_cli

SOURCES = (sorted((DATA / "corpus-real").glob("*.toml")) + sorted((DATA / "corpus").glob("*.toml"))
           + sorted((DATA / "containerd").glob("*.toml")))
LINE_OF_VERSION = {1: "1.7", 2: "1.7", 3: "2.1", 4: "2.3"}
# the findings that mean a pod cannot use the runtime: not in the table the line reads, the
# CRI plugin off or failing on its default runtime, containerd not starting on the files
NOT_USABLE = {"runtime-not-registered", "cri-disabled", "default-runtime-missing",
              "import-missing", "version-unsupported"}


def _line(source: Path) -> str:
    version = tomllib.loads(without_bom(source.read_text(encoding="utf-8"))).get("version", 1)
    return LINE_OF_VERSION.get(version, "2.3")


@pytest.fixture(scope="module")
def nodes(tmp_path_factory) -> dict[str, dict]:
    """Each source set up as a node; audit asked about all of them, one run per line."""
    base = tmp_path_factory.mktemp("nodes")
    found: dict[str, dict] = {}

    def prepare(source: Path) -> None:
        root = base / _line(source) / f"{source.parent.name}-{source.stem}"
        config = root / "etc/containerd/config.toml"
        config.parent.mkdir(parents=True)
        shutil.copyfile(source, config)
        setup = run_cli("setup", "--root", str(root), "--containerd-version", _line(source),
                        "--format", "json")
        found[source.name] = {"root": root, "line": _line(source), "setup": setup}

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(prepare, SOURCES))
    for line in {entry["line"] for entry in found.values()}:
        audit = run_cli("audit", str(base / line), "--containerd-version", line,
                        "--format", "json", "--jobs", "2")
        by_node = {Path(n["node"]).name: n for n in json.loads(audit.out)["nodes"]}
        for entry in found.values():
            if entry["line"] == line:
                entry["audit"] = by_node[entry["root"].name]
    return found


def _usable_by_rules(problems: list[dict]) -> bool:
    return not any(p["rule"] in NOT_USABLE and p["severity"] == "error" for p in problems)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_command_gives_the_node_one_verdict(source, nodes):
    entry = nodes[source.name]
    root, line = str(entry["root"]), entry["line"]
    verdicts = {}
    setup = entry["setup"]
    document = json.loads(setup.out)
    if "checks" in document:  # setup wrote the node: its own checks are a verdict
        checks = {c["name"]: c for c in document["checks"]}
        verdicts["setup"] = checks["runtime nvidia registered"]["ok"]
    else:  # refused (exit 2), or stopped on a finding of the default runtime (exit 1)
        assert setup.code in (1, 2) and "nothing written" in setup.out + setup.err
    check = json.loads(run_cli("check", "--root", root, "--containerd-version", line,
                               "--format", "json").out)
    verdicts["check"] = {c["name"]: c for c in check["checks"]}["runtime nvidia registered"]["ok"]
    for command in ("lint", "doctor"):
        result = run_cli(command, "--root", root, "--containerd-version", line, "--format",
                         "json")
        verdicts[command] = _usable_by_rules(json.loads(result.out)["problems"])
    verdicts["audit"] = _usable_by_rules(entry["audit"]["problems"])
    assert len(set(verdicts.values())) == 1, verdicts
    if setup.code == 0:  # what setup leaves is usable: it refuses anything else (a node
        assert verdicts["setup"], setup.out  # kubespray or kind rewrites gets advice, exit 1


def _verdicts(root: Path, line: str) -> dict[str, bool]:
    check = json.loads(run_cli("check", "--root", str(root), "--containerd-version", line,
                               "--format", "json").out)
    verdicts = {"check": {c["name"]: c for c in check["checks"]}["runtime nvidia registered"]["ok"]}
    for command in ("lint", "doctor"):
        result = run_cli(command, "--root", str(root), "--containerd-version", line, "--format",
                         "json")
        verdicts[command] = _usable_by_rules(json.loads(result.out)["problems"])
    return verdicts


@pytest.mark.parametrize("line", ["1.6", "1.7", "2.1"])
def test_after_a_drop_in_lint_doctor_and_check_agree_the_runtime_is_loaded(tmp_path, line):
    source = DATA / "containerd" / ("lab-base.toml" if line < "2" else
                                    "containerd-2.1.9-default.toml")
    config = tmp_path / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(source, config)
    result = run_cli("configure", "--root", str(tmp_path), "--drop-in",
                     "--containerd-version", line)
    assert result.code == 0, result.err
    assert _verdicts(tmp_path, line) == {"check": True, "lint": True, "doctor": True}


def test_a_version_3_file_on_a_1_6_node_fails_setup_and_check_with_the_real_reason(tmp_path):
    base = into_root(tmp_path, DATA / "containerd" / "containerd-2.1.9-default.toml")
    setup = run_cli("setup", "--root", str(tmp_path), "--base", str(base),
                    "--containerd-version", "1.6")
    assert setup.code == 2, setup.out + setup.err
    assert "containerd 1.6 reads config versions 1 and 2" in setup.err
    assert not (tmp_path / "etc/containerd/config.toml").exists()
    # the same file, written for 2.1 and then judged as the 1.6 node would read it
    assert run_cli("setup", "--root", str(tmp_path), "--base", str(base),
                   "--containerd-version", "2.1").code == 0
    check = json.loads(run_cli("check", "--root", str(tmp_path), "--containerd-version", "1.6",
                               "--format", "json").out)
    found = {c["name"]: c for c in check["checks"]}["runtime nvidia registered"]
    assert not found["ok"]
    assert "containerd 1.6" in found["detail"]
    assert _verdicts(tmp_path, "1.6") == {"check": False, "lint": False, "doctor": False}


def test_a_node_another_tool_left_without_runc_is_an_error_with_the_fix(tmp_path):
    """nvidia-ctk 1.20 on Debian's stock file: a runtimes table holding only nvidia."""
    config = tmp_path / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text((DATA / "corpus-real" / "debian-12-containerd-package.toml").read_text()
                      + '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
                      '  runtime_type = "io.containerd.runc.v2"\n')
    for command in ("lint", "doctor"):
        result = json.loads(run_cli(command, "--root", str(tmp_path), "--containerd-version",
                                    "1.6", "--format", "json").out)
        [problem] = [p for p in result["problems"] if p["rule"] == "default-runtime-missing"]
        assert problem["severity"] == "error" and "runtimes.runc" in problem["fix"]
    assert _verdicts(tmp_path, "1.6") == {"check": False, "lint": False, "doctor": False}
    # configure repairs it: runc written beside nvidia, from 1.6's own default
    assert run_cli("configure", "--root", str(tmp_path), "--containerd-version", "1.6").code == 0
    assert _verdicts(tmp_path, "1.6") == {"check": True, "lint": True, "doctor": True}
