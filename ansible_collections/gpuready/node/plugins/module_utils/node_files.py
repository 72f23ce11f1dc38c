# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Writes on the node that a symbolic link cannot redirect, with the OS Python alone.

The same walk as gpuready's own writer (``gpuready/atfile.py``), for a node that has no gpuready:
the node path is resolved once, links followed as the node's reads follow them but never out of
the root; then the root is opened as named and each folder of the resolved path with
``O_NOFOLLOW | O_DIRECTORY`` from the descriptor of the one above it, and the file is read,
created, renamed and removed by name inside the last folder's descriptor (``dir_fd=``). The
resolved path holds no link, so a link met on the way was swapped in meanwhile: the write fails
(:class:`NodeFileError`, one line naming the path) and nothing goes through it.

A new file is written beside its target in the same open folder, ``fsync``\\ ed, given the old
file's mode and owner, and swapped in with ``renameat2(RENAME_EXCHANGE)``; what came out is
compared with what the controller read, and an edit made meanwhile is swapped back and kept.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import sys

BACKUP_SUFFIX = ".gpuready.bak"
MAX_LINKS = 40
# The largest file read back on the node (gpuready reads nothing bigger; see remote.py).
MAX_READ = 16 * 1024 * 1024
FOLDER_MODE = 0o755
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
RENAME_NOREPLACE = 1  # <linux/fs.h>
RENAME_EXCHANGE = 2
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)


class NodeFileError(Exception):
    """A write refused or failed; the message is one line naming the node path."""


def sha1(data):
    """The SHA-1 of ``data`` as Ansible's ``stat`` reports it (hex)."""
    return hashlib.sha1(data).hexdigest()  # nosec: a change check, as Ansible's own stat


class Target:
    """A node path under a root: where it is shown, and its resolved parts below the root."""

    def __init__(self, root, path):
        self.root = os.path.abspath(root or "/")
        if not path.startswith("/"):
            raise NodeFileError(f"{path}: not an absolute node path")
        self.shown = os.path.join(self.root, path.lstrip("/"))
        self.parts = resolve(self.root, path, self.shown)

    @property
    def folders(self):
        """The resolved folders below the root."""
        return self.parts[:-1]

    @property
    def name(self):
        """The resolved file's name in its folder."""
        return self.parts[-1]


def resolve(root, path, shown):
    """The parts below ``root`` of the file ``path`` names, every link followed as the node's
    own reads follow it (``stat``, ``slurp``); a link that leads out of the root, or ``..`` above
    it, is refused. Missing parts are kept as named."""
    root_parts = [part for part in root.split("/") if part]
    below, missing, links = [], False, 0
    pending = list(reversed(path.split("/")))
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if missing:
                raise NodeFileError(f"{shown}: no such folder")
            if not below and root_parts:
                raise NodeFileError(f"{shown}: leads out of the root {root}")
            below = below[:-1]
            continue
        candidate = os.path.join(root, *(below + [part]))
        found = None if missing else _lstat(candidate)
        if found is None or not stat.S_ISLNK(found.st_mode):
            missing = missing or found is None
            below.append(part)
            continue
        links += 1
        if links > MAX_LINKS:
            raise NodeFileError(f"{shown}: too many levels of symbolic links")
        try:
            target = os.readlink(candidate)
        except OSError:  # no link any more: swapped between the lstat and now
            raise NodeFileError(f"{shown}: changed while gpuready looked at it (a symbolic "
                                "link that went away); nothing written, run again") from None
        if target.startswith("/"):
            named = [item for item in target.split("/") if item not in ("", ".")]
            if named[:len(root_parts)] != root_parts:
                raise NodeFileError(f"{shown}: {candidate} is a symbolic link to {target}, "
                                    f"outside the root {root}; nothing written through it")
            below, target = [], "/".join(named[len(root_parts):])
        pending.extend(reversed(target.split("/")))
    if not below:
        raise NodeFileError(f"{shown}: is the root folder")
    return below


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError:
        return None


