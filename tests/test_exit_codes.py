"""One exit-code contract for every command and engine, driven through each situation.

0: done, or nothing to do; 1: a finding (lint error, failed check or verification); 2: bad input,
usage or a refusal, with nothing written; 3: the runtime could not be reached. Each case checks the
code, the one-line message, and with ``--format json`` a JSON object with ``exit_code`` and
``error``. A case that exits 2 or 3 must leave every file of the world as it was. The README's
table and every ``--help`` are checked against :data:`gpuready.errors.EXIT_CODES`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Callable, NamedTuple

import pytest

from gpuready.cli import main
from gpuready.cli.commands import COMMANDS
from gpuready.errors import EXIT_CODES, exit_code_help
from tests import driver_trees as trees
from tests.userdocs import section

LINE = ("--containerd-version", "1.7")
NO_CONFIG = "containerd runs its built-in defaults"
NOT_A_NODE = "so it is not a node's root"
JSON_COMMANDS = {"setup", "configure", "unconfigure", "show-config", "migrate", "check", "lint",
                 "doctor", "audit", "verify"}


class Case(NamedTuple):
    """One command line in one situation, and what a user must see."""

    argv: Callable[[Path], list[str]]  # from the world's folder
    code: int
    says: str


def node_cases() -> dict[str, Case]:
    """Every command on the node situations, for the containerd engine."""
    cases = {}
    for name, argv in {
        "check": ["check"], "lint": ["lint"], "doctor": ["doctor"],
        "show-config": ["show-config"], "configure": ["configure"],
        "unconfigure": ["unconfigure", "--dry-run"], "migrate": ["migrate", "--to", "3"],
    }.items():
        line = [*LINE] if name != "migrate" else ["--containerd-version", "2.1"]
        cases[f"{name}-ok"] = Case(
            lambda w, a=argv, v=line: [*a, "--root", str(w / "good"), *v], 0, "")
        cases[f"{name}-missing-config"] = Case(
            lambda w, a=argv, v=line: [*a, "--root", str(w / "bare"), *v], 2, NO_CONFIG)
        cases[f"{name}-mistyped-root"] = Case(
            lambda w, a=argv, v=line: [*a, "--root", str(w / "god"), *v], 2, NOT_A_NODE)
        cases[f"{name}-unknown-option"] = Case(
            lambda w, a=argv: [*a, "--root", str(w / "good"), "--runtime-nmae", "x"], 2,
            "unrecognized arguments")
    cases["migrate-ok"] = cases["migrate-ok"]._replace(
        argv=lambda w: ["migrate", "--to", "3", "--dry-run", "--root", str(w / "good"),
                        "--containerd-version", "2.1"])
    for name in ("validate", "list"):
        cases[f"cdi-{name}-ok"] = Case(lambda w, n=name: ["cdi", n, "--root", str(w / "good")],
                                       0, "")
        cases[f"cdi-{name}-refused-spec"] = Case(
            lambda w, n=name: ["cdi", n, "--root", str(w / "broken-cdi")], 1, "")
        cases[f"cdi-{name}-mistyped-root"] = Case(
            lambda w, n=name: ["cdi", n, "--root", str(w / "god")], 2, NOT_A_NODE)
    cases.update({
        "setup-ok": Case(lambda w: ["setup", "--root", str(w / "new"), *LINE, "--dry-run"], 0, ""),
        "setup-unknown-option": Case(lambda w: ["setup", "--rot", str(w / "new")], 2,
                                     "did you mean '--root'"),
        "lint-finding": Case(lambda w: ["lint", str(w / "string-bool.toml"), *LINE], 1, ""),
        "check-finding": Case(lambda w: ["check", "--root", str(w / "edited"), *LINE], 1, ""),
        "doctor-finding": Case(lambda w: ["doctor", "--root", str(w / "edited"), *LINE], 1, ""),
        "audit-ok": Case(lambda w: ["audit", str(w / "good")], 0, ""),
        "audit-finding": Case(lambda w: ["audit", str(w / "edited")], 1, ""),
        "audit-mistyped-folder": Case(lambda w: ["audit", str(w / "godd")], 2,
                                      "did you mean 'good'"),
        "rules-ok": Case(lambda w: ["rules", "bool-as-string"], 0, ""),
        "rules-mistyped": Case(lambda w: ["rules", "bool-as-strin"], 2,
                               "did you mean 'bool-as-string'"),
        "command-mistyped": Case(lambda w: ["confgure"], 2, "did you mean 'configure'"),
        "engine-mistyped": Case(lambda w: ["configure", "--engine", "dokcer"], 2,
                                "did you mean 'docker'"),
        "cdi-generate-ok": Case(lambda w: ["cdi", "generate", "--root", str(w / "good"),
                                           "--gpus", "1", "--dry-run"], 0, ""),
        "cdi-refresh-ok": Case(lambda w: ["cdi", "refresh", "--root", str(w / "good")], 0, ""),
        "cdi-refresh-mistyped-root": Case(lambda w: ["cdi", "refresh", "--root", str(w / "god")],
                                          2, NOT_A_NODE),
        "cdi-refresh-unreadable-spec": Case(
            lambda w: ["cdi", "refresh", "--root", str(w / "unreadable-cdi")], 2,
            "not a CDI spec gpuready can read"),
        "cdi-refresh-not-gpuready-s": Case(
            lambda w: ["cdi", "refresh", "--root", str(w / "hand-made-cdi")], 2,
            "no intent record of gpuready's describes it"),
        "cdi-refresh-stays-stale": Case(
            lambda w: ["cdi", "refresh", "--root", str(w / "stale-cdi")], 1, ""),
        "gate-refusal": Case(lambda w: ["configure", "--root", str(w / "v3"), *LINE], 2,
                             "refusing the change"),
        "set-as-default-refusal": Case(
            lambda w: ["configure", "--root", str(w / "good"), *LINE, "--set-as-default"], 2,
            "refusing --set-as-default"),
        "verify-unreachable": Case(
            lambda w: ["verify", "--live", "--root", str(w / "good"), "--address",
                       f"unix://{w}/no-such.sock", "--timeout", "1"], 3, ""),
    })
    return cases


def engine_cases() -> dict[str, Case]:
    """The Docker and CRI-O engines through the same situations."""
    return {
        "docker-check-ok": Case(lambda w: ["check", "--engine", "docker", "--root",
                                           str(w / "docker")], 0, ""),
        "docker-lint-ok": Case(lambda w: ["lint", "--engine", "docker", "--root",
                                          str(w / "docker")], 0, ""),
        "docker-doctor-ok": Case(lambda w: ["doctor", "--engine", "docker", "--root",
                                            str(w / "docker")], 0, ""),
        "docker-configure-ok": Case(lambda w: ["configure", "--engine", "docker", "--root",
                                               str(w / "docker")], 0, ""),
        "docker-configure-mistyped-root": Case(
            lambda w: ["configure", "--engine", "docker", "--root", str(w / "dockr")], 2,
            NOT_A_NODE),
        "docker-verify-unreachable": Case(
            lambda w: ["verify", "--live", "--engine", "docker", "--root", str(w / "docker"),
                       "--docker-address", f"unix://{w}/no-docker.sock"], 3, ""),
        **{f"docker-{command}-missing-config": Case(
            lambda w, c=command: [c, "--engine", "docker", "--root", str(w / "bare")], 2,
            "without it dockerd runs its defaults") for command in (
                "check", "lint", "doctor", "unconfigure")},
        "docker-configure-unknown-option": Case(
            lambda w: ["configure", "--engine", "docker", "--docker-adress", "x"], 2,
            "did you mean '--docker-address'"),
        "crio-configure-ok": Case(lambda w: ["configure", "--engine", "crio", "--root",
                                             str(w / "crio"), "--dry-run"], 0, ""),
        "crio-lint-missing-config": Case(lambda w: ["lint", "--engine", "crio", "--root",
                                                    str(w / "bare")], 2, "no CRI-O config"),
        "crio-doctor-mistyped-root": Case(
            lambda w: ["doctor", "--engine", "crio", "--root", str(w / "cri")], 2, NOT_A_NODE),
    }


CASES = {**node_cases(), **engine_cases()}


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``gpuready ARGV`` in this process: code, standard output, standard error."""
    capsys.readouterr()
    code = main.run(argv)
    captured = capsys.readouterr()
    return int(code), captured.out, captured.err


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """Nodes in every state the cases need, made with gpuready's own setup."""
    folder = tmp_path_factory.mktemp("world")
    for name, argv in {
        "good": ["setup", *LINE],
        "edited": ["setup", *LINE],
        "docker": ["setup", "--engine", "docker"],
    }.items():
        assert main.run([*argv, "--root", str(folder / name)]) == 0, name
    config = folder / "edited/etc/containerd/config.toml"
    config.write_text(config.read_text().replace('SystemdCgroup = true',
                                                 'SystemdCgroup = "true"'))
    (folder / "bare/etc").mkdir(parents=True)
    (folder / "crio/etc/crio").mkdir(parents=True)
    (folder / "crio/etc/crio/crio.conf").write_text('[crio.runtime]\ndefault_runtime = "crun"\n')
    (folder / "string-bool.toml").write_text(config.read_text())
    (folder / "v3/etc/containerd").mkdir(parents=True)
    (folder / "v3/etc/containerd/config.toml").write_text(
        'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd]\n'
        '  default_runtime_name = "runc"\n')
    shutil.copytree(folder / "good", folder / "unreadable-cdi")
    (folder / "unreadable-cdi/etc/cdi/nvidia.yaml").write_text("kind: [\n")
    for name in ("stale-cdi", "hand-made-cdi"):  # a driver showing 2 GPUs, a spec for 4
        shutil.copytree(folder / "good", folder / name)
        trees.install_driver(folder / name, trees.VERSION_A, gpus=2)
        for device in (folder / name / "dev").iterdir():  # plain files: the world is read whole
            device.unlink()
            device.touch()
        assert main.run(["cdi", "generate", "--root", str(folder / name), "--gpus", "4",
                         "--no-nvml", "--force"]) == 0
    spec = folder / "hand-made-cdi/etc/cdi/nvidia.yaml"
    spec.write_text(spec.read_text() + "# by hand\n")
    shutil.copytree(folder / "good", folder / "broken-cdi")
    (folder / "broken-cdi/etc/cdi/broken.yaml").write_text("cdiVersion: 0.5.0\nkind: x\n")
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` and its bytes, and every folder (as empty bytes' key)."""
    return {str(p.relative_to(folder)) + ("/" if p.is_dir() else ""):
            (b"" if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


def error_lines(err: str) -> list[str]:
    """The ``gpuready: error:`` lines of standard error."""
    return [line for line in err.splitlines() if line.startswith("gpuready: error:")]


@pytest.mark.parametrize("name", list(CASES))
def test_each_situation_exits_as_the_table_says(name: str, world: Path, capsys) -> None:
    case = CASES[name]
    argv = case.argv(world)
    before = snapshot(world)
    code, out, err = run(capsys, argv)
    shown = f"{argv}\nexit {code}\nstdout: {out[-1500:]}\nstderr: {err[-1500:]}"
    assert code == case.code, shown
    if case.code >= 2:
        assert snapshot(world) == before, f"exit {code} but a file changed\n{shown}"
        lines = error_lines(err)
        assert len(lines) == 1, shown
        assert case.says in lines[0], shown
    else:
        assert not error_lines(err) or case.code == 1, shown
    if argv and argv[0] in JSON_COMMANDS and "--format" not in argv:
        code, out, err = run(capsys, [*argv, "--format", "json"])
        assert code == case.code, f"--format json: exit {code}\n{shown}"
        document = json.loads(out)
        assert isinstance(document, dict), out
        if case.code >= 2:
            assert document["exit_code"] == case.code and case.says in document["error"], out


@pytest.mark.parametrize("command", [command.name for command in COMMANDS])
def test_usage_errors_of_every_command_are_json_when_asked(command: str, capsys) -> None:
    code, out, err = run(capsys, [command, "--no-such-option", "--format", "json"])
    assert code == 2
    document = json.loads(out)
    assert document["exit_code"] == 2 and document["status"] == "error"
    # argparse names a missing required argument (migrate's --to) before an unknown option
    assert re.match("unrecognized arguments: --no-such-option|the following arguments are "
                    "required|argument ACTION", document["error"]), document
    assert error_lines(err) == [f"gpuready: error: {document['error']}"]


@pytest.mark.parametrize("command", [command.name for command in COMMANDS])
def test_every_help_ends_with_the_one_table(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main.run([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(exit_code_help().splitlines()[-1].strip())
    for code, _ in EXIT_CODES:
        assert re.search(rf"^  {int(code)}  ", out, re.M), out
    assert "exit codes:" not in out.replace(exit_code_help().splitlines()[0], ""), (
        "a second, command-own exit-code table")


def test_readme_table_is_the_one_table() -> None:
    table = section("### Exit codes")
    rows = re.findall(r"^\| (\d) \| (.+) \|$", table[:table.index("\n\n", 200)], re.M)
    assert [(int(code), meaning) for code, meaning in rows] == [
        (int(code), meaning) for code, meaning in EXIT_CODES]


def test_setup_makes_a_new_root_but_says_so(tmp_path: Path, capsys) -> None:
    """``setup`` alone makes node roots (the Quick start's sandbox), and names a root it makes,
    so a mistyped root of an existing node does not pass unnoticed."""
    code, _, err = run(capsys, ["setup", "--root", str(tmp_path / "new"), *LINE])
    assert code == 0
    assert f"--root {tmp_path / 'new'} did not exist: a new sandbox node was made there" in err
    code, _, err = run(capsys, ["setup", "--root", str(tmp_path / "new"), *LINE])
    assert code == 0 and "did not exist" not in err


def test_an_error_of_cdi_generate_never_lands_in_the_spec_it_writes(tmp_path: Path, capsys) -> None:
    """``cdi generate --format json`` writes the spec as JSON to standard output: an error there
    prints no error object (it would land in ``> /etc/cdi/nvidia.json``), usage error or not."""
    (tmp_path / "etc").mkdir()
    for argv in (["cdi", "generate", "--format", "json", "--gpus", "0"],
                 ["cdi", "generate", "--format", "json", "--root", str(tmp_path), "--no-nvml"]):
        code, out, err = run(capsys, argv)
        assert code == 2 and out == "" and len(error_lines(err)) == 1, (argv, out, err)
