"""The never-break gate: every change to containerd's files is judged before it is written.

Each test makes a change an operator could ask for, one the gate must refuse (exit 2, a one-line
reason, not a byte changed) or let through. Lines other than Debian's 1.6 are named with
``--containerd-version`` and judged by the effective-config model (tested against those lines'
recordings in tests/test_model_lines.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.compat import tomllib
from tests.helpers import DATA, LAB_BASE, run_cli

KATA = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
"""


def _node(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(text)
    return config


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _refused(result, root: Path, before: dict[str, bytes], *words: str) -> None:
    assert result.code == 2, result.out + result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "refusing the change" in lines[0], result.err
    assert lines[0].endswith("nothing written")
    for word in words:
        assert word in lines[0], lines[0]
    assert _snapshot(root) == before, "a refused change wrote a file"


def test_a_runtime_of_another_type_is_not_taken_over(tmp_path):
    _node(tmp_path, KATA)
    before = _snapshot(tmp_path)
    for dry in ([], ["--dry-run"]):  # the dry run shows the verdict a real run meets
        result = run_cli("configure", "--root", str(tmp_path), "--runtime-name", "kata",
                         "--containerd-version", "1.7", *dry)
        _refused(result, tmp_path, before, "'kata' of type io.containerd.kata.v2")


def test_confirmed_takeover_goes_through(tmp_path):
    config = _node(tmp_path, KATA)
    result = run_cli("configure", "--root", str(tmp_path), "--runtime-name", "kata",
                     "--containerd-version", "1.7", "--confirm-every-pod-uses-it")
    assert result.code == 0, result.err
    kata = tomllib.loads(config.read_text())["plugins"]["io.containerd.grpc.v1.cri"][
        "containerd"]["runtimes"]["kata"]
    assert kata["runtime_type"] == "io.containerd.runc.v2"


def test_a_drop_in_that_changes_the_default_runtime_is_refused(tmp_path):
    """A drop-in registering under the default runtime's name changes how every pod runs."""
    _node(tmp_path, LAB_BASE.read_text())
    before = _snapshot(tmp_path)
    result = run_cli("configure", "--root", str(tmp_path), "--drop-in", "--runtime-name", "runc",
                     "--containerd-version", "1.7")
    assert result.code == 2, result.err
    assert "nothing written" in result.err and "default runtime" in result.err
    assert _snapshot(tmp_path) == before


def test_a_second_drop_in_runtime_does_not_drop_the_first(tmp_path):
    _node(tmp_path, LAB_BASE.read_text())
    first = run_cli("configure", "--root", str(tmp_path), "--drop-in",
                    "--containerd-version", "1.7")
    assert first.code == 0, first.err
    before = _snapshot(tmp_path)
    second = run_cli("configure", "--root", str(tmp_path), "--drop-in", "--runtime-name",
                     "nvidia-cdi", "--containerd-version", "1.7")
    # the drop-in is gpuready's whole file: writing the second runtime there would drop the
    # first, which containerd loads now
    _refused(second, tmp_path, before, "runtime(s) nvidia would no longer be loaded")


def test_unconfigure_does_not_leave_the_default_naming_the_runtime_it_removes(tmp_path):
    config = _node(tmp_path, LAB_BASE.read_text())
    assert run_cli("configure", "--root", str(tmp_path), "--containerd-version", "1.6").code == 0
    # the operator makes nvidia the default by hand afterwards
    text = config.read_text().replace('default_runtime_name = "runc"',
                                      'default_runtime_name = "nvidia"')
    assert 'default_runtime_name = "nvidia"' in text
    config.write_text(text)
    before = _snapshot(tmp_path)
    result = run_cli("unconfigure", "--root", str(tmp_path), "--containerd-version", "1.6")
    _refused(result, tmp_path, before, "no corresponding runtime configured", '"nvidia"')


def test_migrate_is_refused_on_a_node_whose_containerd_does_not_read_the_target(tmp_path):
    _node(tmp_path, LAB_BASE.read_text())
    before = _snapshot(tmp_path)
    result = run_cli("migrate", "--to", "3", "--root", str(tmp_path),
                     "--containerd-version", "1.7")
    _refused(result, tmp_path, before, "containerd 1.7 reads config versions 1 and 2")


def test_migrate_for_the_line_that_reads_it_loads_every_runtime_it_loaded(tmp_path):
    config = _node(tmp_path, (DATA / "containerd" / "containerd-1.6.20-default.toml").read_text())
    assert run_cli("configure", "--root", str(tmp_path), "--containerd-version", "1.6").code == 0
    result = run_cli("migrate", "--to", "3", "--root", str(tmp_path),
                     "--containerd-version", "2.1")
    assert result.code == 0, result.err
    assert tomllib.loads(config.read_text())["version"] == 3


def test_a_version_4_file_is_refused_for_2_1(tmp_path):
    _node(tmp_path, (DATA / "containerd" / "containerd-2.3.4-default.toml").read_text())
    before = _snapshot(tmp_path)
    result = run_cli("configure", "--root", str(tmp_path), "--containerd-version", "2.1")
    _refused(result, tmp_path, before, "config version 4 is newer than the 3 it reads")


def test_releases_read_as_another_line_are_said_so(tmp_path):
    _node(tmp_path, (DATA / "containerd" / "containerd-2.3.4-default.toml").read_text())
    result = run_cli("configure", "--root", str(tmp_path), "--containerd-version", "2.2.1")
    assert result.code == 2 and "containerd 2.1" in result.err


@pytest.mark.containerd
def test_on_this_machine_the_installed_containerd_has_the_final_word(tmp_path, config_dump):
    """No --root and no --containerd-version: the line is this machine's containerd, and its
    own `config dump` of the staged files judges the change (the stock Debian file: runc kept)."""
    path = tmp_path / "config.toml"
    path.write_bytes((DATA / "corpus-real" / "debian-12-containerd-package.toml").read_bytes())
    result = run_cli("configure", "--config", str(path))
    assert result.code == 0, result.err
    dumped = tomllib.loads(config_dump(path).stdout)
    runtimes = dumped["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert {"runc", "nvidia"} <= set(runtimes)


def test_docker_the_default_runtime_is_not_changed_without_the_confirmation(tmp_path):
    daemon = tmp_path / "etc/docker/daemon.json"
    daemon.parent.mkdir(parents=True)
    daemon.write_text('{"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/x"}}}\n')
    before = _snapshot(tmp_path)
    result = run_cli("configure", "--engine", "docker", "--root", str(tmp_path))
    _refused(result, tmp_path, before, "default runtime 'nvidia'")


def test_crio_the_default_runtime_is_not_changed_without_the_confirmation(tmp_path):
    dropin = tmp_path / "etc/crio/crio.conf.d/10-nvidia.toml"
    dropin.parent.mkdir(parents=True)
    dropin.write_text('[crio.runtime]\ndefault_runtime = "nvidia"\n'
                      '[crio.runtime.runtimes.nvidia]\nruntime_path = "/x"\n')
    before = _snapshot(tmp_path)
    result = run_cli("configure", "--engine", "crio", "--root", str(tmp_path))
    _refused(result, tmp_path, before, "default runtime 'nvidia'")


def test_setup_dry_run_meets_the_verdict_a_real_run_meets(tmp_path):
    _node(tmp_path, KATA)
    before = _snapshot(tmp_path)
    for dry in (["--dry-run"], []):
        result = run_cli("setup", "--root", str(tmp_path), "--runtime-name", "kata",
                         "--containerd-version", "1.7", *dry)
        _refused(result, tmp_path, before, "'kata' of type io.containerd.kata.v2")


def test_a_runtime_of_another_type_is_guarded_on_a_node_whose_cri_fails_already(tmp_path):
    """A version 1 file whose runtimes table lacks runc: 1.x loads no CRI plugin now, and the
    kata runtime must still not become runc behind the operator's back."""
    _node(tmp_path, (DATA / "corpus-real" / "kata-docs-runtimeclass-mixed-v1.toml").read_text())
    before = _snapshot(tmp_path)
    result = run_cli("configure", "--root", str(tmp_path), "--runtime-name", "kata",
                     "--containerd-version", "1.7")
    _refused(result, tmp_path, before, "'kata' of type io.containerd.kata.v2")


def test_a_drop_in_folder_that_is_a_link_is_found_by_the_glob(tmp_path):
    text = (DATA / "containerd" / "containerd-2.1.9-default.toml").read_text()
    config = _node(tmp_path, text.replace("imports = []",
                                          'imports = ["/etc/containerd/conf.d/*.toml"]'))
    (config.parent / "dropins").mkdir()
    (config.parent / "conf.d").symlink_to("dropins")
    result = run_cli("configure", "--root", str(tmp_path), "--drop-in",
                     "--containerd-version", "2.1")
    assert result.code == 0, result.err
    assert (config.parent / "dropins" / "99-nvidia.toml").is_file()


def test_an_import_made_at_boot_does_not_block_a_change(tmp_path):
    """An image whose config imports a file created at boot (k0s, Talos, minikube): missing in
    the folder, containerd would not start on it here; the change is judged as it would load
    with the file there, and goes through when it breaks nothing."""
    text = LAB_BASE.read_text().replace("version = 2",
                                        'version = 2\nimports = ["/run/gen/x.toml"]')
    config = _node(tmp_path, text)
    result = run_cli("configure", "--root", str(tmp_path), "--containerd-version", "1.6")
    assert result.code == 0, result.err
    assert run_cli("unconfigure", "--root", str(tmp_path), "--containerd-version", "1.6").code == 0
    assert config.read_text() == text


def test_docker_a_runtime_of_another_program_is_not_taken_over(tmp_path):
    daemon = tmp_path / "etc/docker/daemon.json"
    daemon.parent.mkdir(parents=True)
    daemon.write_text('{"runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}}}\n')
    before = _snapshot(tmp_path)
    result = run_cli("configure", "--engine", "docker", "--root", str(tmp_path),
                     "--runtime-name", "kata")
    _refused(result, tmp_path, before, "'kata' (path /usr/bin/kata-runtime)")
    # an NVIDIA runtime whose path moves is the runtime gpuready registers: updated
    daemon.write_text(
        '{"runtimes": {"nvidia": {"path": "/usr/local/bin/nvidia-container-runtime"}}}\n')
    assert run_cli("configure", "--engine", "docker", "--root", str(tmp_path)).code == 0


# -- issue 28: a default that names a runtime gpuready would create ----------------------------

NAMED_DEFAULT = {
    "docker": ("etc/docker/daemon.json", '{\n  "default-runtime": "nvidia"\n}\n'),
    "crio": ("etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "nvidia"\n'),
}


def _named_default_node(root: Path, engine: str) -> Path:
    """A node whose engine names ``nvidia`` its default runtime while no runtime has that name."""
    relative, text = NAMED_DEFAULT[engine]
    path = root / relative
    path.parent.mkdir(parents=True)
    path.write_text(text)
    (root / "etc/crio/crio.conf.d").mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_a_runtime_created_under_the_default_runtimes_name_needs_the_confirmation(tmp_path,
                                                                                  engine):
    """Creating ``nvidia`` where the default already names it makes every container run
    through it: refused like containerd refuses it, dry run and real run alike."""
    _named_default_node(tmp_path, engine)
    before = _snapshot(tmp_path)
    for dry in (["--dry-run"], []):
        result = run_cli("configure", "--engine", engine, "--root", str(tmp_path), *dry)
        _refused(result, tmp_path, before, "the default runtime 'nvidia' names no runtime yet",
                 "--confirm-every-pod-uses-it")


@pytest.mark.parametrize("engine", ["docker", "crio"])
def test_the_confirmation_creates_the_default_runtime(tmp_path, engine):
    _named_default_node(tmp_path, engine)
    result = run_cli("configure", "--engine", engine, "--root", str(tmp_path),
                     "--confirm-every-pod-uses-it")
    assert result.code == 0, result.err
    if engine == "docker":
        data = json.loads((tmp_path / "etc/docker/daemon.json").read_text())
        assert data["default-runtime"] == "nvidia" and "nvidia" in data["runtimes"]
    else:
        dropin = tmp_path / "etc/crio/crio.conf.d/99-nvidia.toml"
        assert dropin.read_text() == ('[crio.runtime.runtimes.nvidia]\nruntime_path = '
                                      '"/usr/bin/nvidia-container-runtime"\nruntime_type = "oci"\n')


def test_docker_another_runtime_name_goes_through_without_the_confirmation(tmp_path):
    daemon = _named_default_node(tmp_path, "docker")
    result = run_cli("configure", "--engine", "docker", "--root", str(tmp_path),
                     "--runtime-name", "nvidia-gpu")
    assert result.code == 0, result.err
    assert set(json.loads(daemon.read_text())["runtimes"]) == {"nvidia-gpu"}


def test_setup_docker_refuses_the_default_runtimes_name_too(tmp_path):
    """``setup --engine docker`` meets the same gate, dry run and real run, and nothing of its
    eight steps is written; confirmed, it goes through."""
    daemon = _named_default_node(tmp_path, "docker")
    before = _snapshot(tmp_path)
    for dry in (["--dry-run"], []):
        result = run_cli("setup", "--engine", "docker", "--root", str(tmp_path), *dry)
        _refused(result, tmp_path, before, "the default runtime 'nvidia' names no runtime yet")
    result = run_cli("setup", "--engine", "docker", "--root", str(tmp_path),
                     "--confirm-every-pod-uses-it")
    assert "nvidia" in json.loads(daemon.read_text())["runtimes"], result.out + result.err
