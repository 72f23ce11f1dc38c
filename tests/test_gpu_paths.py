"""doctor on NRI mode, DRA and CDI spec versions: judged only where the node shows them, by the
recorded defaults of 1.6, 1.7, 2.1 and 2.3 and by the patch release."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gpuready.cdi.versions import CONTAINERD_READS, containerd_reads
from gpuready.containerd.files import Options
from gpuready.containerd.lines import DATA as RECORDED
from gpuready.rules.engine import doctor
from tests.helpers import run_cli
from tests.rules_support import ALL_RULES, node_sandbox

NRI = "nri-mode-not-ready"
DRA = "dra-not-ready"
TOO_NEW = "cdi-version-too-new"
NRI_TABLE = '\n  [plugins."io.containerd.nri.v1.nri"]\n    disable = {}\n'


def make_node(tmp_path: Path, *, cri: str = "", tail: str = "", config: str | None = None) -> Path:
    """The base node, its config given whole (``config``) or with ``cri`` lines added to the CRI
    table and ``tail`` appended."""
    root = node_sandbox(tmp_path)
    path = root / "etc/containerd/config.toml"
    text = config if config is not None else path.read_text()
    if cri:
        text = text.replace("    sandbox_image = ", f"{cri}\n    sandbox_image = ", 1)
    path.write_text(text + tail)
    return root


def put(root: Path, node_path: str, text: str = "x\n") -> Path:
    """A file on the node."""
    path = root / node_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def listen(root: Path, node_path: str, monkeypatch) -> socket.socket:
    """A Unix socket at ``node_path`` under ``root`` (bound by its name in its folder: a test
    folder's path can be longer than a socket address)."""
    path = root / node_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(path.parent)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path.name)
    return server


def findings(root: Path, release: str | None, rule: str, **kwargs):
    problems = doctor(options=Options(root=root), selected=ALL_RULES,
                      containerd_version=release, **kwargs).problems
    return [p for p in problems if p.rule == rule]


def nri_node(tmp_path: Path, *, disable: str | None = "false") -> Path:
    """A node set up for NRI mode: an NRI plugin pre-registered, CDI on, NRI as told."""
    tail = NRI_TABLE.format(disable) if disable is not None else ""
    root = make_node(tmp_path, cri="    enable_cdi = true", tail=tail)
    put(root, "/etc/nri/conf.d/10-device-injector.conf")
    return root


# -- NRI mode --------------------------------------------------------------------------------


@pytest.mark.parametrize(("release", "expected"), [
    ("1.6.20", "has no NRI plugin"),
    ("1.7.25", "drops the CDI devices an NRI plugin adds"),
    ("1.7.30", None),
    ("2.0.5", "drops the CDI devices an NRI plugin adds"),
    ("2.1.9", None),
    ("2.3.4", None),
])
def test_nri_mode_needs_a_release_that_injects_nri_cdi_devices(tmp_path, release, expected):
    found = findings(nri_node(tmp_path), release, NRI)
    if expected is None:
        assert found == []
    else:
        assert [p.severity.value for p in found] == ["error"]
        assert expected in found[0].message and "/etc/nri/conf.d" in found[0].message
        assert ("2.1.0 or later" if release.startswith("2.") else "1.7.30 or later") \
            in found[0].fix


def test_nri_left_off_by_17s_recorded_default_is_an_error_at_the_file(tmp_path):
    """1.7.34's config default has disable = true: an NRI node that does not turn it on."""
    root = nri_node(tmp_path, disable=None)
    found = findings(root, "1.7.30", NRI)
    assert len(found) == 1 and "NRI plugin is off" in found[0].message
    assert "1.7's default is disable = true" in found[0].message
    assert "disable = false" in found[0].fix
    # 2.1's and 2.3's defaults have it on: the same files are ready there
    assert findings(root, "2.1.9", NRI) == [] and findings(root, "2.3.4", NRI) == []


def test_nri_turned_off_in_a_file_is_placed_on_its_line(tmp_path):
    root = nri_node(tmp_path, disable="true")
    [problem] = findings(root, "2.3.4", NRI)
    lines = (root / "etc/containerd/config.toml").read_text().splitlines()
    assert lines[problem.line - 1].strip() == "disable = true"
    assert "a file sets disable = true" in problem.message


def test_nri_mode_needs_cdi_on(tmp_path):
    root = make_node(tmp_path, tail=NRI_TABLE.format("false"))  # 1.7 leaves CDI off
    [problem] = findings(root, "1.7.30", NRI)
    assert "does not read CDI" in problem.message and "enable_cdi" in problem.message
    assert "sets disable = false" in problem.message  # the sign: NRI turned on by hand
    assert "--enable-cdi" in problem.fix


