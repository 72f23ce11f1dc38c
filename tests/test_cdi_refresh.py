"""``gpuready cdi refresh``: a stale spec regenerated from the intent it was generated with, a
fresh one left alone, and the systemd units that run the refresh.

The nodes are fake driver trees (``tests/driver_trees.py``): folders holding a driver's files,
standing in for a GPU and its driver only. Everything else is gpuready run as a user runs it;
the units are checked by the real ``systemd-analyze verify``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import driver_trees as trees
from tests.driver_trees import VERSION_A, VERSION_B
from tests.test_cdi_staleness import cli, doctor, generate, node_a, only

SPEC = "etc/cdi/nvidia.yaml"
INTENT = "etc/cdi/nvidia.yaml.gpuready.intent"
UNITS = ("etc/systemd/system/gpuready-cdi-refresh.service",
         "etc/systemd/system/gpuready-cdi-refresh.path")
UNITS_RECORD = "etc/systemd/system/gpuready-cdi-refresh.gpuready.json"
WANTS = "etc/systemd/system/multi-user.target.wants"


def refresh(root: Path, *extra: str) -> tuple[int, dict]:
    """``cdi refresh --format json`` on the node; (exit code, the JSON document)."""
    code, out, err = cli("cdi", "refresh", "--root", str(root), "--format", "json", *extra)
    assert "Traceback" not in err, err
    document = json.loads(out)
    assert document["exit_code"] == code
    return code, document


def install_program(root: Path, node_path: str = "/usr/local/bin/gpuready") -> str:
    """gpuready installed on the node (an executable file at ``node_path`` under ``root``):
    what the units' ``ExecStart=`` names under ``--root``."""
    program = root / node_path.lstrip("/")
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return node_path


def state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Each file under /etc/cdi with its bytes and mtime (ns)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted((root / "etc/cdi").iterdir())}


def age(root: Path) -> None:
    """Set the spec's and its record's mtime an hour back, so any rewrite shows."""
    for name in (SPEC, INTENT):
        stat = (root / name).stat()
        os.utime(root / name, ns=(stat.st_atime_ns, stat.st_mtime_ns - 3600 * 10**9))


def test_driver_upgrade_doctor_refresh_doctor(tmp_path):
    """A driver upgrade makes the spec stale (doctor says so), a refresh rewrites it and the
    finding goes, and a second refresh is a no-op that keeps the spec's bytes and mtime."""
    node_a(tmp_path)
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    code, problems = doctor(tmp_path)
    stale = only(problems, "cdi-spec-stale")
    assert code == 1
    assert f"/usr/lib/x86_64-linux-gnu/libcuda.so.{VERSION_A} (mount)" in stale["message"]
    assert f"/lib/firmware/nvidia/{VERSION_A}/gsp_ga10x.bin (mount)" in stale["message"]
    assert "gpuready cdi refresh" in stale["fix"]

    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path))
    assert code == 0, err
    assert out.startswith(f"rewrote {tmp_path / SPEC}: regenerated from the node's GPUs: "
                          "2 GPU(s) from device nodes")
    assert f"because stale: it was written for driver {VERSION_A}, but the node has " \
           f"{VERSION_B}" in out
    text = (tmp_path / SPEC).read_text()
    assert f"libcuda.so.{VERSION_B}" in text and VERSION_A not in text
    assert (tmp_path / f"{SPEC}.gpuready.bak").read_text().count(VERSION_A) > 0  # safe writer
    assert doctor(tmp_path) == (0, [])

    age(tmp_path)
    before = state(tmp_path)
    code, document = refresh(tmp_path)
    assert (code, document["status"], document["action"]) == (0, "ok", "none")
    assert document["fresh"] and not document["written"]
    assert state(tmp_path) == before  # bytes and mtime of the spec and of its record
    code, out, _ = cli("cdi", "refresh", "--root", str(tmp_path))
    assert (code, out) == (0, f"{tmp_path / SPEC}: fresh, nothing to do\n")


