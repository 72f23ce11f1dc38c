"""Broken files get the parser's message with file:line:column, and a hint for known mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli

CASES = {
    "doubled-quotes": (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '  BinaryName = ""/usr/bin/nvidia-container-runtime""\n',
        ":3:18: invalid TOML: Expected newline or end of document after a statement; hint: the "
        "value is wrapped in doubled quotes",
        'write BinaryName = "/usr/bin/nvidia-container-runtime"',
    ),
    "unquoted-dotted-id": (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        "  runtime_type = io.containerd.runc.v2\n",
        ":3:18: invalid TOML: Invalid value; hint: strings need quotes",
        'write runtime_type = "io.containerd.runc.v2"',
    ),
    "unquoted-plugin-header-twice": (
        "[plugins.io.containerd.grpc.v1.cri]\nx = 1\n[plugins.io.containerd.grpc.v1.cri]\n",
        ":3:",
        'quote the plugin ID in the header: "io.containerd.grpc.v1.cri"',
    ),
    "jinja-placeholder": (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        "  SystemdCgroup = {{ containerd_systemd_cgroup }}\n",
        ":3:20: invalid TOML:",
        "{{ containerd_systemd_cgroup }} is a template placeholder left in the file",
    ),
    "envsubst-placeholder": (
        "version = 2\nroot = ${CONTAINERD_ROOT}\n",
        ":2:8: invalid TOML: Invalid value; hint: ${CONTAINERD_ROOT} is a template placeholder",
        "render the template",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_known_mistake_gets_a_hint_beside_the_parsers_message(tmp_path: Path, name: str) -> None:
    text, located, advice = CASES[name]
    path = tmp_path / "config.toml"
    path.write_text(text)
    result = run_cli("configure", "--config", str(path))
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert result.err.startswith(f"gpuready: error: {path}{located}")
    assert advice in result.err
    assert path.read_text() == text


def test_lint_shows_the_same_hint() -> None:
    from gpuready.containerd.document import toml_error

    error = toml_error("Invalid value (at line 1, column 16)",
                       "runtime_type = io.containerd.runc.v2\n", "c.toml")
    assert error.line == 1 and error.column == 16
    assert "hint: strings need quotes" in error.message()


def test_an_unknown_mistake_gets_only_the_parsers_message(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('version = 2\nx = "a"b"\n')
    result = run_cli("configure", "--config", str(path))
    assert result.code == 2 and "hint" not in result.err