class MissingFolder(NodeFileError):
    """A folder of the path is not there."""

    def __init__(self, shown):
        super().__init__(f"{shown}: no such folder")


class LinkSwapped(NodeFileError):
    """A part of the resolved path is a link now: swapped in since it was resolved."""

    def __init__(self, shown):
        super().__init__(
            f"{shown}: is a symbolic link now (it was not when gpuready looked: swapped in while "
            "gpuready wrote?); nothing written through it, run again once it is gone")


def open_folder(target, create=False, itself=False):
    """A descriptor of the folder ``target`` lies in (``itself``: of ``target``, a folder),
    opened part by part from the root without following a link; missing folders are made when
    ``create`` (``mkdir -p``). Returns the descriptor and how many folders were made; the
    caller closes it."""
    fd = os.open(target.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # as named
    made = 0
    shown = target.root
    try:
        for part in target.parts if itself else target.folders:
            shown = os.path.join(shown, part)
            inner, new = subfolder(fd, part, shown, create=create)
            made += new
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def subfolder(fd, name, shown, create=False):
    """The folder ``name`` in the open folder, opened without following a link (made first
    when missing and ``create``): its descriptor, and 1 when it was made."""
    made = 0
    while True:
        try:
            return os.open(name, _FOLDER_FLAGS, dir_fd=fd), made
        except FileNotFoundError:
            if not create or made:
                raise MissingFolder(shown) from None
        except OSError as error:
            if is_link_at(fd, name):
                raise LinkSwapped(shown) from None
            raise NodeFileError(f"{shown}: {error.strerror or error}") from None
        try:
            os.mkdir(name, FOLDER_MODE, dir_fd=fd)
            made = 1
        except FileExistsError:
            made = 0  # made meanwhile by someone else: open it (or refuse a link) above
            create = False


def lstat_at(fd, name):
    """``lstat`` of ``name`` in the open folder; None when nothing is there."""
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def is_link_at(fd, name):
    """True when ``name`` in the open folder is a symbolic link now."""
    found = lstat_at(fd, name)
    return found is not None and stat.S_ISLNK(found.st_mode)


def read_at(fd, name, shown):
    """The bytes and ``stat`` of the regular file ``name`` in the open folder, or (None, None)
    when nothing is there; a link (swapped in) or anything but a regular file is refused."""
    try:
        handle = os.open(name, _READ_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None, None
    except OSError as error:
        if error.errno == errno.ELOOP or is_link_at(fd, name):
            raise LinkSwapped(shown) from None
        raise NodeFileError(f"{shown}: {error.strerror or error}") from None
    try:
        found = os.fstat(handle)
        if not stat.S_ISREG(found.st_mode):
            raise NodeFileError(f"{shown}: is not a regular file")
        chunks, left = [], MAX_READ + 1
        while left > 0:
            chunk = os.read(handle, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), found
    finally:
        os.close(handle)


def create_at(fd, name, data, mode, owner=None):
    """Create ``name`` (which must not exist) in the open folder holding ``data``, ``fsync``\\ ed,
    with ``mode`` and, when given, ``owner`` (uid, gid); removed again when that fails."""
    handle = os.open(name, _NEW_FLAGS, 0o600, dir_fd=fd)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            if owner is not None and owner != (os.getuid(), os.getgid()):
                os.fchown(stream.fileno(), owner[0], owner[1])
            os.fsync(stream.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
        raise


def temporary_name(name):
    """A fresh temporary name beside ``name``, the pattern gpuready's writer uses."""
    return f".{name}.{os.urandom(4).hex()}.tmp"


def renameat2(fd, source, target, flags):
    """``renameat2`` in the open folder through glibc; False where the C library or the file
    system cannot (then the caller checks and renames)."""
    function = _renameat2_function()
    if function is None:
        return False
    # the audit event gpuready's own writer raises for this call (ctypes raises none): the
    # tests' link-swap hook acts on it as on os.rename
    sys.audit("gpuready.renameat2", source, target, fd, flags)
    if function(fd, os.fsencode(source), fd, os.fsencode(target), flags) == 0:
        return True
    import ctypes

    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), target)


_FUNCTION = []


def _renameat2_function():
    if not _FUNCTION:
        try:
            import ctypes

            function = ctypes.CDLL(None, use_errno=True).renameat2
        except (ImportError, AttributeError, OSError):
            function = None
        else:
            function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                 ctypes.c_uint)
            function.restype = ctypes.c_int
        _FUNCTION.append(function)
    return _FUNCTION[0]


