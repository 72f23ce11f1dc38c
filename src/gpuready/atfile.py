"""File operations that a symbolic link cannot redirect: everything from a folder's descriptor.

The :class:`~gpuready.node.Node` resolves a path once (links followed inside the root); by the
time gpuready writes, a folder on the way may have been swapped for a link to somewhere else. So
the writer never hands the kernel a path string below the root: it opens the root (the folder
the user named, taken as named) and then each part of the resolved path with ``O_NOFOLLOW |
O_DIRECTORY`` from the descriptor of the folder above it, and reads, creates, renames and removes
by name inside the last descriptor (the ``*at`` calls: ``dir_fd=``). The resolved path holds no
link, so a link met on the way was swapped in meanwhile: :class:`LinkSwappedError`, and nothing
is written through it.

:func:`exchange` swaps a new file in with ``renameat2(RENAME_EXCHANGE)`` and hands back what came
out, so the writer can check it is the file it read and swap back if it is not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from gpuready.errors import WriteError
from gpuready.node import Node

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
RENAME_NOREPLACE = 1  # <linux/fs.h>
RENAME_EXCHANGE = 2


class LinkSwappedError(WriteError):
    """A part of a path gpuready writes is a symbolic link now, though it was none when the path
    was resolved: nothing is written, created or removed through it."""

    def __init__(self, shown: Path | str) -> None:
        super().__init__(f"{shown}: is a symbolic link now (it was not when gpuready looked: "
                         "swapped in while gpuready wrote?); nothing written through it, run "
                         "again once it is gone")


def temporary_name(name: str) -> str:
    """A fresh temporary name beside ``name``: ``.config.toml.1a2b3c4d.tmp`` (the next run's
    :func:`gpuready.fsio.remove_stale_temporaries` knows the pattern)."""
    return f".{name}.{os.urandom(4).hex()}.tmp"


def open_folder(folder: Path | str, *, node: Node) -> int:
    """A descriptor of the resolved host folder ``folder``, opened part by part from the root
    (or from ``/`` for a folder named outside it) without following any link.

    Raises :class:`LinkSwappedError` for a link on the way, ``FileNotFoundError`` (and other
    ``OSError``) as ``open`` does; the caller closes the descriptor.
    """
    base, below = node.anchor(folder)
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the root, as named
    shown = base
    try:
        for part in below.parts:
            shown = os.path.join(shown, part)
            inner = subfolder(fd, part, shown)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def folder(path: Path | str, *, node: Node) -> Iterator[int]:
    """:func:`open_folder` as a ``with``: the descriptor is closed after."""
    fd = open_folder(path, node=node)
    try:
        yield fd
    finally:
        os.close(fd)


def subfolder(folder_fd: int, name: str, shown: Path | str) -> int:
    """A descriptor of the folder ``name`` inside the open folder, the link not followed
    (:class:`LinkSwappedError`); the caller closes it."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=folder_fd)
    except OSError:
        if is_link_at(folder_fd, name):
            raise LinkSwappedError(shown) from None
        raise


def is_link_at(folder_fd: int, name: str) -> bool:
    """True when ``name`` in the open folder is a symbolic link now."""
    found = lstat_at(folder_fd, name)
    return found is not None and stat.S_ISLNK(found.st_mode)


