"""The node gpuready works on: one object that owns ``--root`` and every path below it.

Readers and writers never join a root onto a path by hand: they ask a :class:`Node`. It resolves
paths the way a ``chroot`` would -- an absolute symbolic link target starts again at the root,
``..`` stops at the root -- so a tree copied from a node (or a host mounted at ``/host``) is read
and written as the node sees it, and nothing outside the root is ever followed, read or created.
Reads take regular files only (never a device, a FIFO or a socket) and at most a size limit that
depends on what the file is; sockets are only checked for existence.

Paths handed in and out are *host paths*: the root joined with the node path
(:meth:`Node.path`), which is also what messages show. A host path outside the root (a file named
on the command line) is the user's own and is taken as the operating system resolves it.
"""

from __future__ import annotations

import enum
import fnmatch
import os
import posixpath
import stat
from pathlib import Path, PurePosixPath

from gpuready.errors import InputError
from gpuready.textfile import decode

MAX_LINKS = 40  # as Linux's ELOOP limit for one path lookup
_MIB = 1024 * 1024


class FileKind(enum.Enum):
    """What a file is, and how large gpuready lets it be (bytes).

    The limits are far above anything real (a containerd config is a few KiB, a CDI spec for a
    node with many MIG devices a few hundred KiB) and low enough that parsing the largest file
    allowed takes well under a second and little memory.
    """

    CONFIG = ("containerd config", 1 * _MIB)
    CDI_SPEC = ("CDI spec", 4 * _MIB)
    MANIFEST = ("Kubernetes manifest", 1 * _MIB)
    INVENTORY = ("inventory", 1 * _MIB)
    TOOLKIT = ("toolkit file", 1 * _MIB)
    NODE_FACT = ("node fact file", 64 * 1024)
    DOCKER_CONFIG = ("Docker daemon.json", 1 * _MIB)
    CRIO_CONFIG = ("CRI-O config", 1 * _MIB)

    def __init__(self, label: str, limit: int) -> None:
        self.label = label
        self.limit = limit