# -- the operations ------------------------------------------------------------------------------

def write_file(target, data, checksum=None, exclusive=False, mode=0o644, backup=False,
               check_mode=False):
    """Write ``data`` at ``target``: over the file the controller read (``checksum``, its SHA-1:
    refused when it changed since), as a new file (``exclusive``: refused when one is there),
    or over whatever is there. An existing file keeps its mode and owner; a new one gets
    ``mode``. ``backup`` keeps ``FILE.gpuready.bak`` when none exists yet. True when written."""
    fd = _folder(target)
    try:
        current, found = read_at(fd, target.name, target.shown)
        _check(target, current, checksum, exclusive)
        if current == data:
            return False
        if check_mode:
            return True
        if backup and current is not None:
            _keep_backup(fd, target, current, found)
        kept = (mode, None) if found is None else (
            stat.S_IMODE(found.st_mode), (found.st_uid, found.st_gid))
        _swap_in(fd, target, data, kept, current)
        fsync_folder(fd)
        return True
    finally:
        os.close(fd)


def make_folders(target, check_mode=False):
    """``mkdir -p`` of ``target`` (a folder) inside the root; True when one was made."""
    if check_mode:
        return _missing_folder(target)
    fd, made = open_folder(target, create=True, itself=True)
    os.close(fd)
    return made > 0


def remove(target, checksum=None, check_mode=False):
    """Remove the file at ``target`` (an empty folder: removed as well); with ``checksum``, only
    while it is the file the controller read. True when removed; nothing there: False."""
    try:
        fd, _made = open_folder(target)
    except MissingFolder:
        return False
    try:
        found = lstat_at(fd, target.name)
        if found is None:
            return False
        if stat.S_ISDIR(found.st_mode) and checksum is None:
            return _remove_folder(fd, target, check_mode=check_mode)
        current, _found = read_at(fd, target.name, target.shown)
        _check(target, current, checksum, False)
        if check_mode:
            return True
        if checksum is None:
            _unlink(fd, target.name, target.shown)
        else:
            _remove_checked(fd, target, checksum)
        fsync_folder(fd)
        return True
    finally:
        os.close(fd)


def fsync_folder(fd):
    """``fsync`` the open folder (a rename's new entry reaches the disk); best effort."""
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _folder(target):
    fd, _made = open_folder(target)
    return fd


def _missing_folder(target):
    """True when a folder of ``target`` is missing (check mode: it would be made)."""
    path = target.root
    for part in target.parts:
        path = os.path.join(path, part)
        if _lstat(path) is None:
            return True
    return False


def _check(target, current, checksum, exclusive):
    if exclusive and current is not None:
        raise NodeFileError(f"{target.shown}: appeared on the node while gpuready was "
                            "planning; nothing written, run again")
    if checksum is not None and (current is None or sha1(current) != checksum):
        raise NodeFileError(f"{target.shown}: changed on the node while gpuready was "
                            "planning; nothing written, run again")