def test_refresh_of_a_fresh_spec_writes_nothing(tmp_path):
    node_a(tmp_path)
    age(tmp_path)
    before = state(tmp_path)
    code, document = refresh(tmp_path)
    assert (code, document["action"], document["reasons"]) == (0, "none", [])
    assert state(tmp_path) == before
    assert not (tmp_path / f"{SPEC}.gpuready.bak").exists()


def test_dry_run_shows_the_diff_and_writes_nothing(tmp_path):
    node_a(tmp_path)
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    before = state(tmp_path)
    code, out, _ = cli("cdi", "refresh", "--root", str(tmp_path), "--dry-run")
    assert code == 0
    assert f"-  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{VERSION_A}" in out
    assert f"+  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{VERSION_B}" in out
    assert f"would rewrite {tmp_path / SPEC}" in out
    code, document = refresh(tmp_path, "--dry-run")
    assert (code, document["action"], document["written"]) == (0, "would-rewrite", False)
    assert f"libcuda.so.{VERSION_B}" in document["diff"]
    assert state(tmp_path) == before
    assert only(doctor(tmp_path)[1], "cdi-spec-stale")


def test_the_recorded_intent_is_what_a_refresh_regenerates_from(tmp_path):
    """Names by type-index and hooks off, given to generate: refresh keeps them without being
    told; an option given to refresh replaces the recorded one."""
    trees.install_driver(tmp_path, VERSION_A)
    trees.containerd_config(tmp_path)
    generate(tmp_path, "--device-name-strategy", "type-index", "--no-hooks")
    record = json.loads((tmp_path / INTENT).read_text())
    assert record["intent"]["device_name_strategies"] == ["type-index"]
    assert record["intent"]["hooks"] is False
    assert record["detected"] == {"source": "device nodes", "gpus": 2,
                                  "driver_version": VERSION_A,
                                  "library_dir": "/usr/lib/x86_64-linux-gnu"}
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    code, document = refresh(tmp_path)
    assert (code, document["action"]) == (0, "rewritten")
    text = (tmp_path / SPEC).read_text()
    assert "name: gpu0" in text and "name: '0'" not in text and "hooks:" not in text
    assert f"libcuda.so.{VERSION_B}" in text
    assert json.loads((tmp_path / INTENT).read_text())["detected"]["driver_version"] == VERSION_B

    code, document = refresh(tmp_path, "--device-name-strategy", "index")  # a new intent
    assert (code, document["action"]) == (0, "rewritten")
    assert document["reasons"] == ["--device-name-strategy is now index (was type-index)"]
    assert "name: '0'" in (tmp_path / SPEC).read_text()
    assert refresh(tmp_path)[1]["action"] == "none"  # and it is the one recorded now


def test_a_changed_inventory_is_a_new_intent(tmp_path):
    trees.containerd_config(tmp_path)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(f'driverVersion: "{VERSION_A}"\ngpus:\n  - {{index: 0, uuid: '
                         f'{trees.UUIDS[0]}}}\n')
    generate(tmp_path, "--inventory", str(inventory))
    assert refresh(tmp_path)[1]["action"] == "none"  # written ahead: not yet verifiable
    inventory.write_text(inventory.read_text() + f"  - {{index: 1, uuid: {trees.UUIDS[1]}}}\n")
    code, document = refresh(tmp_path)
    assert (code, document["action"]) == (0, "rewritten")
    assert document["reasons"] == [f"the inventory {inventory} changed since the spec was "
                                   "generated"]
    assert trees.UUIDS[1] in (tmp_path / SPEC).read_text()


def test_a_plan_that_does_not_fit_the_node_stays_stale(tmp_path):
    """--gpus 4 recorded, the node shows 2: regenerating from that intent does not help."""
    trees.install_driver(tmp_path, VERSION_A, gpus=2)
    trees.containerd_config(tmp_path)
    generate(tmp_path, "--gpus", "4")
    before = state(tmp_path)
    code, document = refresh(tmp_path)
    assert (code, document["status"], document["action"]) == (1, "failed", "unchanged")
    assert any("/dev/nvidia2" in reason for reason in document["still_stale"])
    assert state(tmp_path) == before
    code, document = refresh(tmp_path, "--gpus", "2")  # the intent that fits
    assert (code, document["action"]) == (0, "rewritten")
    assert doctor(tmp_path) == (0, [])


