"""Bounds on time and memory: every command ends within seconds with its answer or one line.

Each case runs the real command line as a child (under a 2 GiB address-space limit) on a
generated input that once took minutes, memory or a RecursionError: a config of many keys, key
paths of thousands of parts, imports of thousands of files or hundreds of MiB. Past a bound the
command refuses with one line and exit 2, and writes nothing. The 1 MiB and 300-file runs are
marked slow.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuready.containerd.document import MAX_KEY_PARTS, MAX_TOML_KEYS
from gpuready.node import MAX_NODE_BYTES, MAX_NODE_FILES
from tests.helpers import LAB_BASE, into_root
from tests.measure import run_measured, tree_snapshot

CONFIG = "etc/containerd/config.toml"
CONF_D = "etc/containerd/conf.d"
MEMORY_MB = 2048
SECONDS = 20.0
RUNTIMES = 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes'
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"


def _node(tmp: Path, extra: str = "", *, head: str = "") -> Path:
    """A node whose config is the lab base with ``head`` before and ``extra`` after it."""
    root = tmp / "node"
    (root / CONFIG).parent.mkdir(parents=True)
    (root / CONFIG).write_text(head + LAB_BASE.read_text() + extra)
    return root


def _keys(count: int, table: str = "gpuready.filler") -> str:
    """A plugin table of ``count`` keys."""
    return f'\n[plugins."{table}"]\n' + "".join(f"key_{i} = {i}\n" for i in range(count))


def _padded_runtimes(count: int, pad: int, *,
                     setting: str = 'runtime_type = "io.containerd.runc.v2"') -> str:
    """``count`` runtime tables of one ``setting``, each line padded with a comment of ``pad``
    bytes."""
    comment = "p" * pad
    return "".join(f'\n[{RUNTIMES}.r{i}]\n{setting} # {comment}\n' for i in range(count))


def _importing(tmp: Path, files: int, size: int) -> Path:
    """A node whose config imports a glob matching ``files`` files of about ``size`` bytes."""
    root = _node(tmp, head=f'imports = ["/{CONF_D}/*.toml"]\n')
    folder = root / CONF_D
    folder.mkdir(parents=True)
    for index in range(files):
        pad = "x" * max(size - 80, 0)
        (folder / f"{index:05d}.toml").write_text(
            f'version = 2\n[plugins."gpuready.filler{index}"]\npad = "{pad}"\n')
    return root


COMMANDS = {
    "show-config": lambda root: ("show-config", "--root", str(root)),
    "lint": lambda root: ("lint", "--root", str(root)),
    "doctor": lambda root: ("doctor", "--root", str(root)),
    "migrate": lambda root: ("migrate", "--to", "3", "--root", str(root)),
    "configure": lambda root: ("configure", "--root", str(root)),
    "configure-drop-in": lambda root: ("configure", "--root", str(root), "--drop-in", DROP_IN),
    "setup": lambda root: ("setup", "--root", str(root)),
    "unconfigure": lambda root: ("unconfigure", "--root", str(root)),
    "check": lambda root: ("check", "--root", str(root)),
    "audit": lambda root: ("audit", "--jobs", "1", str(root)),
}
FINDERS = ("lint", "doctor")  # they report a file they refuse as a finding
# their answer is a report (a failed check, an unreadable node, nothing recorded): in time,
# without an internal error, and nothing written
ANSWERERS = ("check", "audit", "unconfigure")


def _bounded(root: Path, command: str, *, says: str | None = None, seconds: float = SECONDS):
    """Run ``command`` on ``root``; it must end in time, without an internal error, and when
    ``says`` is given refuse with exit 2 and one line holding it, nothing written."""
    before = tree_snapshot(root)
    result = run_measured(*COMMANDS[command](root), memory_limit_mb=MEMORY_MB,
                          timeout=seconds + 10)
    assert result.seconds < seconds, (command, result.seconds)
    assert "internal error" not in result.err and "Traceback" not in result.err, result.err
    if says is not None and command in ANSWERERS:
        assert result.code in (0, 1), (command, result.code, result.err)
        assert tree_snapshot(root) == before, f"{command} wrote past its bound"
    elif says is not None:
        if command in FINDERS and result.code == 1:  # a refused file is an error finding
            assert says in result.out, result.out
        else:
            assert result.code == 2, (command, result.code, result.err)
            assert says in result.err and len(result.err.strip().splitlines()) == 1, result.err
        assert tree_snapshot(root) == before, f"{command} wrote past its bound"
    return result


# -- 1. show-config in time linear in keys ----------------------------------------------------

def test_show_config_of_twelve_thousand_keys_takes_seconds(tmp_path: Path) -> None:
    root = _node(tmp_path, _keys(3000), head=f'imports = ["/{CONF_D}/*.toml"]\n')
    for index in range(3):
        (root / CONF_D).mkdir(exist_ok=True)
        (root / CONF_D / f"{index}.toml").write_text("version = 2\n" + _keys(3000, f"t{index}"))
    result = _bounded(root, "show-config", seconds=6)
    assert result.code == 0, result.err
    assert "key_2999 = 2999" in result.out


def test_show_config_marks_a_runtime_that_holds_only_tables(tmp_path: Path) -> None:
    root = _node(tmp_path, f"\n[{RUNTIMES}.only.options]\nBinaryName = \"/x\"\n")
    result = run_measured(*COMMANDS["show-config"](root))
    assert f"[{RUNTIMES}.only] # from {root / CONFIG}" in result.out


# -- 2. keys per file ------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["show-config", "migrate", "configure", "doctor"])
def test_a_config_of_too_many_keys_is_refused_at_once(tmp_path: Path, command: str) -> None:
    root = _node(tmp_path, _keys(MAX_TOML_KEYS + 100))
    _bounded(root, command, says=f"more than {MAX_TOML_KEYS} keys and tables", seconds=5)


def test_drop_in_on_hundreds_of_tables_takes_seconds(tmp_path: Path) -> None:
    root = _node(tmp_path, _padded_runtimes(800, 0))
    result = _bounded(root, "configure-drop-in", seconds=8)
    assert result.code == 0, result.err


# -- 3. key paths ----------------------------------------------------------------------------

DEEP_PATH = ".".join(["a"] * 5000)
DEEP_INPUTS = {
    "header": f"\n[{DEEP_PATH}]\nx = 1\n",
    "dotted-key": f"\n{DEEP_PATH} = 1\n",
    "huge-dotted-key": "\n" + ".".join(["a"] * 200_000) + " = 1\n",
}


@pytest.mark.parametrize("shape", sorted(DEEP_INPUTS))
@pytest.mark.parametrize("command", ["show-config", "migrate", "configure", "configure-drop-in"])
def test_a_key_path_of_thousands_of_parts_is_refused(tmp_path: Path, shape: str,
                                                     command: str) -> None:
    root = _node(tmp_path, DEEP_INPUTS[shape])
    line = LAB_BASE.read_text().count("\n") + 2
    _bounded(root, command, seconds=5,
             says=f"config.toml:{line}: invalid TOML: a key or table header of more than "
                  f"{MAX_KEY_PARTS} parts")


def test_setup_refuses_a_base_with_a_deep_key_path(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text(f"version = 2\n[{DEEP_PATH}]\n")
    root = tmp_path / "node"
    result = run_measured("setup", "--root", str(root), "--base", str(into_root(root, base)),
                          memory_limit_mb=MEMORY_MB, timeout=30)
    assert result.code == 2, result.err
    assert f"more than {MAX_KEY_PARTS} parts" in result.err
    assert not (tmp_path / "node" / CONFIG).exists()


def test_headers_and_keys_nested_deeper_than_the_limit_together_are_refused(
        tmp_path: Path) -> None:
    half = ".".join(["a"] * 40)
    root = _node(tmp_path, f"\n[{half}]\n{half} = 1\n")
    _bounded(root, "configure", says="tables and keys nested deeper than 64 levels", seconds=5)


# -- 4. files and bytes per node -------------------------------------------------------------

@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_glob_of_thousands_of_files_is_refused(tmp_path: Path, command: str) -> None:
    root = _importing(tmp_path, 2000, 0)
    _bounded(root, command, says=f"the {MAX_NODE_FILES} files gpuready reads from one node",
             seconds=8)


def test_audit_applies_the_budget_per_node(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    for name in ("a", "b"):
        _importing(fleet / name, MAX_NODE_FILES // 2, 0)
        (fleet / name / "node").rename(fleet / f"node-{name}")
        shutil.rmtree(fleet / name)
    result = run_measured("audit", "--format", "json", str(fleet), timeout=60)
    assert "reads from one node" not in result.out + result.err, result.out
    assert len(json.loads(result.out)["nodes"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_three_hundred_imported_files_of_1_mib(tmp_path: Path, command: str) -> None:
    root = _importing(tmp_path, 300, 1024 * 1024 - 100)
    _bounded(root, command, says=f"passes the {MAX_NODE_BYTES // 1024 // 1024} MiB gpuready "
             "reads from one node")


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_1_mib_config_of_many_keys(tmp_path: Path, command: str) -> None:
    root = _node(tmp_path, _keys(59_000))
    assert (root / CONFIG).stat().st_size > 1_000_000
    _bounded(root, command, says=f"more than {MAX_TOML_KEYS} keys and tables")


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_1_mib_config_within_the_key_bound_gets_its_answer(tmp_path: Path,
                                                              command: str) -> None:
    root = _node(tmp_path, _padded_runtimes(2030, 400))
    assert (root / CONFIG).stat().st_size > 1_000_000
    result = _bounded(root, command)
    assert result.code in (0, 1), (command, result.err)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["setup", "lint-fix"])
@pytest.mark.parametrize("setting", [
    'runtime_engine = ""',  # no runtime_type
    'runtime_type = "io.containerd.runc.v2"\noptions = { SystemdCgroup = "true" }',
], ids=["runtime-type-missing", "bool-as-string"])
def test_a_fix_of_hundreds_of_runtime_tables_answers_in_time(tmp_path: Path, command: str,
                                                              setting: str) -> None:
    """Each runtime has a value that --fix and setup repair with tomlkit: past a few hundred
    tables its parse takes most of a minute, so they say what they leave instead."""
    rule = "runtime-type-missing" if "runtime_engine" in setting else "bool-as-string"
    # 900 tables of up to 4 keys stay within the key bound (tomllib parses them at once);
    # tomlkit would take about 40 s on them
    count = 900
    root = _node(tmp_path, _padded_runtimes(count, 350, setting=setting))
    before = (root / CONFIG).read_bytes()
    argv = (("lint", "--fix", "--root", str(root), str(root / CONFIG)) if command == "lint-fix"
            else COMMANDS[command](root))
    result = run_measured(*argv, memory_limit_mb=MEMORY_MB, timeout=SECONDS + 10)
    assert result.seconds < SECONDS, (command, result.seconds)
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    said = result.out + result.err
    if command == "lint-fix":
        assert "fix them by hand" in said, said[-2000:]
        assert (root / CONFIG).read_bytes() == before  # nothing certain to fix: untouched
    else:  # setup's report names what is left, in each runtime
        assert result.code == 1 and said.count(rule) >= count, said[-2000:]
