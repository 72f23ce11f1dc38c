"""Who owns containerd: detection, configure where the owner reads, and the k3s template render.

The fixture nodes in tests/data/owners are written here, modelled on each owner's upstream
layout (see their README); k3s, RKE2, k0s and MicroK8s themselves do not run in these tests.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import facts
from gpuready.node import Node
from gpuready.owners.detect import detect
from gpuready.owners.table import OWNERS
from gpuready.owners.template import parse_template, render
from tests.helpers import DATA, run_cli
from tests.rules_support import containerd_accepts

OWNERS_DATA = DATA / "owners"
K3S_DIR = "var/lib/rancher/k3s/agent/etc/containerd"
NVIDIA_V2 = ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "nvidia")
NVIDIA_V3 = ("plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "nvidia")

# fixture -> (owner, config containerd reads, file configure writes)
CASES = {
    "containerd": ("containerd", "etc/containerd/config.toml", "etc/containerd/config.toml"),
    "k3s": ("k3s", f"{K3S_DIR}/config.toml", f"{K3S_DIR}/config.toml.tmpl"),
    "k3s-v3": ("k3s", f"{K3S_DIR}/config.toml", f"{K3S_DIR}/config-v3.toml.tmpl"),
    "rke2": ("rke2", "var/lib/rancher/rke2/agent/etc/containerd/config.toml",
             "var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl"),
    "k0s": ("k0s", "etc/k0s/containerd.toml", "etc/k0s/containerd.d/nvidia.toml"),
    "microk8s": ("microk8s", "var/snap/microk8s/current/args/containerd.toml",
                 "var/snap/microk8s/current/args/containerd-template.toml"),
    "kubespray": ("kubespray", "etc/containerd/config.toml", None),
    "gpu-operator": ("gpu-operator", "etc/containerd/config.toml", None),
}
WRITERS = [name for name, (_, _, target) in CASES.items() if target]


def node(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(OWNERS_DATA / name, root)
    return root


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under root with its digest and mtime."""
    return {
        str(path.relative_to(root)): (hashlib.sha256(path.read_bytes()).hexdigest(),
                                      path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*")) if path.is_file()
    }


def test_every_owner_row_cites_its_sources_and_has_a_fixture():
    for owner in OWNERS:
        assert owner.sources and all(source.where for source in owner.sources), owner.name
        assert owner.name in {case[0] for case in CASES.values()}, owner.name


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_doctor_names_the_owner_and_its_files(fixture, tmp_path):
    owner, config, _ = CASES[fixture]
    root = node(tmp_path, fixture)
    assert detect(Node(root)).owner.name == owner
    result = run_cli("doctor", "--root", str(root), "--containerd-version", "2.1")
    first = result.out.splitlines()[0]
    assert first.startswith("owner: ") and f"({owner}):" in first, result.out
    assert f"  containerd reads: /{config}" in result.out
    checked = run_cli("doctor", "--root", str(root), "--format", "json")
    assert f"{root}/{config}" in json.loads(checked.out)["files"]  # the owner's config is checked


@pytest.mark.parametrize("fixture", WRITERS)
def test_configure_writes_where_the_owner_reads_and_a_second_run_is_a_no_op(fixture, tmp_path):
    owner, config, target = CASES[fixture]
    root = node(tmp_path, fixture)
    generated_before = (root / config).read_bytes()
    first = run_cli("configure", "--root", str(root))
    assert first.code == 0, first.err
    assert first.out.startswith(f"{root}/{target}: register runtime nvidia"), first.out
    if target != config:  # the owner's generated file is left for the owner to rewrite
        assert (root / config).read_bytes() == generated_before
    before = snapshot(root)
    second = run_cli("configure", "--root", str(root))
    assert second.code == 0 and "(no change)" in second.out, second.out
    assert snapshot(root) == before


def _rendered_runtime(root: Path, template_name: str) -> tuple[str, dict]:
    """configure on a k3s fixture, then render its template against the generated config."""
    base = (root / K3S_DIR / "config.toml").read_text()
    assert run_cli("configure", "--root", str(root)).code == 0
    path = root / K3S_DIR / template_name
    rendered = render(parse_template(path.read_text(), path), base)
    assert rendered.startswith(base)  # k3s's base config, then the template's additions
    return rendered, tomllib.loads(rendered)


@pytest.mark.containerd
def test_k3s_template_renders_to_a_config_real_containerd_loads(tmp_path):
    """The version 2 template, rendered the way k3s renders it (against a hand-written base
    modelled on k3s's generated config: k3s itself did not render it), is loaded by Debian's
    containerd with the nvidia runtime at the version 2 table."""
    root = node(tmp_path, "k3s")
    rendered, data = _rendered_runtime(root, "config.toml.tmpl")
    entry = facts.lookup(data, NVIDIA_V2)
    assert entry["runtime_type"] == "io.containerd.runc.v2"
    assert entry["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime",
                                "SystemdCgroup": True}
    config = tmp_path / "rendered.toml"
    config.write_text(rendered)
    loaded = containerd_accepts(config)
    assert loaded.returncode == 0, loaded.stderr
    dump = tomllib.loads(loaded.stdout)
    assert facts.lookup(dump, (*NVIDIA_V2, "options", "BinaryName")) == (
        "/usr/bin/nvidia-container-runtime")


def test_k3s_v3_template_renders_with_the_runtime_at_the_version_3_table(tmp_path):
    """Version 3 needs containerd 2.x, which is not installed here: the render is checked by
    parsing only."""
    root = node(tmp_path, "k3s-v3")
    _, data = _rendered_runtime(root, "config-v3.toml.tmpl")
    assert data["version"] == 3
    assert facts.lookup(data, (*NVIDIA_V3, "options", "SystemdCgroup")) is True
    assert facts.lookup(data, NVIDIA_V2) is None


def test_k3s_that_registers_nvidia_itself_gets_no_second_runtime(tmp_path):
    root = node(tmp_path, "k3s-nvidia")
    before = snapshot(root)
    result = run_cli("configure", "--root", str(root))
    assert result.code == 0
    assert "k3s already registers runtime nvidia itself" in result.out
    assert snapshot(root) == before


def test_existing_template_keeps_its_bytes_and_gains_the_runtime(tmp_path):
    root = node(tmp_path, "k3s")
    template = root / K3S_DIR / "config.toml.tmpl"
    own = ('{{ template "base" . }}\n# our registry mirror\n'
           '[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/certs.d"\n')
    template.write_text(own)
    assert run_cli("configure", "--root", str(root)).code == 0
    text = template.read_text()
    assert text.startswith(own) and "runtimes.nvidia.options]" in text


def test_template_outside_the_documented_subset_is_refused_untouched(tmp_path):
    root = node(tmp_path, "k3s")
    template = root / K3S_DIR / "config.toml.tmpl"
    template.write_text('{{ template "base" . }}\n{{ if .NodeConfig.SELinux }}x = 1{{ end }}\n')
    before = snapshot(root)
    result = run_cli("configure", "--root", str(root))
    assert result.code == 2
    assert f"{template}:2:1: Go template action '{{{{ if .NodeConfig.SELinux }}}}'" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert snapshot(root) == before


def test_kubespray_without_force_changes_no_file_and_prints_inventory_variables(tmp_path):
    root = node(tmp_path, "kubespray")
    before = snapshot(root)
    result = run_cli("configure", "--root", str(root))
    assert result.code == 0, result.err
    assert snapshot(root) == before
    assert "containerd_additional_runtimes:\n  - name: nvidia\n" in result.out
    # kubespray writes an option unquoted only for the strings "true"/"false" (config.toml.j2)
    assert '      SystemdCgroup: "true"' in result.out
    assert "    base_runtime_spec: cri-base.json" in result.out


def test_kubespray_with_force_edits_the_rendered_config(tmp_path):
    root = node(tmp_path, "kubespray")
    result = run_cli("configure", "--root", str(root), "--force")
    assert result.code == 0, result.err
    data = tomllib.loads((root / "etc/containerd/config.toml").read_text())
    assert facts.lookup(data, NVIDIA_V2) is not None
    assert "rewritten at every playbook run" in result.out


def test_gpu_operator_node_changes_nothing_and_names_the_operator_values(tmp_path):
    root = node(tmp_path, "gpu-operator")
    before = snapshot(root)
    result = run_cli("configure", "--root", str(root))
    assert result.code == 0 and snapshot(root) == before
    assert "99-nvidia.toml is rewritten by gpu-operator" in result.out
    assert "CONTAINERD_RUNTIME_CLASS" in result.out


def test_distribution_overrides_detection(tmp_path):
    root = node(tmp_path, "containerd")
    before = snapshot(root)
    result = run_cli("configure", "--root", str(root), "--distribution", "kubespray")
    assert result.code == 0 and snapshot(root) == before
    assert "containerd_additional_runtimes:" in result.out
    doctor = run_cli("doctor", "--root", str(root), "--distribution", "k3s")
    assert doctor.code == 2  # the k3s config it was told to read is not there
    assert f"{root}/{K3S_DIR}/config.toml: no such file" in doctor.err


def test_doctor_json_carries_the_owner(tmp_path):
    root = node(tmp_path, "k0s")
    result = run_cli("doctor", "--root", str(root), "--format", "json")
    owner = json.loads(result.out)["owner"]
    assert owner["name"] == "k0s" and owner["socket"] == "/run/k0s/containerd.sock"
    assert any("k0s_managed" in why or "containerd.toml" in why for why in owner["why"])


def test_configure_then_doctor_on_k3s_reports_a_stale_render_until_restart(tmp_path):
    root = node(tmp_path, "k3s")
    assert run_cli("configure", "--root", str(root)).code == 0
    result = run_cli("doctor", "--root", str(root), "--containerd-version", "1.6.20")
    assert "error owner-template-stale: config.toml.tmpl registers runtime 'nvidia'" in (
        result.out)
    assert "fix: restart k3s to render it: systemctl restart k3s" in result.out
    assert "runtime-not-registered" not in result.out  # one error, naming the restart


def test_k3s_rendered_template_runs_in_real_containerd_with_the_runtime_live(tmp_path):
    """The rendered version 2 template (against the hand-written k3s base: k3s did not render
    it) started in Debian's real containerd by the test harness, which moves only root, state,
    socket and opt into a temporary folder; the CRI then reports the nvidia handler as loaded."""
    from tests.harness.containerd import Containerd, sandboxed, short_tempdir
    from tests.helpers import require

    require(binaries=("containerd", "runc"))
    root = node(tmp_path, "k3s")
    rendered, _ = _rendered_runtime(root, "config.toml.tmpl")
    folder = short_tempdir()
    daemon = Containerd(sandboxed(rendered, folder), folder)
    try:
        daemon.start()
        config = folder / "rendered.toml"
        config.write_text(rendered)
        result = run_cli("verify", "--live", "--address", daemon.address, "--config", str(config))
        assert "ok      runtime nvidia is loaded" in result.out, result.out + result.err
        assert "nvidia          io.containerd.runc.v2  /usr/bin/nvidia-container-runtime  true" in (
            result.out)
    finally:
        daemon.remove()


@pytest.mark.parametrize("fixture", ["k3s", "k3s-v3", "rke2", "k0s", "microk8s"])
def test_setup_registers_where_the_owner_reads_and_keeps_the_contract_files(fixture, tmp_path):
    owner, config, target = CASES[fixture]
    root = node(tmp_path, fixture)
    first = run_cli("setup", "--root", str(root), "--gpus", "1")
    assert first.code == 0, first.out + first.err
    lines = first.out.splitlines()
    assert lines[0] == (f"[1/8] base config: {root}/{config}: owned by {owner}, rewritten "
                        f"{detect(Node(root)).owner.regenerated}: not staged")
    assert lines[1].startswith(f"[2/8] runtime section: {root}/{target}: register runtime nvidia")
    assert not (root / "etc/containerd/config.toml").exists()  # nothing staged where no one reads
    for name in ("default.txt", "parsed.txt", "cdi-keys.txt", "runtimeclass.yaml", "report.txt"):
        assert (root / "root/toolkit" / name).is_file()
    assert (root / "etc/cdi/nvidia.yaml").is_file()
    assert "RUNTIME=nvidia\n" in (root / "root/toolkit/report.txt").read_text()
    before = snapshot(root)
    second = run_cli("setup", "--root", str(root), "--gpus", "1")
    assert second.code == 0 and snapshot(root) == before
    check = run_cli("check", "--root", str(root))
    assert check.code == 0, check.out


def test_setup_on_kubespray_writes_no_config_and_says_what_to_set(tmp_path):
    root = node(tmp_path, "kubespray")
    config = (root / "etc/containerd/config.toml").read_bytes()
    result = run_cli("setup", "--root", str(root), "--gpus", "1")
    assert result.code == 1  # the runtime is not registered until the playbook runs
    assert (root / "etc/containerd/config.toml").read_bytes() == config
    assert "[2/8] runtime section: " in result.out and "not written: kubespray rewrites it" in (
        result.out)
    assert "containerd_additional_runtimes:" in result.out


def test_verify_live_defaults_to_the_owners_socket(tmp_path):
    """The owner's socket, at its node path: inside the root under --root."""
    from gpuready.cli.cmd_verify import options_from, request_from
    from gpuready.cli.main import build_parser

    def options(*argv):
        return options_from(request_from(build_parser().parse_args(["verify", "--live", *argv])))

    root = node(tmp_path, "k3s")
    found = options("--root", str(root))
    assert found.address == f"unix://{root}/run/k3s/containerd/containerd.sock"
    assert found.config_path == root / K3S_DIR / "config.toml"
    microk8s = node(tmp_path, "microk8s")
    assert options("--root", str(microk8s)).address == (
        f"unix://{microk8s}/var/snap/microk8s/common/run/containerd.sock")


def test_owners_md_is_generated_from_the_table():
    from gpuready.owners.table import markdown
    from tests.helpers import REPO

    assert (REPO / "docs" / "owners.md").read_text() == markdown(), (
        "docs/owners.md is stale: run PYTHONPATH=src python3 scripts/generate_docs.py")


def test_hostile_template_is_refused_quickly_and_untouched(tmp_path):
    import time

    root = node(tmp_path, "k3s")
    template = root / K3S_DIR / "config.toml.tmpl"
    template.write_text('{{ template "base" . }}\n' + "{{" * 400_000)  # 800 KB, never closed
    before = snapshot(root)
    started = time.monotonic()
    result = run_cli("configure", "--root", str(root))
    assert time.monotonic() - started < 20
    assert result.code == 2 and f"{template}:2:1: Go template action" in result.err
    assert snapshot(root) == before


@pytest.mark.parametrize("fixture", sorted(CASES))
@pytest.mark.parametrize("force", [False, True])
def test_the_file_configure_locks_is_the_file_its_plan_edits(fixture, force, tmp_path):
    """configure locks the owner's file before it plans (under the lock): the file found
    without planning is the one the plan then edits, for every owner, with and without
    --force (kubespray's and the GPU Operator's nodes are edited only with it)."""
    from gpuready.containerd.configure import ConfigureRequest
    from gpuready.containerd.register import RuntimeRequest
    from gpuready.node import Node
    from gpuready.owners.configure import plan_for_owner, target_for_owner
    from gpuready.owners.detect import detect

    root = Node(node(tmp_path, fixture))
    detection = detect(root)
    request = ConfigureRequest(RuntimeRequest())
    planned = plan_for_owner(detection, node=root, request=request, force=force)
    assert target_for_owner(detection, node=root, request=request, force=force) == \
        planned.target
