"""The Node view: paths resolved as a chroot would, regular files only, reads bounded.

Every command resolves node paths through one :class:`gpuready.node.Node`; these tests check the
object itself and, through the real command line, that a tree under ``--root`` whose links point
at absolute host paths is read and written inside the root, never outside it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from tests.helpers import LAB_BASE, run_cli, stage_fixture


def test_absolute_link_targets_start_again_at_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "srv").mkdir(parents=True)
    (root / "srv" / "x.toml").write_text("inside\n")
    (root / "etc").mkdir()
    (root / "etc" / "config.toml").symlink_to("/srv/x.toml")
    node = Node(root)
    assert node.resolve(node.path("/etc/config.toml")) == root / "srv" / "x.toml"
    assert node.read_text(node.path("/etc/config.toml"), kind=FileKind.CONFIG) == "inside\n"


def test_dot_dot_stops_at_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "up").symlink_to("../../../../../x")
    node = Node(root)
    assert node.resolve(node.path("/etc/up")) == root / "x"
    assert node.path("/etc/../../../y") == root / "y"


def test_a_link_loop_is_refused_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("/b")
    (tmp_path / "b").symlink_to("/a")
    with pytest.raises(InputError, match="too many levels of symbolic links"):
        Node(tmp_path).resolve(tmp_path / "a")


def test_a_fifo_is_refused_at_once_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    reader = threading.Thread(
        target=lambda: outcome.append(_raised(Node(tmp_path), fifo)), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert "is a FIFO (named pipe), not a regular file" in str(outcome[0])


def _raised(node: Node, path: Path) -> BaseException:
    try:
        node.read_text(path, kind=FileKind.CONFIG)
    except InputError as error:
        return error
    raise AssertionError("a FIFO was read")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused(device: str) -> None:
    with pytest.raises(InputError, match="is a character device, not a regular file"):
        Node("/").read_bytes(device, kind=FileKind.CONFIG)


def test_a_link_to_a_device_inside_the_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    os.symlink("/dev/zero", tmp_path / "config.toml")  # re-rooted: <root>/dev/zero is missing
    with pytest.raises(InputError, match="no such file"):
        Node(tmp_path).read_bytes(tmp_path / "config.toml", kind=FileKind.CONFIG)


def test_a_file_over_its_kinds_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "nvidia.yaml"
    big.write_bytes(b"#" * (FileKind.CDI_SPEC.limit + 1))
    with pytest.raises(InputError, match="larger than the 512 KiB gpuready reads for a CDI spec"):
        Node(tmp_path).read_bytes(big, kind=FileKind.CDI_SPEC)
    assert len(Node(tmp_path).read_bytes(big, kind=FileKind.CONFIG)) == big.stat().st_size


def test_a_proc_file_of_unknown_size_is_read_up_to_the_limit() -> None:
    # /proc files report st_size 0: the bound must come from the read itself.
    assert Node("/").read_text("/proc/self/status", kind=FileKind.NODE_FACT).startswith("Name:")


def test_glob_follows_links_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.toml").write_text("")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "conf.d").symlink_to("/real")
    node = Node(tmp_path)
    assert node.glob(node.path("/etc/conf.d/*.toml")) == [tmp_path / "etc/conf.d/a.toml"]


def test_setup_edits_the_rerooted_target_of_an_absolute_link_and_nothing_outside(
    tmp_path: Path,
) -> None:
    """A config linked to an absolute path is the node's file at that path, under the root."""
    outside = tmp_path / "host-srv"
    outside.mkdir()
    host_file = outside / "x.toml"
    host_file.write_bytes(LAB_BASE.read_bytes())
    root = tmp_path / "root"
    stage_fixture(root)
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/containerd/config.toml").symlink_to(host_file)  # absolute host path
    result = run_cli("setup", "--root", str(root), "--gpus", "1")
    assert result.code == 0, result.out + result.err
    assert host_file.read_bytes() == LAB_BASE.read_bytes()
    assert sorted(p.name for p in outside.iterdir()) == ["x.toml"]  # no backup written there
    inside = root / str(host_file).lstrip("/")
    assert "nvidia-container-runtime" in inside.read_text()
    assert (root / "etc/containerd/config.toml").is_symlink()


def test_a_dangling_absolute_link_creates_its_file_under_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    root = tmp_path / "root"
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/containerd/config.toml").symlink_to(outside / "new.toml")
    stage_fixture(root)
    result = run_cli("setup", "--root", str(root), "--gpus", "1")
    assert result.code == 0, result.out + result.err
    assert not outside.exists()
    assert (root / str(outside).lstrip("/") / "new.toml").is_file()


def test_setup_with_a_file_as_root_is_refused_in_one_line(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    result = run_cli("setup", "--root", str(not_a_folder))
    assert result.code == 2
    assert result.err.strip() == f"gpuready: error: {not_a_folder}: --root is not a folder"
    assert not_a_folder.read_text() == "x"


def test_a_link_made_during_a_read_only_pass_is_followed_by_the_writer(tmp_path: Path) -> None:
    """What a read-only pass remembers never steers a write: a folder swapped for a link to
    another place meanwhile is followed (inside the root) by the writer, and by the next pass."""
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    (tmp_path / "srv").mkdir()
    node = Node(tmp_path)
    config = node.path("/etc/containerd/config.toml")
    with node.reading():
        assert node.resolve(config) == tmp_path / "etc/containerd/config.toml"
        assert not node.exists(config)
        (tmp_path / "etc" / "containerd").rmdir()
        (tmp_path / "etc" / "containerd").symlink_to("/srv")
        (tmp_path / "srv" / "config.toml").write_text("")
        assert node.writable(config) == tmp_path / "srv" / "config.toml"
        assert not node.exists(config)  # the pass sees the node as it first looked at it
    assert node.resolve(config) == tmp_path / "srv" / "config.toml"
    assert node.is_file(config)


def test_a_missing_folder_hides_everything_below_it_but_dot_dot_climbs_out(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "x.toml").write_text("")
    (tmp_path / "etc" / "up").symlink_to("gone/../x.toml")  # through a missing folder and back
    node = Node(tmp_path)
    with node.reading():
        for _ in range(2):  # looked up, then remembered
            assert node.resolve(tmp_path / "etc/up") == tmp_path / "etc" / "x.toml"
            assert node.is_file(tmp_path / "etc/up")
            assert not node.lexists(tmp_path / "etc/gone/deeper/x.toml")


@pytest.mark.parametrize("node_path", ["/etc/containerd/config.toml", "/", "/../x", "//a/./b/",
                                       "relative/x"])
def test_path_text_is_the_host_path_as_text(tmp_path: Path, node_path: str) -> None:
    node = Node(tmp_path)
    assert node.path_text(node_path) == str(node.path(node_path))
    assert Node("/").path_text(node_path) == str(Node("/").path(node_path))