def test_a_17_release_without_its_patch_is_a_warning(tmp_path):
    [problem] = findings(nri_node(tmp_path), "1.7", NRI)
    assert problem.severity.value == "warning" and "patch release" in problem.message
    assert "--containerd-version X.Y.Z" in problem.fix


def test_the_patch_release_comes_from_the_roots_package_database(tmp_path):
    root = nri_node(tmp_path)
    status = "Package: containerd\nStatus: install ok installed\nVersion: {}~ds1-1\n"
    put(root, "/var/lib/dpkg/status", status.format("1.7.25"))
    [problem] = findings(root, None, NRI)
    assert "containerd 1.7.25 drops" in problem.message
    put(root, "/var/lib/dpkg/status", status.format("1.7.30"))
    assert findings(root, None, NRI) == []


@pytest.mark.parametrize("release", ["1.6.20", "1.7.25", "2.0.5", "2.1.9", "2.3.4"])
def test_a_plain_node_gets_no_nri_finding(tmp_path, release):
    assert findings(make_node(tmp_path), release, NRI) == []


@pytest.mark.parametrize("recorded", ["1.7.34", "2.1.9", "2.3.4"])
def test_a_config_default_that_spells_out_nri_is_not_a_sign(tmp_path, recorded):
    """`containerd config default` writes the NRI table (1.7: disable = true; 2.x: false): a
    node whose config is that dump is not set up for NRI mode."""
    config = (RECORDED / f"containerd-{recorded}-default.toml").read_text()
    assert "io.containerd.nri.v1.nri" in config
    root = make_node(tmp_path, config=config)
    assert findings(root, recorded, NRI) == []


def test_a_running_containerd_without_nris_socket(tmp_path, monkeypatch):
    root = nri_node(tmp_path)
    assert findings(root, "2.1.9", NRI) == []  # a copy of the files: no socket says anything
    listen(root, "/run/containerd/containerd.sock", monkeypatch)
    [problem] = findings(root, "2.1.9", NRI)
    assert problem.severity.value == "warning" and problem.file == "/var/run/nri/nri.sock"
    assert "not restarted" in problem.message and "restart containerd" in problem.fix
    listen(root, "/var/run/nri/nri.sock", monkeypatch)
    assert findings(root, "2.1.9", NRI) == []


def test_a_runtimeclass_on_an_nri_node_says_nri_mode_leaves_it_unregistered(tmp_path):
    root = nri_node(tmp_path)
    manifest = put(root, "/rc.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\n"
                   "metadata:\n  name: nvidia-cdi\nhandler: nvidia-cdi\n")
    [problem] = findings(root, "2.1.9", "handler-mismatch", runtimeclass_paths=[manifest])
    assert "NRI mode" in problem.message and "no runtimeClassName" in problem.fix
    plain = make_node(tmp_path / "plain")
    [problem] = findings(plain, "2.1.9", "handler-mismatch", runtimeclass_paths=[manifest])
    assert "NRI" not in problem.message + problem.fix


# -- DRA --------------------------------------------------------------------------------------


def dra_node(tmp_path: Path, **kwargs) -> Path:
    root = make_node(tmp_path, **kwargs)
    put(root, "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json", "{}\n")
    return root


@pytest.mark.parametrize(("release", "expected"), [
    ("1.6.20", "does not pass the CDI devices the kubelet names"),
    ("1.7.1", "does not pass the CDI devices the kubelet names"),
    ("1.7.20", "does not read CDI"),  # 1.7's default: enable_cdi = false
    ("2.1.9", None),  # 2.x reads CDI from /etc/cdi and /var/run/cdi by default
    ("2.3.4", None),
])
def test_dra_needs_cri_cdi_devices_and_cdi_on(tmp_path, release, expected):
    found = findings(dra_node(tmp_path), release, DRA)
    if expected is None:
        assert found == []
    else:  # 1.7.1 also lacks CDI, as 1.7's default leaves it: both are said
        assert {p.severity.value for p in found} == {"error"}
        assert len(found) == (2 if release == "1.7.1" else 1)
        assert expected in found[0].message and "gpu.nvidia.com" in found[0].message


def test_dra_needs_var_run_cdi_among_the_cdi_folders(tmp_path):
    root = dra_node(tmp_path, cri='    enable_cdi = true\n    cdi_spec_dirs = ["/etc/cdi"]')
    [problem] = findings(root, "2.1.9", DRA)
    assert "/var/run/cdi" in problem.message and problem.key_path.endswith("cdi_spec_dirs")
    fixed = dra_node(tmp_path / "run", cri='    enable_cdi = true\n    cdi_spec_dirs = '
                     '["/etc/cdi", "/run/cdi"]')  # /var/run is /run
    assert findings(fixed, "2.1.9", DRA) == []


