"""The CDI validator against a table of specs: verdicts, field paths and lines, as the loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuready.cdi.validate import RULE_CONFLICT, RULE_IGNORED, scan, validate_file
from gpuready.problems import Severity

DATA = Path(__file__).parent / "data" / "cdi"
CASES = yaml.safe_load((DATA / "cases.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_spec_table(case):
    """Each spec gets the loader's verdict, errors at exactly the listed field paths, and lines."""
    problems = validate_file(DATA / "specs" / case["file"])
    errors = [p for p in problems if p.severity is Severity.ERROR]
    warnings = [p for p in problems if p.severity is Severity.WARNING]
    assert (not errors) is case["valid"], [p.message for p in errors]
    assert sorted({p.key_path for p in errors}) == sorted(case["errors"]), [
        (p.key_path, p.message) for p in errors]
    assert sorted({p.key_path for p in warnings}) == sorted(case.get("warnings", []))
    for key_path, line in case.get("lines", {}).items():
        assert any(p.key_path == key_path and p.line == line for p in problems), [
            (p.key_path, p.line) for p in problems]
    assert all(p.file == str(DATA / "specs" / case["file"]) for p in problems)


def test_version_error_names_the_field_that_needs_it():
    """A spec declaring 0.3.0 with device "0" is refused at the name, saying v0.5.0 is needed."""
    problems = validate_file(DATA / "specs" / "min-0.5.0-digit-name.yaml")
    (problem,) = problems
    assert problem.rule == "cdi-spec-invalid"
    assert "at least v0.5.0" in problem.message
    assert problem.fix == 'cdiVersion: "0.5.0"'


def _spec(kind: str, *names: str) -> str:
    devices = "".join(f'- name: "{n}"\n  containerEdits:\n    env: [A=1]\n' for n in names)
    return f'cdiVersion: "0.5.0"\nkind: {kind}\ndevices:\n{devices}'


def test_directory_reads_only_json_and_yaml_at_top_level(tmp_path):
    """.yml files are ignored (with a warning) and subfolders are not read, as by the CDI cache."""
    folder = tmp_path / "cdi"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.yaml").write_text(_spec("nvidia.com/gpu", "0"))
    (folder / "b.yml").write_text(_spec("nvidia.com/gpu", "1"))
    (folder / "sub" / "c.yaml").write_text(_spec("nvidia.com/gpu", "2"))
    (folder / "notes.txt").write_text("not a spec")
    result = scan([folder])
    assert sorted(result.devices) == ["nvidia.com/gpu=0"]
    assert [p.rule for p in result.problems] == [RULE_IGNORED]
    assert result.problems[0].file.endswith("b.yml")


def test_same_device_in_two_files_of_one_folder_is_a_conflict(tmp_path):
    """Both files get a conflict error and the device is dropped; the others stay."""
    folder = tmp_path / "cdi"
    folder.mkdir()
    (folder / "a.yaml").write_text(_spec("nvidia.com/gpu", "0", "1"))
    (folder / "b.json").write_text(
        '{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": '
        '[{"name": "1", "containerEdits": {"env": ["B=2"]}}]}')
    result = scan([folder])
    assert sorted(result.devices) == ["nvidia.com/gpu=0"]
    conflicts = [p for p in result.problems if p.rule == RULE_CONFLICT]
    assert sorted(Path(p.file).name for p in conflicts) == ["a.yaml", "b.json"]
    assert all(p.severity is Severity.ERROR for p in conflicts)


def test_later_folder_wins(tmp_path):
    """A device in /var/run/cdi overrides the same device in /etc/cdi; no conflict."""
    static, dynamic = tmp_path / "etc", tmp_path / "run"
    static.mkdir()
    dynamic.mkdir()
    (static / "a.yaml").write_text(_spec("nvidia.com/gpu", "0", "1"))
    (dynamic / "b.yaml").write_text(_spec("nvidia.com/gpu", "1"))
    result = scan([static, dynamic])
    assert result.devices["nvidia.com/gpu=1"].file == dynamic / "b.yaml"
    assert result.devices["nvidia.com/gpu=0"].file == static / "a.yaml"
    assert not any(p.severity is Severity.ERROR for p in result.problems)


def test_refused_spec_contributes_no_devices(tmp_path):
    """A spec the loader refuses adds none of its devices."""
    folder = tmp_path / "cdi"
    folder.mkdir()
    (folder / "a.yaml").write_text(_spec("nvidia.com/gpu", "0", "-bad"))
    result = scan([folder])
    assert result.devices == {}
    assert result.specs[0].accepted is False


def test_missing_path_is_unreadable(tmp_path):
    """A path given that does not exist is unreadable input, not an invalid spec."""
    result = scan([tmp_path / "nope.yaml"])
    assert len(result.unreadable) == 1
    assert "no such file" in result.unreadable[0].message()


@pytest.mark.parametrize(
    "content,code,status,verdict",
    [
        (_spec("nvidia.com/gpu", "0"), 0, "ok", "valid"),
        (_spec("nvidia.com/gpu", "0", "0"), 1, "failed", "invalid"),
        (None, 2, "error", "unreadable"),
    ],
    ids=["valid", "invalid", "unreadable"],
)
def test_json_status_is_the_one_every_command_uses(tmp_path, capsys, content, code, status,
                                                   verdict):
    """``status`` is ok/failed/error as for lint, doctor and check; ``verdict`` says why."""
    import json

    from tests.rules_support import run_cli

    spec = tmp_path / "nvidia.yaml"
    if content is not None:
        spec.write_text(content)
    exit_code, out, _ = run_cli(["cdi", "validate", "--format", "json", str(spec)], capsys)
    report = json.loads(out)
    assert (exit_code, report["status"], report["verdict"]) == (code, status, verdict)
    exit_code, out, _ = run_cli(["cdi", "list", "--format", "json", str(spec)], capsys)
    assert (exit_code, json.loads(out)["status"]) == (code, status)  # a named spec refused: 1


def test_json_error_has_exit_code_and_error(tmp_path, capsys, monkeypatch):
    import json

    from tests.cli_runner import run_cli

    missing = tmp_path / "missing.yaml"
    result = run_cli(capsys, monkeypatch, "cdi", "validate", "--format", "json", str(missing))
    report = json.loads(result.out)
    assert result.code == 2
    assert report["status"] == "error" and report["exit_code"] == 2
    assert str(missing) in report["error"]
    listed = json.loads(run_cli(capsys, monkeypatch, "cdi", "list", "--format", "json",
                                str(missing)).out)
    assert listed["exit_code"] == 2 and str(missing) in listed["error"]


def test_every_case_where_the_loader_disagrees_with_the_text_says_why():
    """A spec the loader accepts although its text says otherwise: valid, a warning, a reason."""
    disagreeing = [c for c in CASES if c["file"].startswith("loader-") and c["valid"]]
    assert len(disagreeing) == 3
    for case in disagreeing:
        assert case.get("reason") and case.get("warnings"), case["file"]
