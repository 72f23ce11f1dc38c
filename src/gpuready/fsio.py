"""The one safe writer: every file gpuready changes goes through :func:`apply_plan`.

A write takes an exclusive lock, re-reads the file to make sure nobody changed it since the plan
was computed, keeps a backup of the file as it was before gpuready first changed it, writes a
temporary file in the same folder, ``fsync``\\ s it, copies the original mode and owner onto it,
and renames it over the original (atomic on POSIX), then ``fsync``\\ s the folder. A plan that
changes nothing writes nothing, so the file keeps its bytes and its mtime.

Every path is resolved by the :class:`~gpuready.node.Node`: a linked file is written at its target
inside the root, and nothing is ever created outside it. Folders are created only when a file is
really written (a dry run or a refused command creates none), and appear together with their
first file (:func:`write_with_new_folders`); temporary files and folders a killed run left next to
the file are removed by the next write.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from gpuready.errors import WriteError
from gpuready.node import Node
from gpuready.paths import BACKUP_SUFFIX
from gpuready.plan import Plan

NEW_FILE_MODE = 0o644


class ConcurrentChangeError(WriteError):
    """The file changed between reading it and writing it; nothing was written."""


class OwnerError(Exception):
    """The new file could not be given the original's owner."""


def backup_path(path: Path) -> Path:
    """Where the pre-change copy of ``path`` is kept (``config.toml.gpuready.bak``).

    The suffix keeps the backup out of containerd's ``imports`` globs such as ``conf.d/*.toml``;
    a file in a folder CRI-O reads whole has its backup in the folder above
    (:func:`gpuready.paths.kept_beside`).
    """
    from gpuready.paths import kept_beside

    return kept_beside(path, BACKUP_SUFFIX)