def test_dra_beside_nvidias_device_plugin(tmp_path, monkeypatch):
    root = dra_node(tmp_path)
    listen(root, "/var/lib/kubelet/device-plugins/nvidia-gpu.sock", monkeypatch)
    [problem] = findings(root, "2.3.4", DRA)
    assert problem.file == "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
    assert "same GPUs" in problem.message and "devicePlugin.enabled=false" in problem.fix
    # the device plugin alone, without the DRA driver, is the usual setup
    plain = make_node(tmp_path / "plain")
    listen(plain, "/var/lib/kubelet/device-plugins/nvidia-gpu.sock", monkeypatch)
    assert findings(plain, "2.3.4", DRA) == []


# -- cdiVersion -------------------------------------------------------------------------------


def spec_node(tmp_path: Path, version: str, *, cdi_on: bool = True) -> Path:
    root = make_node(tmp_path, cri="    enable_cdi = true" if cdi_on else "")
    spec = root / "etc/cdi/nvidia.yaml"
    spec.write_text(spec.read_text().replace("cdiVersion: 0.5.0", f"cdiVersion: {version}"))
    return root


@pytest.mark.parametrize(("release", "version", "too_new"), [
    ("1.7.11", "0.6.0", True),
    ("1.7.12", "0.6.0", False),
    ("1.7.20", "0.8.0", True),
    ("1.7.27", "0.8.0", False),
    ("2.0.5", "1.0.0", True),
    ("2.1.9", "1.1.0", True),
    ("2.1.9", "1.0.0", False),
    ("2.3.4", "1.1.0", False),
])
def test_a_spec_newer_than_the_release_reads(tmp_path, release, version, too_new):
    found = findings(spec_node(tmp_path, version), release, TOO_NEW)
    assert bool(found) is too_new
    if too_new:
        [problem] = found
        assert problem.severity.value == "error" and problem.key_path == "cdiVersion"
        assert "regenerate" in problem.fix and "cdiVersion 0.5.0" in problem.fix
        assert "upgrade containerd to" in problem.fix


def test_cdi_version_is_not_judged_where_containerd_reads_no_cdi(tmp_path):
    assert findings(spec_node(tmp_path, "1.1.0"), "1.6.20", TOO_NEW) == []  # 1.6: no CDI
    off = spec_node(tmp_path / "off", "1.1.0", cdi_on=False)
    assert findings(off, "1.7.20", TOO_NEW) == []  # cdi-not-read says it is not read


def test_a_17_line_without_its_patch_warns_for_versions_some_patches_read(tmp_path):
    [problem] = findings(spec_node(tmp_path, "0.7.0"), "1.7", TOO_NEW)
    assert problem.severity.value == "warning" and "from 1.7.16 on" in problem.message
    [problem] = findings(spec_node(tmp_path / "new", "1.0.0"), "1.7", TOO_NEW)
    assert problem.severity.value == "error" and "2.1.0 or later" in problem.fix


def test_a_spec_whose_content_needs_the_new_version_is_fixed_by_an_upgrade(tmp_path):
    root = spec_node(tmp_path, "1.1.0")
    spec = root / "etc/cdi/nvidia.yaml"
    spec.write_text(spec.read_text().replace(
        "containerEdits:\n  env:", "containerEdits:\n  netDevices:\n    - hostInterfaceName: eth1\n"
        "      name: eth1\n  env:"))
    [problem] = findings(root, "2.1.9", TOO_NEW)
    assert problem.fix.startswith("upgrade containerd to 2.3.0 or later")
    assert "needs cdiVersion 1.1.0" in problem.fix


@pytest.mark.parametrize(("since", "newest"), CONTAINERD_READS)
def test_each_row_of_the_cdi_version_table(since, newest):
    assert containerd_reads(since) == newest
    if since[2] > 0:  # the release before reads less
        assert containerd_reads((since[0], since[1], since[2] - 1)) != newest
    assert containerd_reads((1, 6, 20)) is None


def test_doctor_on_the_command_line_reports_all_three_with_fixes(tmp_path):
    root = spec_node(tmp_path, "0.8.0")
    put(root, "/etc/nri/conf.d/10-device-injector.conf")
    put(root, "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json", "{}\n")
    result = run_cli("doctor", "--root", str(root), "--containerd-version", "1.7.20",
                     "--format", "json")
    assert result.code == 1, result.err
    rules = {p["rule"]: p for p in json.loads(result.out)["problems"]}
    assert {NRI, TOO_NEW} <= set(rules) and DRA not in rules  # CDI on, /var/run/cdi read
    assert all(rules[name]["fix"] for name in (NRI, TOO_NEW))
