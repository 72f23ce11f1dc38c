"""The one safe writer: every file gpuready changes goes through :func:`apply_plan`.

A write takes an exclusive lock, re-reads the file to make sure nobody changed it since the plan
was computed, keeps a backup of the file as it was before gpuready first changed it, writes a
temporary file in the same folder, ``fsync``\\ s it, copies the original mode and owner onto it,
and renames it over the original (atomic on POSIX), then ``fsync``\\ s the folder. A plan that
changes nothing writes nothing, so the file keeps its bytes and its mtime.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gpuready.errors import WriteError
from gpuready.plan import Plan

BACKUP_SUFFIX = ".gpuready.bak"
NEW_FILE_MODE = 0o644


class ConcurrentChangeError(WriteError):
    """The file changed between reading it and writing it; nothing was written."""


class OwnerError(Exception):
    """The new file could not be given the original's owner."""


def backup_path(path: Path) -> Path:
    """Where the pre-change copy of ``path`` is kept (``config.toml.gpuready.bak``).

    The suffix keeps the backup out of containerd's ``imports`` globs such as ``conf.d/*.toml``.
    """
    return path.with_name(path.name + BACKUP_SUFFIX)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` while it is read, planned and written.

    The lock is taken on the file's folder (``flock`` on a directory descriptor), not on the file,
    because the file itself is replaced by a rename; and it leaves no lock file behind for
    containerd's ``imports`` globs to trip over. A concurrent gpuready waits here instead of
    overwriting this run's edit.
    """
    folder = real_path(path).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise WriteError(f"{path}: cannot take the lock: {error.strerror or error}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def apply_plan(plan: Plan) -> bool:
    """Write ``plan.after`` to ``plan.path`` safely; return False when there was nothing to do.

    The caller holds :func:`locked` for ``plan.path``. Raises :class:`ConcurrentChangeError` when
    the file on disk no longer holds ``plan.before``.
    """
    if not plan.changes:
        return False
    current = _read_or_none(plan.path)
    if current != (None if plan.before is None else plan.before.encode("utf-8")):
        raise ConcurrentChangeError(
            f"{plan.path}: changed on disk while gpuready was planning; nothing written, run again"
        )
    target = real_path(plan.path)
    if current is not None:
        _require_owner_can_be_kept(target)
        _keep_first_backup(target, current)
    write_atomic(target, plan.after.encode("utf-8"))
    return True


def real_path(path: Path) -> Path:
    """The file a path names, through any symbolic links.

    A config that is a link (into a configuration repository, say) must have its target
    edited: renaming over the link would replace it with a copy and leave the target as it was.
    """
    return Path(os.path.realpath(path))


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically, keeping an existing file's mode and owner.

    ``path`` is the real file, not a link (see :func:`real_path`).
    """
    try:
        existing = path.stat()
    except FileNotFoundError:
        existing = None
    except OSError as error:
        raise WriteError(f"{path}: {error.strerror or error}") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise WriteError(f"{path}: cannot write: {error.strerror or error}") from None
    try:
        _fill(fd, data)
        _copy_ownership(temp_name, existing, mode)
        os.replace(temp_name, path)
    except BaseException as error:  # also Ctrl-C: never leave a half-written temporary behind
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        if isinstance(error, OwnerError):
            raise WriteError(f"{path}: {error}") from None
        if isinstance(error, OSError):
            raise WriteError(f"{path}: cannot write: {error.strerror or error}") from None
        raise
    _fsync_folder(path.parent)


def _fill(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _copy_ownership(temp_name: str, existing: os.stat_result | None, mode: int | None) -> None:
    if existing is None:
        os.chmod(temp_name, NEW_FILE_MODE if mode is None else mode)
        return
    os.chmod(temp_name, existing.st_mode & 0o7777 if mode is None else mode)
    try:
        os.chown(temp_name, existing.st_uid, existing.st_gid)
    except PermissionError:
        # Only root may give a file away: rather than silently change the owner, write nothing.
        raise OwnerError(
            f"cannot keep the owner ({existing.st_uid}:{existing.st_gid}); nothing written "
            "(run as root or as the file's owner)"
        ) from None


def _require_owner_can_be_kept(path: Path) -> None:
    """Refuse before writing anything when the replacement could not keep the file's owner."""
    if os.geteuid() == 0:
        return
    status = path.stat()
    groups = {os.getegid(), *os.getgroups()}
    if status.st_uid != os.geteuid() or status.st_gid not in groups:
        raise WriteError(
            f"{path}: cannot keep the owner ({status.st_uid}:{status.st_gid}); nothing written "
            "(run as root or as the file's owner)"
        )


def _keep_first_backup(path: Path, original: bytes) -> None:
    """Save the file as it was before gpuready first changed it; later runs keep that copy."""
    backup = backup_path(path)
    if not backup.exists():
        write_atomic(backup, original, mode=path.stat().st_mode & 0o7777)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise WriteError(f"{path}: {error.strerror or error}") from None


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_planned(plan: Plan) -> bool:
    """Remove ``plan.path`` (a plan whose ``after`` is None); False when it is already gone.

    The caller holds :func:`locked`. Raises :class:`ConcurrentChangeError` when the file no
    longer holds ``plan.before``. Only gpuready's own files are removed this way (a drop-in it
    wrote, its record, a backup equal to the restored file), so no backup is kept.
    """
    current = _read_or_none(plan.path)
    if current is None:
        return False
    if plan.before is None or current != plan.before.encode("utf-8"):
        raise ConcurrentChangeError(
            f"{plan.path}: changed on disk while gpuready was planning; nothing removed, run again"
        )
    try:
        os.unlink(plan.path)
    except OSError as error:
        raise WriteError(f"{plan.path}: cannot remove: {error.strerror or error}") from None
    _fsync_folder(plan.path.parent)
    return True


def apply_own_file(plan: Plan) -> bool:
    """Write a file that is gpuready's own (its record): as :func:`apply_plan`, without a backup.

    The caller holds :func:`locked`.
    """
    if not plan.changes:
        return False
    current = _read_or_none(plan.path)
    if current != (None if plan.before is None else plan.before.encode("utf-8")):
        raise ConcurrentChangeError(
            f"{plan.path}: changed on disk while gpuready was planning; nothing written, run again"
        )
    write_atomic(real_path(plan.path), plan.after.encode("utf-8"))
    return True