def test_driver_removed_refresh_cannot_regenerate_and_writes_nothing(tmp_path):
    node_a(tmp_path)
    trees.remove_driver_files(tmp_path, VERSION_A)
    trees.unload_module(tmp_path)
    before = state(tmp_path)
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path))
    assert code == 1
    assert "stays stale: it cannot be regenerated from the node's GPUs" in err
    assert "because stale: its GPUs were detected on the node (device nodes)" in out
    assert state(tmp_path) == before


def test_refusals_write_nothing(tmp_path):
    node_a(tmp_path)
    code, out, _ = cli("cdi", "refresh", "--root", str(tmp_path), "--output", "-",
                       "--format", "json")
    assert (code, json.loads(out)["status"]) == (2, "error")
    (tmp_path / SPEC).write_text("kind: [\n")
    before = state(tmp_path)
    code, _, err = cli("cdi", "refresh", "--root", str(tmp_path))
    assert code == 2 and "not a CDI spec gpuready can read; nothing written" in err
    assert "Traceback" not in err
    assert state(tmp_path) == before


def systemd_analyze() -> str:
    """The systemd-analyze binary; under CI=true its absence is a failure, else a skip."""
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("systemd-analyze is not installed (Debian package 'systemd')")
        pytest.skip("systemd-analyze is not installed")
    return found


def test_units_pass_systemd_analyze_and_unconfigure_removes_them(tmp_path):
    analyze = systemd_analyze()
    node_a(tmp_path)
    generate(tmp_path, "--gpus", "2")  # an intent the unit must carry
    # a program on the node that this machine has too: systemd-analyze verify, run here on
    # the units' node paths, then finds the program ExecStart names
    program = install_program(tmp_path, "/bin/true")
    code, document = refresh(tmp_path, "--install-units", "--dry-run", "--program", program)
    assert code == 0 and [u["written"] for u in document["units"]] == [False, False]
    assert not (tmp_path / "etc/systemd").exists()
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path), "--install-units",
                         "--program", program)
    assert code == 0, err
    assert "systemctl enable gpuready-cdi-refresh.path" in out
    service, path = ((tmp_path / unit).read_text() for unit in UNITS)
    assert "Before=containerd.service" in service and "WantedBy=multi-user.target" in service
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert exec_start == "ExecStart=/bin/true cdi refresh --gpus 2 --no-nvml"
    assert str(tmp_path) not in service  # node paths: --root is not the node's
    assert "PathChanged=/lib/modules/%v/modules.dep" in path
    assert "PathChanged=/usr/lib/x86_64-linux-gnu\n" in path
    result = subprocess.run([analyze, "verify", *(str(tmp_path / unit) for unit in UNITS)],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "")
    # a second install changes nothing
    assert [u["changed"] for u in refresh(tmp_path, "--install-units", "--program",
                                          program)[1]["units"]] == [False, False]

    code, out, err = cli("unconfigure", "--root", str(tmp_path))
    assert code == 0, err
    assert not any((tmp_path / unit).exists() for unit in UNITS)
    assert not (tmp_path / "etc/systemd").exists()  # the folders gpuready created went too
    assert not (tmp_path / "etc/containerd/config.toml.gpuready.json").exists()
    assert not (tmp_path / UNITS_RECORD).exists()
    assert (tmp_path / SPEC).exists()  # the spec is cdi generate's, not in the record


def test_a_unit_edited_since_is_left_by_unconfigure(tmp_path):
    node_a(tmp_path)
    install_program(tmp_path)
    assert refresh(tmp_path, "--install-units")[0] == 0
    edited = tmp_path / UNITS[0]
    edited.write_text(edited.read_text() + "# mine\n")
    code, out, _ = cli("unconfigure", "--root", str(tmp_path))
    assert code == 0 and "changed since gpuready wrote it: left as it is" in out
    assert edited.exists() and not (tmp_path / UNITS[1]).exists()