@contextlib.contextmanager
def locked(path: Path, *, node: Node) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` while it is read, planned and written.

    The lock is taken on the file's folder (``flock`` on a directory descriptor), not on the file,
    because the file itself is replaced by a rename; and it leaves no lock file behind for
    containerd's ``imports`` globs to trip over. A concurrent gpuready waits here instead of
    overwriting this run's edit, saying whom it waits for, and gives up after
    :func:`lock_wait_seconds` (:class:`LockTimeoutError`). While the folder does not exist yet,
    the nearest folder above it is locked instead (nothing is created to take a lock), and
    :func:`apply_plan` locks the folder too once it exists. A folder this process already holds
    is not locked again (the outer holder keeps it).
    """
    target = node.writable(path)
    folder = _nearest_folder(target.parent)
    fd = None
    if folder not in _HELD:
        folder, fd = _acquire(target, path)
    _HELD[folder] = _HELD.get(folder, 0) + 1
    try:
        yield
    finally:
        _HELD[folder] -= 1
        if not _HELD[folder]:
            del _HELD[folder]
        if fd is not None:
            os.close(fd)


def _acquire(target: Path, shown: Path) -> tuple[Path, int]:
    """Lock the nearest existing folder of ``target``; again when it appeared meanwhile."""
    while True:
        folder = _nearest_folder(target.parent)
        fd = _lock(folder, shown)
        if _nearest_folder(target.parent) == folder:
            return folder, fd
        os.close(fd)  # the folder appeared meanwhile: lock the folder itself


def _nearest_folder(folder: Path) -> Path:
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent
    return folder


def _lock(folder: Path, shown: Path) -> int:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise WriteError(f"{shown}: cannot take the lock: {error.strerror or error}") from None
    try:
        _wait_for_lock(fd, folder)
    except BaseException:
        os.close(fd)
        raise
    return fd


class LockTimeoutError(WriteError):
    """Another process held the lock longer than gpuready waits; nothing was written."""


LOCK_WAIT_SECONDS = 60.0
LOCK_WAIT_VARIABLE = "GPUREADY_LOCK_WAIT"
LOCK_NOTICE_SECONDS = 1.0  # a lock taken at once says nothing; a longer wait says whom it awaits
_POLL_SECONDS = 0.05


def lock_wait_seconds() -> float:
    """How long every command waits for a lock another process holds: 60 s, or the seconds in
    ``GPUREADY_LOCK_WAIT`` (0: give up at once)."""
    text = os.environ.get(LOCK_WAIT_VARIABLE)
    if text is None or not text.strip():
        return LOCK_WAIT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86400:  # also refuses nan and inf
        raise WriteError(f"{LOCK_WAIT_VARIABLE}={text!r}: give the seconds to wait for a lock "
                         "(0 to 86400); nothing written")
    return seconds


def _wait_for_lock(fd: int, folder: Path) -> None:
    """Take the exclusive lock on ``fd``, waiting at most :func:`lock_wait_seconds`."""
    limit = lock_wait_seconds()
    start = time.monotonic()
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if waited >= limit:
            raise LockTimeoutError(
                f"{folder}: still locked by {lock_holder(folder)} after {limit:g} s; nothing "
                f"written (run again when it is done; {LOCK_WAIT_VARIABLE} sets the wait)")
        if not told and waited >= min(LOCK_NOTICE_SECONDS, limit):
            told = True
            print(f"gpuready: waiting for the lock on {folder}, held by {lock_holder(folder)} "
                  f"(giving up after {limit:g} s)", file=sys.stderr, flush=True)
        time.sleep(min(_POLL_SECONDS, max(limit - waited, 0.0)))


def lock_holder(folder: Path) -> str:
    """Who holds the ``flock`` of ``folder``, as ``/proc/locks`` tells it: ``process 123
    (gpuready configure ...)``, or ``another process`` when that cannot be read."""
    try:
        status = folder.stat()
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return "another process"
    wanted = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK" or fields[5] != wanted:
            continue
        return f"process {fields[4]}{_command_of(fields[4])}"
    return "another process"


def _command_of(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            words = handle.read(400).split(b"\0")
    except OSError:
        return ""
    shown = " ".join(word.decode("utf-8", "replace") for word in words if word)
    shown = "".join(char if char.isprintable() else "?" for char in shown)[:80]
    return f" ({shown})" if shown else ""


def apply_plan(plan: Plan, *, node: Node) -> bool:
    """Write ``plan.after`` to ``plan.path`` safely; return False when there was nothing to do.

    The caller holds :func:`locked` for ``plan.path``. Raises :class:`ConcurrentChangeError` when
    the file on disk no longer holds ``plan.before``.
    """
    return _write_planned(plan, node=node, keep_backup=True)


def _write_planned(plan: Plan, *, node: Node, keep_backup: bool) -> bool:
    """:func:`apply_plan`'s work; ``keep_backup`` False for gpuready's own files."""
    target = node.writable(plan.path)
    remove_stale_temporaries(target)
    if not plan.changes:
        return False
    data = plan.after.encode("utf-8")
    if not os.path.lexists(target.parent):
        _require_unchanged(plan, None)
        write_with_new_folders(target, data)
        return True
    with _folder_locked(target.parent, plan.path):
        current = _read_or_none(target)
        _require_unchanged(plan, current)
        if keep_backup and current is not None:
            _require_owner_can_be_kept(target)
            _keep_first_backup(target, current)
        write_atomic(target, data)
    return True


def _require_unchanged(plan: Plan, current: bytes | None) -> None:
    """Raise :class:`ConcurrentChangeError` unless the file still holds ``plan.before``."""
    if current != (None if plan.before is None else plan.before.encode("utf-8")):
        raise ConcurrentChangeError(f"{plan.path}: changed on disk while gpuready was "
                                    "planning; nothing written, run again")


def write_with_new_folders(path: Path, data: bytes) -> None:
    """Write ``path``, whose folder does not exist yet, so that the new folders appear together
    with the file: the missing chain is built under a temporary name beside its top folder, the
    file written inside, and the top folder renamed into place.

    A run killed half way thus leaves a temporary folder (removed by the next write), never an
    empty folder that nothing records: the next run sees the same folders missing, and its
    record names the same folders for ``unconfigure`` to remove. The caller holds
    :func:`locked` for ``path`` (the lock of the nearest existing folder).
    """
    top = path.parent
    while not os.path.lexists(top.parent):
        top = top.parent
    _remove_stale_folder_temporaries(top)
    temp = top.parent / f".{top.name}.{os.urandom(4).hex()}.tmp"
    try:
        os.mkdir(temp)  # mode 0o777 less the umask, as any folder gpuready creates
        inner = temp / path.parent.relative_to(top)
        inner.mkdir(parents=True, exist_ok=True)
        write_atomic(inner / path.name, data)
        for folder in (inner, *inner.parents):
            if folder == temp:
                break
            _fsync_folder(folder.parent)
        os.rename(temp, top)  # fails, writing nothing, if the folder appeared meanwhile
    except BaseException as error:
        shutil.rmtree(temp, ignore_errors=True)
        if isinstance(error, OSError):
            raise WriteError(f"{path}: cannot write: {error.strerror or error}") from None
        raise
    _fsync_folder(top.parent)


def _remove_stale_folder_temporaries(folder: Path) -> None:
    """Remove the temporary folders a killed :func:`write_with_new_folders` left for ``folder``
    (``.containerd.1a2b3c4d.tmp`` beside ``containerd``): real folders only, never a link."""
    pattern = re.compile(rf"\.{re.escape(folder.name)}\.[a-z0-9_]{{8}}\.tmp")
    try:
        entries = os.listdir(folder.parent)
    except OSError:
        return
    for entry in entries:
        stale = folder.parent / entry
        if pattern.fullmatch(entry) and stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def _folder_locked(folder: Path, shown: Path) -> Iterator[None]:
    """Hold the lock of the file's (existing) folder (again, if :func:`locked` has it)."""
    fd = _lock(folder, shown) if not _locked_here(folder) else None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _locked_here(folder: Path) -> bool:
    # flock locks belong to open file descriptions: a second open of the same folder in this
    # process would wait for the first one forever. locked() already holds an existing folder.
    return folder in _HELD


_HELD: dict[Path, int] = {}  # the folders this process holds the lock of, and how often


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files a killed gpuready left next to ``target`` (and its backup).

    Called under the folder's lock: every live writer holds that lock while its temporary file
    exists, so any temporary found now belongs to a run that died. A temporary folder a killed
    run left while it created the file's folder (:func:`write_with_new_folders`) goes too.
    """
    if target.parent.is_dir():
        _remove_stale_folder_temporaries(target.parent)
    removed = []
    for name in (target.name, backup_path(target).name):
        pattern = re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")
        try:
            entries = os.listdir(target.parent)
        except OSError:
            return removed
        for entry in entries:
            if pattern.fullmatch(entry):
                with contextlib.suppress(OSError):
                    os.unlink(target.parent / entry)
                    removed.append(target.parent / entry)
    return removed


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically, keeping an existing file's mode and owner.

    ``path`` is the real file, not a link (:meth:`Node.writable` resolved it): a config that is
    a link must have its target edited, as renaming over the link would replace it with a copy.
    """
    try:
        existing = path.stat()
    except FileNotFoundError:
        existing = None
    except OSError as error:
        raise WriteError(f"{path}: {error.strerror or error}") from None
    try:
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
    if not require_backup_slot(path):
        write_atomic(backup, original, mode=path.stat().st_mode & 0o7777)


def require_backup_slot(path: Path) -> bool:
    """True when ``path``'s backup is already kept (a plain file), False when there is none yet.

    Anything else at the backup's path (a folder, a link, a FIFO) is not a backup gpuready could
    trust or write: :class:`WriteError` says so before anything is written.
    """
    backup = backup_path(path)
    try:
        status = backup.lstat()
    except FileNotFoundError:
        return False
    except OSError as error:
        raise WriteError(f"{backup}: {error.strerror or error}; nothing written") from None
    if stat.S_ISREG(status.st_mode):
        return True
    kind = "a symbolic link" if stat.S_ISLNK(status.st_mode) else (
        "a folder" if stat.S_ISDIR(status.st_mode) else "not a plain file")
    raise WriteError(f"{backup}: is {kind}, not a backup gpuready can keep the original in; "
                     "nothing written (move it away and run again)")


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


def remove_planned(plan: Plan, *, node: Node) -> bool:
    """Remove ``plan.path`` (a plan whose ``after`` is None); False when it is already gone.

    The caller holds :func:`locked`. Raises :class:`ConcurrentChangeError` when the file no
    longer holds ``plan.before``. Only gpuready's own files are removed this way (a drop-in it
    wrote, its record, a backup equal to the restored file), so no backup is kept.
    """
    target = node.writable(plan.path)
    remove_stale_temporaries(target)
    current = _read_or_none(target)
    if current is None:
        return False
    if plan.before is None or current != plan.before.encode("utf-8"):
        raise ConcurrentChangeError(
            f"{plan.path}: changed on disk while gpuready was planning; nothing removed, run again"
        )
    try:
        os.unlink(target)
    except OSError as error:
        raise WriteError(f"{plan.path}: cannot remove: {error.strerror or error}") from None
    _fsync_folder(target.parent)
    return True


def remove_own_link(link: Path, targets: tuple[str, ...]) -> bool:
    """Remove the symbolic link ``link`` (a resolved host path: its folder's links followed)
    while it holds one of ``targets``; False when it is gone or is anything else, which stays.

    The caller holds :func:`locked` for the link's folder."""
    try:
        if not link.is_symlink() or os.readlink(link) not in targets:
            return False
        os.unlink(link)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise WriteError(f"{link}: cannot remove: {error.strerror or error}") from None
    _fsync_folder(link.parent)
    return True


def apply_own_file(plan: Plan, *, node: Node) -> bool:
    """Write a file that is gpuready's own (its record): as :func:`apply_plan`, without a backup.

    The caller holds :func:`locked`.
    """
    return _write_planned(plan, node=node, keep_backup=False)
