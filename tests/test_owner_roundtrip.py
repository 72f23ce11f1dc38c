"""Owners through the same view: on every owner fixture, ``configure --root`` then
``unconfigure --root`` gives back every file byte for byte and leaves no new file or folder;
``configure --dry-run`` shows the diff of the file it would write and writes nothing; ``doctor``
names the owner's restart as the fix while the runtime waits for it.

The fixture nodes are those of tests/data/owners (see its README); no owner runs here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuready.owners.table import BY_NAME
from gpuready.owners.template import parse_template, render
from tests.helpers import DATA, run_cli

OWNERS_DATA = DATA / "owners"
K3S_DIR = "var/lib/rancher/k3s/agent/etc/containerd"
RKE2_DIR = "var/lib/rancher/rke2/agent/etc/containerd"

# fixture -> (owner, the file configure writes there; None: it prints values and writes nothing)
CASES = {
    "containerd": ("containerd", "etc/containerd/config.toml"),
    "k3s": ("k3s", f"{K3S_DIR}/config.toml.tmpl"),
    "k3s-v3": ("k3s", f"{K3S_DIR}/config-v3.toml.tmpl"),
    "k3s-nvidia": ("k3s", None),  # k3s registers nvidia itself: nothing to add
    "rke2": ("rke2", f"{RKE2_DIR}/config-v3.toml.tmpl"),
    "k0s": ("k0s", "etc/k0s/containerd.d/nvidia.toml"),
    "microk8s": ("microk8s", "var/snap/microk8s/current/args/containerd-template.toml"),
    "kubespray": ("kubespray", None),
    "gpu-operator": ("gpu-operator", None),
}
WRITERS = sorted(name for name, (_, target) in CASES.items() if target)
OWNED = [name for name in WRITERS if name != "containerd"]


def test_every_owner_fixture_is_a_case():
    fixtures = {path.name for path in OWNERS_DATA.iterdir() if path.is_dir()}
    assert fixtures == set(CASES)


def node(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(OWNERS_DATA / name, root)
    return root


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (folders too, as None) with the bytes of each file."""
    return {str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
            for path in sorted(root.rglob("*"))}


def changed(before: dict, after: dict) -> list[str]:
    """The paths that differ between two trees (new, gone, or other bytes)."""
    return sorted(name for name in set(before) | set(after) if before.get(name, 0) != after.get(
        name, 0))


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_configure_then_unconfigure_gives_back_every_file_byte_for_byte(fixture, tmp_path):
    root = node(tmp_path, fixture)
    before = tree(root)
    configured = run_cli("configure", "--root", str(root))
    assert configured.code == 0, configured.out + configured.err
    target = CASES[fixture][1]
    if target:  # the change and its record are on the node
        assert target in changed(before, tree(root)), configured.out
        assert f"record of what gpuready changed: kept in {root}/{target}.gpuready.json" in (
            configured.out)
    undone = run_cli("unconfigure", "--root", str(root))
    assert undone.code == 0, undone.out + undone.err
    assert changed(before, tree(root)) == [], undone.out
    again = run_cli("unconfigure", "--root", str(root))
    assert again.code == 0 and "nothing recorded" in again.out, again.out + again.err
    assert changed(before, tree(root)) == []


def test_forced_edit_of_a_rewritten_config_is_given_back(tmp_path):
    root = node(tmp_path, "kubespray")
    before = tree(root)
    assert run_cli("configure", "--root", str(root), "--force").code == 0
    assert "etc/containerd/config.toml" in changed(before, tree(root))
    undone = run_cli("unconfigure", "--root", str(root))
    assert undone.code == 0, undone.out + undone.err
    assert changed(before, tree(root)) == [], undone.out


@pytest.mark.parametrize("fixture", OWNED)
def test_unconfigure_config_naming_the_owners_file_gives_it_back(fixture, tmp_path):
    root = node(tmp_path, fixture)
    before = tree(root)
    assert run_cli("configure", "--root", str(root)).code == 0
    target = root / CASES[fixture][1]
    undone = run_cli("unconfigure", "--root", str(root), "--config", str(target))
    assert undone.code == 0, undone.out + undone.err
    assert "nothing recorded" not in undone.out
    assert changed(before, tree(root)) == [], undone.out
    owner = BY_NAME[CASES[fixture][0]]
    assert owner.apply in undone.out  # the owner applies it at its restart


@pytest.mark.parametrize("fixture", OWNED)
def test_unconfigure_dry_run_shows_the_change_and_writes_nothing(fixture, tmp_path):
    root = node(tmp_path, fixture)
    assert run_cli("configure", "--root", str(root)).code == 0
    configured = tree(root)
    dry = run_cli("unconfigure", "--root", str(root), "--dry-run")
    assert dry.code == 0, dry.out + dry.err
    assert f"--- {root}/{CASES[fixture][1]}" in dry.out
    assert tree(root) == configured


def _template(root: Path, text: str) -> Path:
    path = root / K3S_DIR / "config.toml.tmpl"
    path.write_text(text)
    return path


OPERATOR_TEMPLATE = (
    "# the operator's template\n"
    '{{ template "base" . }}\n'
    "\n"
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.foo]\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
)