def test_setup_keeps_the_intent_that_refresh_reads_and_unconfigure_takes_it_back(tmp_path):
    """``setup --gpus N`` plans the spec and keeps that intent beside it: a refresh on a node
    whose driver then arrives regenerates for the GPUs it shows, and ``unconfigure`` removes the
    record with the other files setup created."""
    root = tmp_path / "node"
    code, _, err = cli("setup", "--root", str(root), "--containerd-version", "1.7", "--gpus", "2")
    assert code == 0, err
    record = json.loads((root / INTENT).read_text())
    assert record["intent"]["gpus"] == 2 and record["detected"]["gpus"] == 2
    code, document = refresh(root)
    assert (code, document["action"]) == (0, "none"), document  # no driver yet: not verifiable
    code, _, err = cli("unconfigure", "--root", str(root))
    assert code == 0, err
    assert not (root / INTENT).exists() and not (root / SPEC).exists()


def enable(root: Path) -> None:
    """What ``systemctl enable`` does to the two units: a link to each in the wants folder."""
    wants = root / WANTS
    wants.mkdir(parents=True, exist_ok=True)
    for unit in UNITS:
        (wants / Path(unit).name).symlink_to(f"/{unit}")


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_units_on_a_docker_or_crio_node_leave_containerd_out(tmp_path, engine):
    """The units' record is kept beside them: nothing is written under /etc/containerd, the
    engine is still detected, and ``unconfigure`` removes the units and their enable links."""
    trees.install_driver(tmp_path, VERSION_A)
    if engine == "docker":
        code, _, err = cli("setup", "--root", str(tmp_path), "--engine", engine)
        assert code == 0, err
    else:
        trees.write(tmp_path / "etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "crun"\n')
        code, _, err = cli("configure", "--root", str(tmp_path), "--engine", engine)
        assert code == 0, err
    generate(tmp_path)
    install_program(tmp_path, "/usr/bin/gpuready")
    assert refresh(tmp_path, "--install-units")[0] == 0
    assert (tmp_path / UNITS_RECORD).exists()
    assert not (tmp_path / "etc/containerd").exists()
    code, out, err = cli("configure", "--root", str(tmp_path), "--dry-run")
    assert code == 0, err  # still detected as the engine it is
    enable(tmp_path)
    (tmp_path / WANTS / "other.service").symlink_to("/etc/systemd/system/other.service")
    code, out, err = cli("unconfigure", "--root", str(tmp_path))
    assert code == 0, err
    assert not any((tmp_path / unit).exists() for unit in UNITS)
    assert not (tmp_path / UNITS_RECORD).exists()
    assert sorted(p.name for p in (tmp_path / WANTS).iterdir()) == ["other.service"]
    assert "link to gpuready's unit" in out


def test_an_edited_unit_keeps_its_enable_link(tmp_path):
    node_a(tmp_path)
    install_program(tmp_path)
    assert refresh(tmp_path, "--install-units")[0] == 0
    enable(tmp_path)
    edited = tmp_path / UNITS[0]
    edited.write_text(edited.read_text() + "# mine\n")
    code, out, _ = cli("unconfigure", "--root", str(tmp_path))
    assert code == 0 and "changed since gpuready wrote it: left as it is" in out
    assert (tmp_path / WANTS / "gpuready-cdi-refresh.service").is_symlink()
    assert not (tmp_path / WANTS / "gpuready-cdi-refresh.path").is_symlink()


@pytest.mark.parametrize("where", [SPEC, "var/run/cdi/nvidia.yaml"])
def test_a_spec_gpuready_did_not_write_is_refreshed_only_with_force(tmp_path, where):
    node_a(tmp_path)
    spec = tmp_path / where
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text((tmp_path / SPEC).read_text() + "# tuned by hand\n")
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    before = spec.read_bytes()
    extra = () if where == SPEC else ("--output", f"/{where}")
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path), *extra)
    assert code == 2 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("gpuready: error:")]
    assert "stale" in line and "no intent record of gpuready's describes it" in line
    assert "--force" in line
    assert spec.read_bytes() == before
    code, document = refresh(tmp_path, *extra, "--force")
    assert (code, document["action"]) == (0, "rewritten")
    assert f"libcuda.so.{VERSION_B}" in spec.read_text()


