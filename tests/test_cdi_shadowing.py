"""Which spec file a device comes from: shadowing, conflicts, and whether containerd reads CDI.

The nodes are fake driver trees (``tests/driver_trees.py``) standing in for a GPU node; the
specs are written by gpuready's generator (gpuready's own, and the same devices as another tool
would write them), and ``doctor``, ``audit`` and ``cdi list`` are run as a user runs them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests import driver_trees as trees
from tests.driver_trees import VERSION_A
from tests.test_cdi_staleness import cli, doctor, generate, only


def node(root: Path, *, enable_cdi: bool | None = True) -> Path:
    """Driver A, gpuready's spec in /etc/cdi; the spec's path."""
    trees.install_driver(root, VERSION_A)
    trees.containerd_config(root, enable_cdi=enable_cdi)
    generate(root)
    return root / "etc/cdi/nvidia.yaml"


def test_a_second_tools_spec_in_var_run_cdi_shadows_gpureadys(tmp_path):
    ours = node(tmp_path)
    theirs = trees.second_tool_spec(tmp_path)  # what nvidia-cdi-refresh writes
    code, problems = doctor(tmp_path)
    shadowed = only(problems, "cdi-spec-shadowed")
    assert code == 0 and shadowed["severity"] == "warning"
    assert shadowed["file"] == str(ours)
    assert shadowed["message"].startswith(f"every device of this spec is taken from {theirs}:")
    assert "reads /etc/cdi then /var/run/cdi, and a later directory wins; this file is not " \
           "used" in shadowed["message"]
    assert str(theirs) in shadowed["fix"] and str(ours) in shadowed["fix"]
    # the same winner the loader's listing shows
    code, out, _ = cli("cdi", "list", "--root", str(tmp_path), "--format", "json")
    assert {d["file"] for d in json.loads(out)["devices"]} == {str(theirs)}


def test_a_later_spec_that_takes_some_devices_names_them(tmp_path):
    ours = node(tmp_path)
    text = ours.read_text()
    theirs = tmp_path / "var/run/cdi/gpu0.yaml"  # GPU 0 only
    spec = text.split("- name: GPU-")[0] + text[text.index("containerEdits:\n  env"):]
    trees.write(theirs, spec)
    _, problems = doctor(tmp_path)
    message = only(problems, "cdi-spec-shadowed")["message"]
    assert message.startswith(f"device(s) nvidia.com/gpu=0 of this spec are taken from {theirs}")
    assert "not used" not in message


def test_configured_cdi_spec_dirs_decide_what_shadows(tmp_path):
    """containerd reading only /etc/cdi: the /var/run/cdi spec shadows nothing."""
    node(tmp_path)
    trees.second_tool_spec(tmp_path)
    config = tmp_path / "etc/containerd/config.toml"
    config.write_text(config.read_text().replace('["/etc/cdi", "/var/run/cdi"]', '["/etc/cdi"]'))
    assert doctor(tmp_path) == (0, [])


def test_two_specs_in_one_directory_are_a_conflict_that_drops_the_device(tmp_path):
    ours = node(tmp_path)
    other = trees.second_tool_spec(tmp_path, "etc/cdi", "nvidia-ctk.yaml")
    code, problems = doctor(tmp_path)
    assert code == 1
    conflicts = [p for p in problems if p["rule"] == "cdi-device-conflict"]
    everything = only(conflicts, "cdi-device-conflict") if len(conflicts) == 1 else next(
        p for p in conflicts if "nvidia.com/gpu=all " in p["message"])
    assert everything["severity"] == "error"
    assert {everything["file"], everything["message"].split(" in ")[1].split(" (")[0]} == {
        str(ours), str(other)}
    assert "drops the device" in everything["message"]
    code, out, _ = cli("cdi", "list", "--root", str(tmp_path), "--format", "json")
    assert "nvidia.com/gpu=all" not in {d["name"] for d in json.loads(out)["devices"]}


def test_an_operator_spec_of_another_nvidia_kind_is_checked_too(tmp_path):
    node(tmp_path)
    theirs = trees.second_tool_spec(tmp_path, name="management.yaml",
                                    kind="management.nvidia.com/gpu")
    assert doctor(tmp_path) == (0, [])  # another kind: nothing shadowed
    trees.upgrade_driver(tmp_path, VERSION_A, "570.86.15")
    _, problems = doctor(tmp_path)
    stale = {p["file"]: p for p in problems if p["rule"] == "cdi-spec-stale"}
    assert set(stale) == {str(theirs), str(tmp_path / "etc/cdi/nvidia.yaml")}
    assert stale[str(theirs)]["fix"].startswith(f"regenerate {theirs} with the tool that wrote")


def test_containerd_17_without_enable_cdi_does_not_read_the_spec(tmp_path):
    spec = node(tmp_path, enable_cdi=None)
    code, problems = doctor(tmp_path)
    finding = only(problems, "cdi-not-read")
    assert finding["severity"] == "warning"
    assert finding["file"] == str(tmp_path / "etc/containerd/config.toml")
    assert f"the CDI spec(s) {spec} are not read: containerd 1.7 reads CDI specs only with " \
           "enable_cdi = true, and its default is false" in finding["message"]
    assert finding["fix"].startswith("gpuready configure --enable-cdi")
    # the fix it names works
    code, _, err = cli("configure", "--root", str(tmp_path), "--enable-cdi",
                       "--containerd-version", "1.7")
    assert code == 0, err
    assert doctor(tmp_path) == (0, [])


def test_what_each_containerd_line_does_with_the_spec(tmp_path):
    node(tmp_path, enable_cdi=None)
    assert doctor(tmp_path, "--containerd-version", "1.6") == (0, [])  # no CDI: kept for later
    code, out, _ = cli("doctor", "--root", str(tmp_path), "--format", "json")  # release unknown
    assert code == 0 and "cdi-not-read" not in out
    assert doctor(tmp_path, "--containerd-version", "2.1") == (0, [])  # on by default
    config = tmp_path / "etc/containerd/config.toml"
    config.write_text(config.read_text().replace(
        '  sandbox_image', '  enable_cdi = false\n  sandbox_image'))
    _, off = doctor(tmp_path, "--containerd-version", "2.1")
    assert "enable_cdi = false in the config" in only(off, "cdi-not-read")["message"]


def test_a_spec_outside_cdi_spec_dirs_is_not_read(tmp_path):
    node(tmp_path)
    config = tmp_path / "etc/containerd/config.toml"
    config.write_text(config.read_text().replace('["/etc/cdi", "/var/run/cdi"]',
                                                 '["/var/run/cdi"]'))
    _, problems = doctor(tmp_path)
    finding = only(problems, "cdi-not-read")
    assert "/etc/cdi, which is not among them" in finding["message"]
    assert finding["key_path"].endswith("cdi_spec_dirs")


def test_audit_counts_the_nodes_whose_spec_is_shadowed(tmp_path):
    node(tmp_path / "fleet/gpu-a")
    node(tmp_path / "fleet/gpu-b")
    trees.second_tool_spec(tmp_path / "fleet/gpu-b")
    code, out, err = cli("audit", str(tmp_path / "fleet"), "--containerd-version", "1.7",
                         "--format", "json")
    assert "Traceback" not in err
    rules = {row["rule"]: row for row in json.loads(out)["rules"]}
    assert rules["cdi-spec-shadowed"]["nodes"] == 1
    assert rules["cdi-spec-shadowed"]["severity"] == "warning"