def _keep_backup(fd, target, current, found):
    """``FILE.gpuready.bak`` with the file as it is, only when no backup exists yet: the
    backup keeps the file as it was before gpuready first changed it."""
    name = target.name + BACKUP_SUFFIX
    if lstat_at(fd, name) is not None:
        return
    temporary = temporary_name(name)
    create_at(fd, temporary, current, stat.S_IMODE(found.st_mode), (found.st_uid, found.st_gid))
    try:
        _rename_new(fd, temporary, name, f"{target.shown}{BACKUP_SUFFIX}")
    except NodeFileError:
        pass  # a backup appeared meanwhile: the first one is kept
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=fd)


def _swap_in(fd, target, data, kept, current):
    """The new file beside the target, then in its place: exchanged with the old one (which
    must still be ``current``), or renamed where nothing was."""
    mode, owner = kept
    temporary = temporary_name(target.name)
    try:
        create_at(fd, temporary, data, mode, owner)
    except OSError as error:
        raise NodeFileError(f"{target.shown}: {error.strerror or error}; nothing written") from None
    try:
        if current is None:
            _rename_new(fd, temporary, target.name, target.shown)
        else:
            _exchange_checked(fd, temporary, target, current)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=fd)


def _rename_new(fd, source, name, shown):
    """Rename ``source`` to ``name``, never over a file that appeared meanwhile."""
    try:
        if renameat2(fd, source, name, RENAME_NOREPLACE):
            return
    except FileExistsError:
        raise NodeFileError(f"{shown}: appeared on the node while gpuready wrote it; nothing "
                            "written, run again") from None
    if lstat_at(fd, name) is not None:
        raise NodeFileError(f"{shown}: appeared on the node while gpuready wrote it; nothing "
                            "written, run again")
    os.rename(source, name, src_dir_fd=fd, dst_dir_fd=fd)


def _exchange_checked(fd, temporary, target, current):
    """Swap the new file in and check that what came out is what the controller read; an
    edit made meanwhile is swapped back and kept."""
    changed = (f"{target.shown}: changed on the node while gpuready wrote it; that change is "
               "kept, nothing written, run again")
    if renameat2(fd, temporary, target.name, RENAME_EXCHANGE):
        try:
            out, _found = read_at(fd, temporary, target.shown)
        except NodeFileError:
            out = None  # a link or no file came out: swapped back below as well
        if out != current:
            renameat2(fd, temporary, target.name, RENAME_EXCHANGE)
            raise NodeFileError(changed)
        return
    # without renameat2 (or on a file system without the exchange): check, then rename
    again, _found = read_at(fd, target.name, target.shown)
    if again != current:
        raise NodeFileError(changed)
    os.rename(temporary, target.name, src_dir_fd=fd, dst_dir_fd=fd)


def _remove_checked(fd, target, checksum):
    """Take the file aside, check it is the one read, then remove it (else put it back)."""
    aside = temporary_name(target.name)
    os.rename(target.name, aside, src_dir_fd=fd, dst_dir_fd=fd)
    try:
        out, _found = read_at(fd, aside, target.shown)
    except NodeFileError:
        out = None  # a link or no file was taken aside: put back below
    if out is None or sha1(out) != checksum:
        with contextlib.suppress(NodeFileError):
            _rename_new(fd, aside, target.name, target.shown)
        raise NodeFileError(f"{target.shown}: changed on the node while gpuready was "
                            "planning; nothing removed, run again")
    _unlink(fd, aside, target.shown)


def _remove_folder(fd, target, check_mode):
    """Remove an empty folder; one that holds anything is left (False), as ``rmdir`` does."""
    try:
        inner = os.open(target.name, _FOLDER_FLAGS, dir_fd=fd)
    except OSError:
        raise LinkSwapped(target.shown) from None
    try:
        if os.listdir(inner):
            return False
    finally:
        os.close(inner)
    if check_mode:
        return True
    try:
        os.rmdir(target.name, dir_fd=fd)
    except OSError as error:
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise NodeFileError(f"{target.shown}: {error.strerror or error}") from None
    return True


def _unlink(fd, name, shown):
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise NodeFileError(f"{shown}: {error.strerror or error}") from None
