"""Nothing outside ``--root``: imports that climb out of the root, and records that name files
outside it (or are not records gpuready wrote), never make gpuready read or write there."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from gpuready.containerd.effective import staged
from gpuready.containerd.record import load_record
from gpuready.errors import InputError
from gpuready.node import Node
from tests.helpers import LAB_BASE, run_cli

CONFIG = "etc/containerd/config.toml"
RECORD = CONFIG + ".gpuready.json"
HOST_TEXT = """\
version = 2
# a file of the machine running gpuready
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "hostfile"
"""


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


def _outside(tmp_path: Path) -> Path:
    """A host file outside the node's root, with a marker."""
    path = tmp_path / "host" / "srv" / "host.toml"
    path.parent.mkdir(parents=True)
    path.write_text(HOST_TEXT)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def _unchanged(path: Path) -> None:
    assert path.read_text() == HOST_TEXT
    assert path.stat().st_mtime == 1_000_000_000
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def _escaping_node(tmp_path: Path, outside: Path, *, glob: bool = False) -> Path:
    """A node whose config imports ``outside`` through a relative entry that climbs out."""
    root = tmp_path / "node"
    config = root / CONFIG
    config.parent.mkdir(parents=True)
    target = str(outside).lstrip("/")
    if glob:
        target = target[:-len(".toml")] + "*.toml"
    entry = "../" * 40 + target
    config.write_text(f'version = 2\nimports = ["{entry}"]\n\n'
                      '[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                      '  default_runtime_name = "runc"\n')
    return root


@pytest.mark.parametrize("glob", [False, True], ids=["path", "glob"])
@pytest.mark.parametrize("command", [
    ("migrate", "--to", "3"),
    ("show-config",),
    ("configure", "--drop-in", "--containerd-version", "1.7"),
    ("doctor", "--containerd-version", "1.7"),
], ids=lambda command: command[0] + ("-drop-in" if "--drop-in" in command else ""))
def test_a_relative_import_never_leaves_the_root(
    tmp_path: Path, command: tuple[str, ...], glob: bool
) -> None:
    outside = _outside(tmp_path)
    root = _escaping_node(tmp_path, outside, glob=glob)
    result = run_cli(*command, "--root", str(root))
    assert result.code in (0, 1), result.out + result.err
    assert "hostfile" not in result.out + result.err
    assert "# a file of the machine" not in "".join(
        text.decode() for text in _files(root).values())
    _unchanged(outside)


def test_a_relative_import_resolves_inside_the_root(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    root = _escaping_node(tmp_path, outside)
    inside = root / str(outside).lstrip("/")
    inside.parent.mkdir(parents=True)
    inside.write_text(HOST_TEXT.replace("hostfile", "nodefile"))
    result = run_cli("show-config", "--root", str(root))
    assert result.code == 0, result.err
    assert "nodefile" in result.out and "hostfile" not in result.out
    _unchanged(outside)


def test_a_staged_copy_imports_only_copies(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    root = _escaping_node(tmp_path, outside)
    main = root / CONFIG
    with staged(main, root=root, candidates={main: main.read_text()}) as stage:
        text = stage.path(main).read_text()
        [entry] = [line for line in text.splitlines() if line.startswith("imports")]
        named = Path(os.path.abspath(json.loads(entry.split("=", 1)[1])[0]))
        assert named.is_relative_to(stage.folder), named


# -- records ----------------------------------------------------------------------------------


def _configured(tmp_path: Path, name: str = "node") -> Path:
    root = tmp_path / name
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    result = run_cli("configure", "--root", str(root))
    assert result.code == 0, result.out + result.err
    return root


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_new_records_name_node_paths(tmp_path: Path) -> None:
    root = _configured(tmp_path)
    record = json.loads((root / RECORD).read_text())
    assert record["config"] == f"/{CONFIG}"
    assert list(record["files"]) == [f"/{CONFIG}"]
    assert {setting["file"] for setting in record["settings"]} == {f"/{CONFIG}"}


def test_a_copied_node_is_undone_in_place(tmp_path: Path) -> None:
    first = _configured(tmp_path, "r1")
    second = tmp_path / "r2"
    shutil.copytree(first, second, symlinks=True)
    before = _files(first)
    result = run_cli("unconfigure", "--root", str(second))
    assert result.code == 0, result.out + result.err
    assert _files(first) == before
    assert (second / CONFIG).read_bytes() == LAB_BASE.read_bytes()
    assert sorted(_files(second)) == [CONFIG]


def test_a_record_naming_a_file_outside_the_root_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    root = _configured(tmp_path)
    record = json.loads((root / RECORD).read_text())
    for name in (str(outside), "/" + os.path.relpath(outside, root)):
        record["files"][name] = {"original": None, "written": _sha(outside.read_bytes())}
    (root / RECORD).write_text(json.dumps(record))
    before = _files(root)
    result = run_cli("unconfigure", "--root", str(root))
    assert result.code == 2, result.out + result.err
    assert "gpuready record refused" in result.err and len(result.err.splitlines()) == 1
    _unchanged(outside)
    assert _files(root) == before


def test_an_old_record_naming_a_host_path_outside_the_root_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    root = tmp_path / "node"
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    (root / RECORD).write_text(json.dumps({
        "format": 1, "config": str(root / CONFIG), "settings": [],
        "files": {str(outside): {"original": None, "written": _sha(outside.read_bytes())}},
    }))
    result = run_cli("unconfigure", "--root", str(root))
    assert result.code == 2, result.out + result.err
    assert "outside --root" in result.err
    _unchanged(outside)


@pytest.mark.parametrize("spoil", [
    lambda r: r.update(settings="runtime"),
    lambda r: r.update(files=[]),
    lambda r: r["files"].update({"etc/containerd/config.toml": r["files"].pop(f"/{CONFIG}")}),
    lambda r: r["files"].update({f"/{CONFIG}/../../x.toml": {"original": None, "written": None}}),
    lambda r: r["files"].update({f"/{CONFIG}.gpuready.bak": {"original": None,
                                                             "written": None}}),
    lambda r: r["files"][f"/{CONFIG}"].update(written=1),
    lambda r: r["files"][f"/{CONFIG}"].update(original="not a hash"),
    lambda r: r["settings"].append({"file": "/etc/other.toml", "kind": "runtime",
                                    "name": "x", "previous": None}),
    lambda r: r["settings"].append({"file": f"/{CONFIG}", "kind": "chmod"}),
    lambda r: r["settings"][0].update(name=["nvidia"]),
    lambda r: r.update(config="/etc/other/config.toml"),
], ids=["string-settings", "list-files", "relative-path", "dot-dot", "backup", "written-int",
        "original-text", "setting-file-unknown", "setting-kind-unknown", "runtime-name-list",
        "other-config"])
def test_a_malformed_record_is_refused_and_nothing_touched(tmp_path: Path, spoil) -> None:
    root = _configured(tmp_path)
    record = json.loads((root / RECORD).read_text())
    spoil(record)
    (root / RECORD).write_text(json.dumps(record))
    before = _files(root)
    result = run_cli("unconfigure", "--root", str(root))
    assert result.code == 2, result.out + result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "internal error" not in result.err
    assert _files(root) == before


def test_an_old_record_inside_the_root_still_loads(tmp_path: Path) -> None:
    root = _configured(tmp_path)
    record = json.loads((root / RECORD).read_text())
    host = {f"/{CONFIG}": str(root / CONFIG)}
    old = {**record, "format": 1, "config": str(root / CONFIG),
           "files": {host[name]: entry for name, entry in record["files"].items()},
           "settings": [{**s, "file": host[s["file"]]} for s in record["settings"]]}
    (root / RECORD).write_text(json.dumps(old))
    loaded = load_record(root / CONFIG, node=Node(root))
    assert list(loaded["files"]) == [str(root / CONFIG)]
    result = run_cli("unconfigure", "--root", str(root))
    assert result.code == 0, result.out + result.err
    assert sorted(_files(root)) == [CONFIG]
    assert (root / CONFIG).read_bytes() == LAB_BASE.read_bytes()


def test_load_record_names_the_reason(tmp_path: Path) -> None:
    root = _configured(tmp_path)
    record = json.loads((root / RECORD).read_text())
    record["settings"] = "runtime"
    (root / RECORD).write_text(json.dumps(record))
    with pytest.raises(InputError, match="'settings' is not a list"):
        load_record(root / CONFIG, node=Node(root))
