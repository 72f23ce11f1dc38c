"""Never make a node worse: configure on real configs written by others, judged per line.

The corpus (``tests/data/corpus-real``, each file's source in its SOURCES.md; the layouts of
``tests/data/corpus``; every recorded ``config default``) is configured as an operator would,
once per containerd line. Debian's containerd 1.6 runs here: on that line the result is judged
by its own ``config dump``, and gpuready's gate asks it too. 1.7, 2.1 and 2.3 cannot run here: the
result is judged by the effective-config model, itself tested against those lines' recorded
answers (tests/test_model_lines.py). Every file ends either configured (no runtime lost, the
default runtime loadable, the GPU runtime loaded, lines only added) or refused with its reason
and not a byte changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.compat import tomllib
from gpuready.containerd import model
from gpuready.containerd.lines import LINES, NodeLine
from gpuready.cri.client import CriClient
from gpuready.textfile import without_bom
from tests.helpers import DATA, added_lines_only, run_cli

CORPUS = (sorted((DATA / "corpus-real").glob("*.toml")) + sorted((DATA / "corpus").glob("*.toml"))
          + sorted((DATA / "containerd").glob("*.toml")))
MODELLED = ("1.7", "2.1", "2.3")
# Files gpuready must refuse whatever the line: their default runtime is already named nvidia,
# and registering the GPU runtime there would change how every pod runs.
DEFAULT_IS_NVIDIA = {"bottlerocket-k8s-nvidia.toml"}
# Edits that change a line by design: --enable-cri takes "cri" out of disabled_plugins, and a
# runtime added to an inline runtimes table rewrites that one line.
NOT_ONLY_ADDED = {"bottlerocket-basic.toml", "cirocosta-containerd-install.toml",
                  "docker-containerd-io.toml", "serializer-inline-runtimes.toml"}


def _configure(source: Path, folder: Path, *flags: str):
    path = folder / "config.toml"
    path.write_bytes(source.read_bytes())
    result = run_cli("configure", "--config", str(path), *flags)
    if result.code == 2 and "disabled_plugins turns it off" in result.err:
        result = run_cli("configure", "--config", str(path), "--enable-cri", *flags)
    return path, result


def _loaded(data: dict, line: NodeLine, path: Path) -> model.Loaded:
    return model.build([(path, data)], line)


def _judge(source: Path, path: Path, result, line: NodeLine, *, dumped: dict | None = None):
    original = source.read_text(encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    before_data = tomllib.loads(without_bom(original))
    version = before_data.get("version", 1)
    # refusals the test expects: a version the line does not read, a default already named
    # nvidia. A file whose import names no file here (one made at boot, or not copied) is
    # judged as it would load with that file there.
    must_refuse = version > line.line.max_config_version or source.name in DEFAULT_IS_NVIDIA
    if result.code != 0:
        assert result.code == 2, result.err
        assert text == original, "a refused change wrote the file"
        assert "nothing written" in result.err, result.err
        assert must_refuse, result.err
        return "refused"
    assert not must_refuse, "configured a file it must refuse"
    before = _loaded(before_data, line, path)
    after = _loaded(dumped if dumped is not None else tomllib.loads(without_bom(text)), line,
                    path)
    assert after.cri_loaded, after.cri_error or after.refused
    assert "nvidia" in after.runtimes
    lost = set(before.loaded_runtimes) - set(after.runtimes)
    assert not lost, f"runtimes lost: {sorted(lost)}"
    assert after.default_runtime in after.runtimes
    if source.name not in NOT_ONLY_ADDED:
        assert added_lines_only(original, text), "an existing line changed"
    return "configured"


@pytest.mark.parametrize("line_name", MODELLED)
@pytest.mark.parametrize("source", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_configure_never_breaks_a_node_of_a_modelled_line(source, line_name, tmp_path):
    """1.7, 2.1 and 2.3: judged by the model (their recorded answers, replayed elsewhere)."""
    line = NodeLine(LINES[line_name], LINES[line_name].release, "--containerd-version")
    path, result = _configure(source, tmp_path, "--containerd-version", line_name)
    _judge(source, path, result, line)


@pytest.mark.containerd
@pytest.mark.parametrize("source", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_configure_never_breaks_a_node_of_the_installed_containerd(source, tmp_path, config_dump):
    """The containerd installed here (Debian's 1.6): gpuready asks it, and so does the test."""
    from gpuready.containerd.installed import installed_release
    from gpuready.containerd.lines import line_for_release

    release = installed_release()
    line = NodeLine(line_for_release(release)[0], release, "containerd --version")
    path, result = _configure(source, tmp_path)
    dumped = None
    if result.code == 0:
        dump = config_dump(path)
        if dump.returncode != 0:  # containerd did not start on the file before either: an
            original = tmp_path / "original.toml"  # import names no file on this machine
            original.write_bytes(source.read_bytes())
            assert config_dump(original).stderr.replace(str(original), str(path)) == \
                dump.stderr, dump.stderr
        else:
            dumped = tomllib.loads(dump.stdout)
    _judge(source, path, result, line, dumped=dumped)


# -- the two files the problem was found on, loaded by a real containerd ------------------------

DEBIAN_STOCK = DATA / "corpus-real" / "debian-12-containerd-package.toml"
DOCKER_CONTAINERD_IO = DATA / "corpus-real" / "docker-containerd-io.toml"


@pytest.mark.containerd
@pytest.mark.parametrize("source", [DEBIAN_STOCK, DOCKER_CONTAINERD_IO], ids=lambda p: p.stem)
def test_a_real_containerd_started_on_the_result_loads_runc_and_nvidia(
        source, tmp_path, start_containerd):
    path = tmp_path / "config.toml"
    path.write_bytes(source.read_bytes())
    flags = ["--enable-cri"] if source == DOCKER_CONTAINERD_IO else []
    result = run_cli("configure", "--config", str(path), *flags)
    assert result.code == 0, result.err
    daemon = start_containerd(config_text=path.read_text())
    with CriClient(f"unix://{daemon.socket}", timeout=10) as client:
        config = client.status(verbose=True).config()
    assert set(config["containerd"]["runtimes"]) == {"runc", "nvidia"}
    assert config["containerd"]["defaultRuntimeName"] == "runc"


@pytest.mark.parametrize("source", [DEBIAN_STOCK, DOCKER_CONTAINERD_IO], ids=lambda p: p.stem)
def test_on_1_7_the_result_keeps_runc_as_the_model_says(source, tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes(source.read_bytes())
    flags = ["--enable-cri"] if source == DOCKER_CONTAINERD_IO else []
    result = run_cli("configure", "--config", str(path), "--containerd-version", "1.7", *flags)
    assert result.code == 0, result.err
    assert "also wrote runtime runc" in result.out
    line = NodeLine(LINES["1.7"], (1, 7), "--containerd-version")
    after = _loaded(tomllib.loads(path.read_text()), line, path)
    assert after.cri_loaded and set(after.runtimes) == {"runc", "nvidia"}
    assert after.runtimes["runc"]["sandbox_mode"] == "podsandbox"  # as 1.7's own default


def test_without_runc_the_1_x_result_would_have_broken_the_node(tmp_path):
    """The gate is what stands between the stock file and a node without CRI: a plan that
    registers only nvidia is refused by the one writer, nothing written."""
    from gpuready.changeset import write_all
    from gpuready.containerd.document import load_config
    from gpuready.containerd.gate import Guard, Intent, RefusedError
    from gpuready.containerd.register import RuntimeRequest, plan_registration
    from gpuready.node import Node

    path = tmp_path / "config.toml"
    path.write_bytes(DEBIAN_STOCK.read_bytes())
    node = Node(tmp_path)
    plan = plan_registration(load_config(path, node=node), RuntimeRequest())
    line = NodeLine(LINES["1.6"], (1, 6), "--containerd-version")
    guard = Guard(path, tmp_path, line, Intent(adds="nvidia"))

    with pytest.raises(RefusedError, match="no corresponding runtime configured"):
        write_all([plan._replace(guard=guard)], node=node)
    assert path.read_bytes() == DEBIAN_STOCK.read_bytes()
