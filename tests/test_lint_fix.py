"""``lint --fix`` reaches its fixed point in one run, and keeps a file's BOM and line endings."""

from __future__ import annotations

import shutil

import pytest

from gpuready.containerd.files import Options
from gpuready.rules import REGISTRY
from gpuready.rules.engine import lint_paths
from gpuready.textfile import BOM
from tests.rules_support import ALL_RULES, CASES, run_cli

FIXABLE = sorted(name for name, rule in REGISTRY.items() if rule.fixable)
OPTIONS_HEADER = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]'
BOTH_SPELLINGS = (
    "version = 2\n"
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
    '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
    "    SystemdCgroup = true\n"
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
    f"  {OPTIONS_HEADER}\n"
    '    SystemdCgroup = "true"  # the kubelet uses systemd\n'
    "    systemd_cgroup = true\n"
)


def fix(path, capsys, *extra: str) -> tuple[int, str]:
    (path.parent / "etc").mkdir(exist_ok=True)  # the folder is the node: --root needs an etc/
    code, out, _ = run_cli(["lint", "--fix", "--root", str(path.parent), *extra, str(path)], capsys)
    return code, out


def test_string_and_snake_case_systemd_cgroup_are_fixed_in_one_run(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text(BOTH_SPELLINGS)
    code, out = fix(path, capsys)
    assert code == 0, out
    assert "cannot fix" not in out
    assert "fixed: bool-as-string ×1, option-outside-options ×1" in out
    assert path.read_text() == BOTH_SPELLINGS.replace(
        '    SystemdCgroup = "true"  # the kubelet uses systemd\n    systemd_cgroup = true\n',
        "    SystemdCgroup = true  # the kubelet uses systemd\n",
    )
    fixed = path.read_bytes()
    code, out = fix(path, capsys)
    assert code == 0 and "nothing fixed" in out and path.read_bytes() == fixed


@pytest.mark.parametrize("name", FIXABLE)
def test_a_second_fix_changes_nothing(name, tmp_path, capsys):
    path = tmp_path / "config.toml"
    shutil.copy(CASES / name / "bad.toml", path)
    fix(path, capsys)
    fixed = path.read_bytes()
    code, out = fix(path, capsys)
    assert path.read_bytes() == fixed
    assert "nothing fixed" in out and "cannot fix" not in out
    assert code == 0, out


def lf_fixed(name: str, tmp_path, capsys) -> str:
    """The case fixed as written (LF, no BOM): what the styled file must match."""
    plain = tmp_path / "plain" / "config.toml"
    plain.parent.mkdir()
    shutil.copy(CASES / name / "bad.toml", plain)
    fix(plain, capsys)
    return plain.read_text()


@pytest.mark.parametrize("name", FIXABLE)
@pytest.mark.parametrize(
    "style",
    [
        lambda text: text.replace("\n", "\r\n"),
        lambda text: BOM + text,
        lambda text: BOM + text.replace("\n", "\r\n"),
    ],
    ids=["crlf", "bom", "bom-crlf"],
)
def test_fix_keeps_crlf_line_endings_and_the_bom(name, style, tmp_path, capsys):
    expected = style(lf_fixed(name, tmp_path, capsys))
    path = tmp_path / "config.toml"
    path.write_bytes(style((CASES / name / "bad.toml").read_text()).encode())
    code, out = fix(path, capsys)
    assert code == 0, out
    assert f"fixed: {name} ×1" in out
    assert path.read_bytes() == expected.encode()


@pytest.mark.parametrize("name", ["bool-as-string", "unquoted-plugin-key", "version-unsupported"])
def test_a_file_with_a_bom_lints_like_the_same_file_without(name, tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes((BOM + (CASES / name / "bad.toml").read_text()).encode())
    plain = lint_paths([CASES / name / "bad.toml"], options=Options(root=tmp_path),
                       selected=ALL_RULES).problems
    with_bom = lint_paths([path], options=Options(root=tmp_path), selected=ALL_RULES).problems
    assert [(p.rule, p.line, p.column, p.message) for p in with_bom] == [
        (p.rule, p.line, p.column, p.message) for p in plain
    ]
    assert {p.rule for p in with_bom} == {name}


@pytest.mark.parametrize("command", [["lint"], ["lint", "--fix"], ["doctor"]])
@pytest.mark.parametrize(
    "text",
    [
        "version = 2\nplugins = 5\n",
        "version = 2\ndisabled_plugins = [{ a = 1 }]\n",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        "runtime_type = [1]\n",
    ],
    ids=["plugins-number", "disabled-plugins-table", "runtime-type-list"],
)
def test_valid_toml_of_an_unexpected_shape_is_reported_not_a_crash(
    command, text, tmp_path, capsys
):
    path = tmp_path / "config.toml"
    path.write_text(text)
    (tmp_path / "etc").mkdir()
    argv = [*command, "--root", str(tmp_path)]
    argv += ["--config", str(path), "--containerd-version", "1.7"] if command == ["doctor"] else [
        str(path)
    ]
    code, out, err = run_cli(argv, capsys)
    assert "internal error" not in err and err == "", err
    assert code in (0, 1), out
    assert out.rstrip().endswith("in 1 file")