def lstat_at(folder_fd: int, name: str) -> os.stat_result | None:
    """``lstat`` of ``name`` in the open folder; None when nothing is there."""
    try:
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_at(folder_fd: int, name: str, shown: Path | str, *, limit: int) -> bytes | None:
    """The bytes of the regular file ``name`` in the open folder (at most ``limit`` + 1 of them),
    or None when nothing is there. A link is :class:`LinkSwappedError`; anything else that is not
    a regular file (a FIFO is never waited on) is ``OSError``."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP or is_link_at(folder_fd, name):
            raise LinkSwappedError(shown) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def create_at(folder_fd: int, name: str, data: bytes, *, mode: int,
              owner: tuple[int, int] | None = None) -> None:
    """Create ``name`` (which must not exist) in the open folder holding ``data``, ``fsync``\\ ed,
    with ``mode`` and, when given, ``owner`` (uid, gid); removed again when that fails."""
    fd = os.open(name, _NEW_FLAGS, 0o600, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if owner is not None:
                os.fchown(handle.fileno(), *owner)
            os.fsync(handle.fileno())
    except BaseException:  # also Ctrl-C: never leave a half-written file behind
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder_fd)
        raise


def rename_at(folder_fd: int, source: str, target: str, *, replace: bool) -> None:
    """Rename ``source`` to ``target`` in the open folder. ``replace`` False: fail with
    ``FileExistsError`` rather than replace something that appeared at ``target``."""
    if replace or not _renameat2(folder_fd, source, target, RENAME_NOREPLACE):
        if not replace and lstat_at(folder_fd, target) is not None:
            raise FileExistsError(errno.EEXIST, "exists", target)
        # without renameat2 (not glibc, or a file system without RENAME_NOREPLACE), the check
        # above and the rename below leave a window in which a file that appears is replaced
        os.rename(source, target, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)


def exchange(folder_fd: int, source: str, target: str) -> bool:
    """Swap ``source`` and ``target`` in the open folder in one step (``renameat2`` with
    ``RENAME_EXCHANGE``); False, and nothing done, where the C library or the file system
    cannot. ``FileNotFoundError`` when either is gone."""
    return _renameat2(folder_fd, source, target, RENAME_EXCHANGE)


def wait_until_unwritten(folder_fd: int, name: str, *, seconds: float) -> bool | None:
    """Wait until no process holds ``name`` in the open folder open for writing: True once
    none does, False when one still does after ``seconds``, None when the kernel cannot say.

    Asked with a read lease (``fcntl(F_SETLEASE, F_RDLCK)``), which Linux grants only while the
    file is open for writing nowhere (fcntl(2)); granted, it is given up at once. Readers do not
    count. Root (``CAP_LEASE``) or the file's owner may ask; another user, a file system without
    leases, or ``fs.leases-enable = 0`` gives None.
    """
    import fcntl
    import time

    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder_fd)
    except OSError:
        return None
    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
            except BlockingIOError:  # EAGAIN: open for writing somewhere
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.002)
                continue
            except OSError:
                return None
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            return True
    finally:
        os.close(fd)


def fsync_folder(folder_fd: int) -> None:
    """``fsync`` the open folder (a rename's new entry reaches the disk); best effort."""
    with contextlib.suppress(OSError):
        os.fsync(folder_fd)


def remove_tree_at(folder_fd: int, name: str) -> None:
    """Remove the folder ``name`` in the open folder with everything in it, never following a
    link (a link in it is removed, not its target); best effort."""
    try:
        fd = os.open(name, _FOLDER_FLAGS, dir_fd=folder_fd)
    except OSError:
        return
    try:
        for entry in os.listdir(fd):
            found = lstat_at(fd, entry)
            if found is not None and stat.S_ISDIR(found.st_mode):
                remove_tree_at(fd, entry)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=folder_fd)


_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)


def _renameat2(folder_fd: int, source: str, target: str, flags: int) -> bool:
    """``renameat2`` through glibc (2.28 and later); False where it is missing or the file
    system refuses ``flags`` (NFS, some FUSE file systems), so the caller falls back."""
    function = _renameat2_function()
    if function is None:
        return False
    # the audit event CPython raises for os.rename, for this rename made through ctypes (which
    # raises none): the tests' kill and link-swap hooks act on every rename the writer makes
    sys.audit("gpuready.renameat2", source, target, folder_fd, flags)
    result = function(folder_fd, os.fsencode(source), folder_fd, os.fsencode(target), flags)
    if result == 0:
        return True
    import ctypes

    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), target)


_FUNCTION: list = []  # [renameat2 or None], looked up once


def _renameat2_function():
    if not _FUNCTION:
        try:
            # imported only when a file is written: a read-only command starts without it
            import ctypes

            function = ctypes.CDLL(None, use_errno=True).renameat2
        except (ImportError, AttributeError, OSError):  # a Python without ctypes, not glibc
            function = None
        else:
            function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                 ctypes.c_uint)
            function.restype = ctypes.c_int
        _FUNCTION.append(function)
    return _FUNCTION[0]
