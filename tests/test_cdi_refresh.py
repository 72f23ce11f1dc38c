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
from pathlib import Path

import pytest

from tests import driver_trees as trees
from tests.driver_trees import VERSION_A, VERSION_B
from tests.test_cdi_staleness import cli, doctor, generate, node_a, only

SPEC = "etc/cdi/nvidia.yaml"
INTENT = "etc/cdi/nvidia.yaml.gpuready.intent"
UNITS = ("etc/systemd/system/gpuready-cdi-refresh.service",
         "etc/systemd/system/gpuready-cdi-refresh.path")


def refresh(root: Path, *extra: str) -> tuple[int, dict]:
    """``cdi refresh --format json`` on the node; (exit code, the JSON document)."""
    code, out, err = cli("cdi", "refresh", "--root", str(root), "--format", "json", *extra)
    assert "Traceback" not in err, err
    document = json.loads(out)
    assert document["exit_code"] == code
    return code, document


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
    """Issue 21's "done when": stale after an upgrade, refreshed, no finding, refresh again is
    a no-op that keeps the mtime."""
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
    code, document = refresh(tmp_path, "--install-units", "--dry-run")
    assert code == 0 and [u["written"] for u in document["units"]] == [False, False]
    assert not (tmp_path / "etc/systemd").exists()
    code, out, err = cli("cdi", "refresh", "--root", str(tmp_path), "--install-units")
    assert code == 0, err
    assert "systemctl enable gpuready-cdi-refresh.path" in out
    service, path = ((tmp_path / unit).read_text() for unit in UNITS)
    assert "Before=containerd.service" in service and "WantedBy=multi-user.target" in service
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith(" cdi refresh --gpus 2 --no-nvml")
    assert str(tmp_path) not in service  # node paths: --root is not the node's
    assert "PathChanged=/lib/modules/%v/modules.dep" in path
    assert "PathChanged=/usr/lib/x86_64-linux-gnu\n" in path
    # ExecStart names this interpreter (a real file here), so verify runs on the host paths
    result = subprocess.run([analyze, "verify", *(str(tmp_path / unit) for unit in UNITS)],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "")
    # a second install changes nothing
    assert [u["changed"] for u in refresh(tmp_path, "--install-units")[1]["units"]] == [
        False, False]

    code, out, err = cli("unconfigure", "--root", str(tmp_path))
    assert code == 0, err
    assert not any((tmp_path / unit).exists() for unit in UNITS)
    assert not (tmp_path / "etc/systemd").exists()  # the folders gpuready created went too
    assert not (tmp_path / "etc/containerd/config.toml.gpuready.json").exists()
    assert (tmp_path / SPEC).exists()  # the spec is cdi generate's, not in the record


def test_a_unit_edited_since_is_left_by_unconfigure(tmp_path):
    node_a(tmp_path)
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
