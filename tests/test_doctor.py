"""``gpuready doctor``: the node as containerd and the kubelet see it."""

from __future__ import annotations

import json

from gpuready.containerd.files import Options
from gpuready.rules.engine import doctor
from tests.rules_support import ALL_RULES, CASES, node_sandbox, run_cli


def check(root, release="1.6.20", **kwargs):
    return doctor(
        options=Options(root=root), selected=ALL_RULES, containerd_version=release, **kwargs
    ).problems


def test_healthy_node_passes_end_to_end(tmp_path, capsys):
    root = node_sandbox(tmp_path)
    code, out, _ = run_cli(
        ["doctor", "--root", str(root), "--containerd-version", "1.6.20", "--format", "json"],
        capsys,
    )
    report = json.loads(out)
    assert code == 0 and report["status"] == "ok" and report["problems"] == []
    assert report["summary"]["files"] == 4  # config, RuntimeClass, CDI spec, kubelet config


def test_drop_in_replaces_cri_table_only_under_1x(tmp_path):
    root = node_sandbox(tmp_path, CASES / "import-overrides-cri" / "bad")
    assert [p.rule for p in check(root, "1.7.20")] == ["import-overrides-cri"]
    # containerd 2.x merges the drop-in key by key: runc and nvidia both stay registered.
    assert check(root, "2.1.4") == []


def test_1x_replacement_is_seen_by_the_handler_check(tmp_path):
    """Under 1.x the drop-in's CRI table wins whole; a RuntimeClass for runc then has no runtime."""
    root = node_sandbox(tmp_path, CASES / "import-overrides-cri" / "bad")
    manifest = tmp_path / "runc.yaml"
    manifest.write_text(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: runc\nhandler: runc\n"
    )
    problems = check(root, "1.7.20", runtimeclass_paths=[manifest])
    assert sorted(p.rule for p in problems) == ["handler-mismatch", "import-overrides-cri"]
    mismatch = next(p for p in problems if p.rule == "handler-mismatch")
    assert (mismatch.file, mismatch.line) == (str(manifest), 5)


def test_kubelet_cgroup_driver_mismatch_points_at_the_runtime(tmp_path):
    root = node_sandbox(tmp_path)
    (root / "var/lib/kubelet/config.yaml").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "cgroupDriver: cgroupfs\n"
    )
    problems = check(root)
    assert [p.rule for p in problems] == ["cgroup-driver-mismatch"]
    config = (root / "etc/containerd/config.toml").read_text().splitlines()
    assert "SystemdCgroup = true" in config[problems[0].line - 1]
    assert "cgroupfs" in problems[0].message


def test_kubelet_config_that_is_not_yaml_is_one_line_with_its_position(tmp_path, capsys):
    root = node_sandbox(tmp_path)
    kubelet = root / "var/lib/kubelet/config.yaml"
    kubelet.write_text("kind: KubeletConfiguration\ncgroupDriver: [systemd\n")
    code, out, err = run_cli(
        ["doctor", "--root", str(root), "--containerd-version", "1.6.20"], capsys
    )
    assert code == 2 and out == ""
    assert f"{kubelet}:3:1: invalid YAML: expected ',' or ']'" in err
    assert len(err.strip().splitlines()) == 1


def test_relative_and_nested_imports_are_followed_once(tmp_path):
    root = node_sandbox(tmp_path)
    config = root / "etc/containerd/config.toml"
    text = config.read_text()
    nvidia = text.index('        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]')
    cni = text.index('    [plugins."io.containerd.grpc.v1.cri".cni]')
    config.write_text(
        text[:nvidia].replace("version = 2\n", 'version = 2\nimports = ["conf.d/*.toml"]\n', 1)
        + text[cni:]
    )
    (root / "etc/containerd/conf.d").mkdir()
    (root / "etc/containerd/conf.d/10-import.toml").write_text(
        'version = 2\nimports = ["../extra/nvidia.toml", "../config.toml"]\n'
    )
    (root / "etc/containerd/extra").mkdir()
    (root / "etc/containerd/extra/nvidia.toml").write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '    BinaryName = "/usr/bin/nvidia-container-runtime"\n    SystemdCgroup = true\n'
    )
    report = doctor(options=Options(root=root), selected=ALL_RULES, containerd_version="2.1")
    assert report.problems == []
    assert [f.rsplit("/", 1)[-1] for f in report.files[:3]] == [
        "config.toml",
        "10-import.toml",
        "nvidia.toml",
    ]


def test_missing_config_is_exit_2(tmp_path, capsys):
    (tmp_path / "etc").mkdir()
    code, out, err = run_cli(["doctor", "--root", str(tmp_path)], capsys)
    assert code == 2 and out == "" and "config.toml: no such file" in err


def test_explicit_runtimeclass_is_checked_and_missing_one_is_exit_2(tmp_path, capsys):
    root = node_sandbox(tmp_path)
    manifest = root / "rc.yaml"  # under --root, a file of the node
    manifest.write_text(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\n"
        "metadata:\n  name: gpu\nhandler: nvidia_gpu\n"
    )
    code, out, _ = run_cli(
        [
            "doctor",
            "--root",
            str(root),
            "--containerd-version",
            "1.6",
            "--runtimeclass",
            str(manifest),
        ],
        capsys,
    )
    assert code == 1
    assert f"{manifest}:5:1: error handler-invalid: RuntimeClass handler 'nvidia_gpu'" in out
    code, _, err = run_cli(
        ["doctor", "--root", str(root), "--runtimeclass", str(tmp_path / "none.yaml")], capsys
    )
    assert code == 2 and "none.yaml: no such file" in err


def test_v3_config_on_a_1x_containerd_is_refused(tmp_path):
    root = node_sandbox(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.write_text(
        config.read_text()
        .replace("version = 2", "version = 3", 1)
        .replace("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")
    )
    problems = check(root, "1.6.20")
    assert "version-unsupported" in {p.rule for p in problems}
    assert "loads config versions up to 2" in next(
        p.message for p in problems if p.rule == "version-unsupported"
    )


def test_missing_cdi_spec_is_an_error_once_cdi_is_enabled(tmp_path, capsys):
    root = node_sandbox(tmp_path)
    (root / "etc/cdi/nvidia.yaml").unlink()
    assert [p.severity.value for p in check(root) if p.rule == "cdi-spec-missing"] == ["warning"]
    code, out, _ = run_cli(["configure", "--root", str(root), "--enable-cdi"], capsys)
    assert code == 0
    missing = [p for p in check(root, release="1.7.0") if p.rule == "cdi-spec-missing"]
    assert [p.severity.value for p in missing] == ["error"]
    assert "unresolvable CDI devices" in missing[0].message
    assert "gpuready cdi generate" in missing[0].fix