def test_setup_refresh_unconfigure_leaves_nothing_of_gpuready(tmp_path):
    """A refresh of the spec setup wrote keeps setup's record true: unconfigure then removes
    the spec and its intent record, and no backup is left."""
    root = tmp_path / "node"
    trees.install_driver(root, VERSION_A)
    code, _, err = cli("setup", "--root", str(root), "--containerd-version", "1.7")
    assert code == 0, err
    trees.upgrade_driver(root, VERSION_A, VERSION_B)
    code, document = refresh(root)
    assert (code, document["action"]) == (0, "rewritten"), document
    code, out, err = cli("unconfigure", "--root", str(root))
    assert code == 0, err
    assert "changed since gpuready wrote it" not in out
    left = sorted(p.name for p in (root / "etc/cdi").iterdir()) if (root / "etc/cdi").exists() \
        else []
    assert left == []


def test_units_and_spec_roll_back_together_when_a_write_fails(tmp_path, monkeypatch):
    from gpuready import fsio

    node_a(tmp_path)
    install_program(tmp_path)
    trees.upgrade_driver(tmp_path, VERSION_A, VERSION_B)
    before = state(tmp_path)
    real = fsio.write_atomic

    def failing(path, data, **kw):
        if path.name.endswith(".path"):
            raise fsio.WriteError(f"{path}: no space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(fsio, "write_atomic", failing)
    code, _, err = cli("cdi", "refresh", "--root", str(tmp_path), "--install-units")
    assert code == 2 and "Traceback" not in err
    monkeypatch.setattr(fsio, "write_atomic", real)
    assert {name: data for name, (data, _) in state(tmp_path).items()} == {
        name: data for name, (data, _) in before.items()}  # put back: the bytes, no backup
    assert not any((tmp_path / unit).exists() for unit in UNITS)


def test_a_relative_inventory_is_recorded_as_a_node_path(tmp_path, monkeypatch):
    trees.containerd_config(tmp_path)
    (tmp_path / "inventory.yaml").write_text(
        f'driverVersion: "{VERSION_A}"\ngpus:\n  - {{index: 0, uuid: {trees.UUIDS[0]}}}\n')
    monkeypatch.chdir(tmp_path)
    generate(tmp_path, "--inventory", "inventory.yaml")
    assert json.loads((tmp_path / INTENT).read_text())["intent"]["inventory"] == (
        "/inventory.yaml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, document = refresh(tmp_path)
    assert (code, document["action"]) == (0, "none"), document
    (tmp_path / "inventory.yaml").write_text(
        (tmp_path / "inventory.yaml").read_text() + f"  - {{index: 1, uuid: {trees.UUIDS[1]}}}\n")
    code, document = refresh(tmp_path)
    assert (code, document["action"]) == (0, "rewritten"), document
    assert trees.UUIDS[1] in (tmp_path / SPEC).read_text()


@pytest.mark.parametrize("field,value", [("gpus", -5), ("gpus", 256), ("driver_root", "run/x"),
                                         ("device_name_strategies", ["bogus"]),
                                         ("inventory", "relative.yaml")])
def test_a_damaged_intent_record_is_as_good_as_none(tmp_path, field, value):
    node_a(tmp_path)
    record = json.loads((tmp_path / INTENT).read_text())
    record["intent"][field] = value
    (tmp_path / INTENT).write_text(json.dumps(record))
    from gpuready.cdi.intent import load_intent
    from gpuready.node import Node

    assert load_intent(Node(tmp_path), tmp_path / SPEC) is None


def test_a_missing_uvm_node_is_not_regenerated_away(tmp_path):
    """nvidia-uvm not loaded yet: doctor says how to load it, and a refresh (the boot unit)
    keeps the spec and exits 0."""
    node_a(tmp_path)
    for name in ("nvidia-uvm", "nvidia-uvm-tools"):
        (tmp_path / "dev" / name).unlink()
    code, problems = doctor(tmp_path)
    stale = only(problems, "cdi-spec-stale")
    assert "nvidia-modprobe -u -c=0" in stale["fix"] and "/dev/nvidia-uvm" in stale["message"]
    age(tmp_path)
    before = state(tmp_path)
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path))
    assert code == 0, err
    assert "nvidia-modprobe -u -c=0" in err
    assert state(tmp_path) == before