class Node:
    """The file system of one node, seen from ``root`` (``/`` for the machine gpuready runs on)."""

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(os.path.abspath(root))

    def __repr__(self) -> str:
        return f"Node({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @property
    def is_host(self) -> bool:
        """True when the root is ``/``: node paths are the machine's own paths."""
        return self.root == Path("/")

    def path(self, node_path: PurePosixPath | str) -> Path:
        """The host path of an absolute node path (``/etc/cdi`` → ``<root>/etc/cdi``).

        Not yet resolved: what messages show. ``..`` stops at the root (``/../x`` is ``/x``). A
        relative path is the user's own and is returned as given.
        """
        node = PurePosixPath(node_path)
        if not node.is_absolute():
            return Path(node)
        return self.root.joinpath(*PurePosixPath(posixpath.normpath(node)).parts[1:])

    def check_root(self) -> None:
        """Refuse a root that exists but is not a folder (a file given as ``--root``)."""
        if self.root.exists() and not self.root.is_dir():
            raise InputError(self.root, "--root is not a folder")

    def contains(self, host_path: Path | str) -> bool:
        """True when ``host_path`` lies below the root (lexically, before links are followed)."""
        absolute = Path(os.path.abspath(host_path))
        return self.is_host or absolute == self.root or self.root in absolute.parents

    def resolve(self, host_path: Path | str) -> Path:
        """The host path of the file ``host_path`` names, every link followed inside the root.

        Missing parts are kept as named (the file may be about to be created). A host path
        outside the root is resolved as the operating system would (it is the user's own).
        """
        absolute = Path(os.path.abspath(host_path))
        if not self.contains(absolute):
            return Path(os.path.realpath(absolute))
        relative = absolute.relative_to(self.root)
        return self.root.joinpath(*self._walk(list(relative.parts), absolute))

    def writable(self, host_path: Path | str) -> Path:
        """The resolved path to write ``host_path`` at (links followed inside the root).

        A file named outside the root is written where it was named: the root confines node
        paths and the links met on the way, not the files a user names explicitly.
        """
        return self.resolve(host_path)

    def _walk(self, parts: list[str], shown: Path) -> list[str]:
        # chroot semantics: an absolute link target restarts at the root, ".." stops there.
        resolved: list[str] = []
        pending = list(reversed(parts))
        links = 0
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = self.root.joinpath(*resolved, part)
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except OSError:
                is_link = False  # missing (or below a file): nothing more to follow
            if not is_link:
                resolved.append(part)
                continue
            links += 1
            if links > MAX_LINKS:
                raise InputError(shown, "too many levels of symbolic links")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            pending.extend(reversed(target.split("/")))
        return resolved

    # -- facts: existence and kinds (never raise for a missing path) --------------------------

    def lstat(self, host_path: Path | str) -> os.stat_result | None:
        """``lstat`` of the resolved path, or None when it does not exist or cannot be looked at."""
        try:
            return os.lstat(self.resolve(host_path))
        except (OSError, InputError):
            return None

    def _unfollowed(self, host_path: Path | str) -> os.stat_result | None:
        """``lstat`` of the path itself: its folder resolved, its last part not followed."""
        absolute = Path(os.path.abspath(host_path))
        try:
            parent = self.resolve(absolute.parent) if self.contains(absolute) else absolute.parent
            return os.lstat(parent / absolute.name)
        except (OSError, InputError):
            return None

    def lexists(self, host_path: Path | str) -> bool:
        """True when the path names anything, a dangling link included."""
        return self._unfollowed(host_path) is not None

    def is_link(self, host_path: Path | str) -> bool:
        """True when the path's last part is a symbolic link."""
        found = self._unfollowed(host_path)
        return found is not None and stat.S_ISLNK(found.st_mode)

    def exists(self, host_path: Path | str) -> bool:
        """True when the path names anything (a dangling link inside the root does not)."""
        return self.lstat(host_path) is not None

    def is_file(self, host_path: Path | str) -> bool:
        """True for a regular file (links followed inside the root)."""
        found = self.lstat(host_path)
        return found is not None and stat.S_ISREG(found.st_mode)

    def is_dir(self, host_path: Path | str) -> bool:
        """True for a folder (links followed inside the root)."""
        found = self.lstat(host_path)
        return found is not None and stat.S_ISDIR(found.st_mode)

    def is_socket(self, host_path: Path | str) -> bool:
        """True for a Unix socket: it is only checked, never opened."""
        found = self.lstat(host_path)
        return found is not None and stat.S_ISSOCK(found.st_mode)

    def is_executable(self, host_path: Path | str) -> bool:
        """True for a regular file with an execute bit gpuready's user may use."""
        return self.is_file(host_path) and os.access(self.resolve(host_path), os.X_OK)

    def listdir(self, host_path: Path | str) -> list[str]:
        """The names in a folder, sorted; raises ``OSError`` as ``os.listdir`` does."""
        return sorted(os.listdir(self.resolve(host_path)))

    def readlink_name(self, host_path: Path | str) -> str | None:
        """The last part of a link's target (the link is read, not followed); None if no link."""
        absolute = Path(os.path.abspath(host_path))
        parent = self.resolve(absolute.parent) if self.contains(absolute) else absolute.parent
        try:
            return PurePosixPath(os.readlink(parent / absolute.name)).name
        except OSError:
            return None

    def glob(self, pattern: Path | str) -> list[Path]:
        """Host paths matching a glob (``*``, ``?``, ``[...]`` in any part), sorted.

        Matched part by part through :meth:`listdir`, so links are followed inside the root.
        """
        absolute = Path(os.path.abspath(pattern))
        found = [Path(absolute.anchor)]
        for part in absolute.parts[1:]:
            if not any(char in part for char in "*?["):
                found = [base / part for base in found]
                continue
            matched = []
            for base in found:
                try:
                    names = self.listdir(base)
                except (OSError, InputError):
                    continue
                matched += [base / name for name in fnmatch.filter(names, part)
                            if not name.startswith(".") or part.startswith(".")]
            found = matched
        return sorted(path for path in found if self.exists(path))

    # -- reads ----------------------------------------------------------------------------------

    def read_bytes(self, host_path: Path | str, *, kind: FileKind) -> bytes:
        """The bytes of a regular file no larger than ``kind``'s limit; else :class:`InputError`.

        A FIFO, device or socket is refused before it is opened; the descriptor is checked again
        after opening (``O_NOFOLLOW``, ``O_NONBLOCK``: a file swapped for a link or a FIFO meanwhile
        neither escapes nor blocks), and at most limit + 1 bytes are ever read.
        """
        real = self.resolve(host_path)
        try:
            before = os.lstat(real)
        except FileNotFoundError:
            raise InputError(host_path, "no such file") from None
        except OSError as error:
            raise InputError(host_path, _reason(error)) from None
        _require_regular(before, host_path)
        _require_size(before.st_size, kind, host_path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            raise InputError(host_path, _reason(error)) from None
        try:
            _require_regular(os.fstat(fd), host_path)
            data = _read_at_most(fd, kind.limit + 1)
        except OSError as error:
            raise InputError(host_path, _reason(error)) from None
        finally:
            os.close(fd)
        _require_size(len(data), kind, host_path)
        return data

    def read_text(self, host_path: Path | str, *, kind: FileKind) -> str:
        """The file's UTF-8 text (see :meth:`read_bytes`; binary or non-UTF-8 text is refused)."""
        return decode(self.read_bytes(host_path, kind=kind), host_path)

    def read_text_or_none(self, host_path: Path | str, *, kind: FileKind) -> str | None:
        """The file's text, or None when nothing exists at the path."""
        if not self.exists(host_path):
            return None
        return self.read_text(host_path, kind=kind)


HOST = Node("/")


def _read_at_most(fd: int, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, min(remaining, _MIB))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


_KIND_NAMES = (
    (stat.S_ISDIR, "is a directory, not a file"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


def _require_regular(found: os.stat_result, shown: Path | str) -> None:
    if stat.S_ISREG(found.st_mode):
        return
    for test, reason in _KIND_NAMES:
        if test(found.st_mode):
            raise InputError(shown, reason)
    raise InputError(shown, "not a regular file")


def _require_size(size: int, kind: FileKind, shown: Path | str) -> None:
    if size > kind.limit:
        raise InputError(shown, f"larger than the {kind.limit // 1024} KiB gpuready reads for a "
                         f"{kind.label}; refused")


def _reason(error: OSError) -> str:
    if isinstance(error, PermissionError):
        return "permission denied"
    if isinstance(error, IsADirectoryError):
        return "is a directory, not a file"
    return error.strerror or str(error)