def test_an_operators_k3s_template_gets_its_bytes_back(tmp_path):
    root = node(tmp_path, "k3s")
    _template(root, OPERATOR_TEMPLATE)
    before = tree(root)
    assert run_cli("configure", "--root", str(root)).code == 0
    assert changed(before, tree(root)) != []
    assert run_cli("unconfigure", "--root", str(root)).code == 0
    assert changed(before, tree(root)) == []


def test_a_k3s_template_edited_since_loses_only_gpureadys_runtime(tmp_path):
    root = node(tmp_path, "k3s")
    path = _template(root, OPERATOR_TEMPLATE)
    assert run_cli("configure", "--root", str(root)).code == 0
    assert "runtimes.nvidia]" in path.read_text()
    path.write_text(path.read_text() + "# edited later\n")
    undone = run_cli("unconfigure", "--root", str(root))
    assert undone.code == 0, undone.out + undone.err
    text = path.read_text()
    assert "runtimes.nvidia" not in text
    assert text.startswith(OPERATOR_TEMPLATE) and text.endswith("# edited later\n")
    assert not (root / K3S_DIR / "config.toml.tmpl.gpuready.json").exists()


@pytest.mark.parametrize("fixture", WRITERS)
def test_dry_run_shows_the_diff_of_the_file_it_would_write_and_writes_nothing(fixture, tmp_path):
    root = node(tmp_path, fixture)
    before = tree(root)
    dry = run_cli("configure", "--root", str(root), "--dry-run")
    assert dry.code == 0, dry.out + dry.err
    target = CASES[fixture][1]
    assert f"+++ {root}/{target}\n" in dry.out
    assert any(line.startswith("+") and line.strip().endswith("runtimes.nvidia]")
               for line in dry.out.splitlines()), dry.out
    assert f"{root}/{target}: would register runtime nvidia" in dry.out
    assert tree(root) == before


@pytest.mark.parametrize("fixture", OWNED)
def test_doctor_names_the_owners_restart_while_the_runtime_waits_for_it(fixture, tmp_path):
    root = node(tmp_path, fixture)
    owner = BY_NAME[CASES[fixture][0]]
    untouched = run_cli("doctor", "--root", str(root), "--containerd-version", "2.1")
    assert "error runtime-not-registered" in untouched.out  # before configure: configure it
    assert run_cli("configure", "--root", str(root)).code == 0
    result = run_cli("doctor", "--root", str(root), "--containerd-version", "2.1")
    assert result.code == 1, result.out + result.err
    assert "error owner-template-stale" in result.out, result.out
    assert f"fix: restart {owner.name} to render it: {owner.apply}" in result.out
    assert "runtime-not-registered" not in result.out  # one error, not 'run configure again'


def test_doctor_after_unconfigure_names_the_restart_that_takes_the_runtime_out(tmp_path):
    """The other way round: k3s rendered gpuready's template (as at its restart), then
    unconfigure took the template back; the generated config still has the runtime until the
    next restart, and the fix says so."""
    root = node(tmp_path, "k3s")
    generated = root / K3S_DIR / "config.toml"
    assert run_cli("configure", "--root", str(root)).code == 0
    template = root / K3S_DIR / "config.toml.tmpl"
    generated.write_text(render(parse_template(template.read_text(), template),
                                generated.read_text()))  # what k3s renders at its restart
    assert run_cli("unconfigure", "--root", str(root)).code == 0
    result = run_cli("doctor", "--root", str(root), "--containerd-version", "2.1")
    assert "error config-regenerated" in result.out, result.out
    assert "restart k3s so that it goes now: systemctl restart k3s" in result.out


@pytest.mark.parametrize("fixture", [*OWNED, "kubespray"])
def test_setup_then_unconfigure_gives_back_every_file_byte_for_byte(fixture, tmp_path):
    """setup on an owned node writes the owner's input and the contract's files (CDI spec,
    RuntimeClass, toolkit files); its record sits beside the owner's input (beside
    /etc/containerd/config.toml where it writes none), so unconfigure --root takes all back."""
    root = node(tmp_path, fixture)
    before = tree(root)
    setup = run_cli("setup", "--root", str(root), "--gpus", "1")
    assert "etc/cdi/nvidia.yaml" in changed(before, tree(root)), setup.out + setup.err
    undone = run_cli("unconfigure", "--root", str(root))
    assert undone.code == 0, undone.out + undone.err
    assert changed(before, tree(root)) == [], undone.out


def test_unconfigure_restart_on_an_owners_input_is_refused_before_anything_changes(tmp_path):
    root = node(tmp_path, "k3s")
    assert run_cli("configure", "--root", str(root)).code == 0
    configured = tree(root)
    result = run_cli("unconfigure", "--root", str(root), "--restart", "--restart-command", "true")
    assert result.code == 2 and "systemctl restart k3s" in result.err, result.out + result.err
    assert tree(root) == configured
    # without --restart-command, a restart under --root is refused first: this machine's
    # containerd is not the tree's
    bare = run_cli("unconfigure", "--root", str(root), "--restart")
    assert bare.code == 2 and "--restart-command" in bare.err, bare.out + bare.err
    assert tree(root) == configured