def test_setup_completes_the_intent_a_killed_run_left_unwritten(tmp_path):
    """A setup killed between the spec and its record: the next run writes the record for the
    spec it would have generated, removes the dead run's temporary, and unconfigure still takes
    both back. A spec someone else wrote is kept with no record made up for it."""
    root = tmp_path / "node"
    argv = ("setup", "--root", str(root), "--containerd-version", "1.7", "--gpus", "2")
    code, _, err = cli(*argv)
    assert code == 0, err
    record = (root / INTENT).read_bytes()
    (root / INTENT).unlink()
    temporary = root / "etc/cdi/.nvidia.yaml.gpuready.intent.abcd1234.tmp"
    temporary.write_bytes(record[:40])
    code, _, err = cli(*argv)
    assert code == 0, err
    assert (root / INTENT).read_bytes() == record
    assert not temporary.exists()
    code, _, err = cli("unconfigure", "--root", str(root))
    assert code == 0, err
    assert not (root / INTENT).exists() and not (root / SPEC).exists()

    other = tmp_path / "other"
    (other / "etc/cdi").mkdir(parents=True)
    (other / SPEC).write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
                              "- name: all\n  containerEdits:\n    deviceNodes:\n"
                              "    - path: /dev/nvidia0\n")
    code, _, err = cli("setup", "--root", str(other), "--containerd-version", "1.7", "--gpus", "2")
    assert code == 0, err
    assert not (other / INTENT).exists()


def exec_start(root: Path) -> str:
    service = (root / UNITS[0]).read_text()
    return next(line for line in service.splitlines() if line.startswith("ExecStart="))


def test_units_under_a_root_run_the_gpuready_of_the_node(tmp_path):
    """Under --root the unit runs on the node: ExecStart= names the node's gpuready (or
    --program, a node path), never this machine's; with neither, exit 2 and nothing written."""
    node_a(tmp_path)
    before = state(tmp_path)
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path), "--install-units")
    assert code == 2, out + err
    [line] = [line for line in err.splitlines() if line.startswith("gpuready: error:")]
    assert "no gpuready on the node (/usr/local/bin/gpuready or /usr/bin/gpuready)" in line
    assert "--program PATH" in line
    assert state(tmp_path) == before and not (tmp_path / "etc/systemd").exists()

    install_program(tmp_path, "/usr/bin/gpuready")
    assert refresh(tmp_path, "--install-units")[0] == 0
    assert exec_start(tmp_path) == "ExecStart=/usr/bin/gpuready cdi refresh --no-nvml"
    assert sys.executable not in (tmp_path / UNITS[0]).read_text()

    install_program(tmp_path, "/opt/tools/gpuready")
    code, document = refresh(tmp_path, "--install-units", "--program", "/opt/tools/gpuready")
    assert code == 0 and document["units"][0]["changed"]
    assert exec_start(tmp_path) == "ExecStart=/opt/tools/gpuready cdi refresh --no-nvml"


@pytest.mark.parametrize("argv,message", [
    (("--install-units", "--program", "/opt/none/gpuready"), "no executable file there"),
    (("--install-units", "--program", "bin/gpuready"), "absolute node path"),
    (("--program", "/usr/bin/gpuready"), "give it with --install-units"),
])
def test_a_program_the_node_does_not_have_is_refused(tmp_path, argv, message):
    node_a(tmp_path)
    install_program(tmp_path, "/usr/bin/gpuready")
    before = state(tmp_path)
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path), *argv)
    assert code == 2 and message in err and "Traceback" not in err, out + err
    assert state(tmp_path) == before and not (tmp_path / "etc/systemd").exists()


def test_on_the_machine_itself_the_unit_runs_this_gpuready():
    """With no --root (read only: nothing is written here) the unit runs the gpuready that
    runs now, as before --program existed."""
    from gpuready.cdi.units import entry_point, unit_program
    from gpuready.node import Node

    assert unit_program(Node("/"), None) == entry_point()
    assert unit_program(Node("/"), sys.executable) == [sys.executable]
