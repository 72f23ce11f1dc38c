"""The one safe writer: every file gpuready changes goes through :func:`apply_plan`.

A write takes an exclusive lock, re-reads the file to make sure nobody changed it since the plan
was computed, keeps a backup of the file as it was before gpuready first changed it, writes a
temporary file in the same folder, ``fsync``\\ s it, copies the original mode and owner onto it,
and renames it over the original (atomic on POSIX), then ``fsync``\\ s the folder. A plan that
changes nothing writes nothing, so the file keeps its bytes and its mtime.

Every path is resolved by the :class:`~gpuready.node.Node`: a linked file is written at its target
inside the root, and nothing is ever created outside it. Then every read that feeds a write, every
write, rename, removal and new folder goes from the root's descriptor, folder by folder, without
following a link (:mod:`gpuready.atfile`): a folder swapped for a link meanwhile fails the write
(exit 2), with nothing written through it. The new file is exchanged with the old in one step and
what came out compared with what was read: an edit made meanwhile is swapped back and kept
(:class:`ConcurrentChangeError`, exit 1). Folders are created only when a file is
really written (a dry run or a refused command creates none), and appear together with their
first file (:func:`write_with_new_folders`); temporary files and folders a killed run left next to
the file are removed by the next write.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from gpuready import atfile
from gpuready.errors import ExitCode, WriteError
from gpuready.node import HOST, Node
from gpuready.paths import BACKUP_SUFFIX
from gpuready.plan import Plan

NEW_FILE_MODE = 0o644


class ConcurrentChangeError(WriteError):
    """The file changed between reading it and writing it; that change is kept and nothing of
    gpuready's was written (exit 1: a finding about the node, not bad input; run again)."""

    exit_code = ExitCode.CHECK_FAILED


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
        folder, fd = _acquire(target, path, node=node)
    _HELD[folder] = _HELD.get(folder, 0) + 1
    try:
        yield
    finally:
        _HELD[folder] -= 1
        if not _HELD[folder]:
            del _HELD[folder]
        if fd is not None:
            os.close(fd)


def _acquire(target: Path, shown: Path, *, node: Node) -> tuple[Path, int]:
    """Lock the nearest existing folder of ``target``; again when it appeared meanwhile."""
    while True:
        folder = _nearest_folder(target.parent)
        fd = _lock(folder, shown, node=node)
        if _nearest_folder(target.parent) == folder:
            return folder, fd
        os.close(fd)  # the folder appeared meanwhile: lock the folder itself


def _nearest_folder(folder: Path) -> Path:
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent
    return folder


def _lock(folder: Path, shown: Path, *, node: Node) -> int:
    try:
        fd = atfile.open_folder(folder, node=node)  # never through a link swapped in
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
    the file on disk no longer holds ``plan.before``, up to the moment the new file is swapped in
    (:func:`write_atomic`): the other change is kept, nothing of this one is written.
    """
    return _write_planned(plan, node=node, keep_backup=True)


def _write_planned(plan: Plan, *, node: Node, keep_backup: bool) -> bool:
    """:func:`apply_plan`'s work; ``keep_backup`` False for gpuready's own files."""
    target = node.writable(plan.path)
    remove_stale_temporaries(target, node=node)
    if not plan.changes:
        return False
    data = plan.after.encode("utf-8")
    before = None if plan.before is None else plan.before.encode("utf-8")
    if not os.path.lexists(target.parent):
        _require_unchanged(plan, None)
        write_with_new_folders(target, data, node=node)
        return True
    with _folder_locked(target.parent, plan.path, node=node):
        _require_unchanged(plan, _read_or_none(target, node=node))
        kept = None
        if keep_backup and before is not None:
            _require_owner_can_be_kept(target, node=node)
            kept = _keep_first_backup(target, before, node=node)
        try:
            write_atomic(target, data, node=node, expected=before)
        except ConcurrentChangeError:
            if kept is not None:  # the backup of a change that was not made
                with contextlib.suppress(WriteError):
                    remove_file(kept, node=node)
            raise
    return True


def _require_unchanged(plan: Plan, current: bytes | None) -> None:
    """Raise :class:`ConcurrentChangeError` unless the file still holds ``plan.before``."""
    if current != (None if plan.before is None else plan.before.encode("utf-8")):
        raise ConcurrentChangeError(f"{plan.path}: changed on disk while gpuready was "
                                    "planning; nothing written, run again")


def write_with_new_folders(path: Path, data: bytes, *, node: Node | None = None) -> None:
    """Write ``path``, whose folder does not exist yet, so that the new folders appear together
    with the file: the missing chain is built under a temporary name beside its top folder, the
    file written inside, and the top folder renamed into place.

    A run killed half way thus leaves a temporary folder (removed by the next write), never an
    empty folder that nothing records: the next run sees the same folders missing, and its
    record names the same folders for ``unconfigure`` to remove. The caller holds
    :func:`locked` for ``path`` (the lock of the nearest existing folder). Every step goes from
    the descriptor of the folder above (:mod:`gpuready.atfile`).
    """
    top = path.parent
    while not os.path.lexists(top.parent):
        top = top.parent
    try:
        with atfile.folder(top.parent, node=node or HOST) as above:
            _remove_stale_folder_temporaries(above, top.name)
            temp = atfile.temporary_name(top.name)
            os.mkdir(temp, dir_fd=above)  # mode 0o777 less the umask, as any folder gpuready makes
            try:
                _fill_new_folders(above, temp, path.parent.relative_to(top).parts, path, data)
                # fails, writing nothing, if the folder appeared meanwhile
                atfile.rename_at(above, temp, top.name, replace=False)
            except BaseException:
                atfile.remove_tree_at(above, temp)
                raise
            atfile.fsync_folder(above)
    except FileExistsError:
        raise WriteError(f"{top}: appeared while gpuready created it; nothing written, run "
                         "again") from None
    except OSError as error:
        raise WriteError(f"{path}: cannot write: {error.strerror or error}") from None


def _fill_new_folders(above: int, temp: str, parts: tuple[str, ...], path: Path,
                      data: bytes) -> None:
    """Make the folders ``parts`` inside the new folder ``temp`` and write ``path``'s file in
    the innermost, each ``fsync``\\ ed."""
    chain = [atfile.subfolder(above, temp, path)]
    try:
        for part in parts:
            os.mkdir(part, dir_fd=chain[-1])
            chain.append(atfile.subfolder(chain[-1], part, path))
        atfile.create_at(chain[-1], path.name, data, mode=NEW_FILE_MODE)
        for fd in reversed(chain):
            atfile.fsync_folder(fd)
    finally:
        for fd in chain:
            os.close(fd)


def _remove_stale_folder_temporaries(above: int, name: str) -> None:
    """Remove the temporary folders a killed :func:`write_with_new_folders` left for the folder
    ``name`` (``.containerd.1a2b3c4d.tmp`` beside ``containerd``) in the open folder ``above``:
    real folders only, never a link."""
    pattern = re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")
    try:
        entries = os.listdir(above)
    except OSError:
        return
    for entry in entries:
        found = atfile.lstat_at(above, entry) if pattern.fullmatch(entry) else None
        if found is not None and stat.S_ISDIR(found.st_mode):
            atfile.remove_tree_at(above, entry)


@contextlib.contextmanager
def _folder_locked(folder: Path, shown: Path, *, node: Node) -> Iterator[None]:
    """Hold the lock of the file's (existing) folder (again, if :func:`locked` has it)."""
    fd = _lock(folder, shown, node=node) if not _locked_here(folder) else None
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


def remove_stale_temporaries(target: Path, *, node: Node | None = None) -> list[Path]:
    """Remove the temporary files a killed gpuready left next to ``target`` (and its backup).

    Called under the folder's lock: every live writer holds that lock while its temporary file
    exists, so any temporary found now belongs to a run that died. A temporary folder a killed
    run left while it created the file's folder (:func:`write_with_new_folders`) goes too. A
    folder that is missing, or a link now, is left to the write that follows to report.
    """
    node = node or HOST
    folder = target.parent
    if folder != node.root and node.contains(folder.parent):
        with contextlib.suppress(OSError, WriteError), atfile.folder(folder.parent,
                                                                     node=node) as above:
            _remove_stale_folder_temporaries(above, folder.name)
    try:
        fd = atfile.open_folder(folder, node=node)
    except (OSError, WriteError):
        return []
    try:
        return [folder / entry for entry in _stale_files(fd, target)
                if _unlinked(fd, entry)]
    finally:
        os.close(fd)


def _stale_files(folder_fd: int, target: Path) -> list[str]:
    patterns = [re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")
                for name in (target.name, backup_path(target).name)]
    try:
        entries = os.listdir(folder_fd)
    except OSError:
        return []
    return [entry for entry in entries if any(p.fullmatch(entry) for p in patterns)]


def _unlinked(folder_fd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=folder_fd)
    except OSError:
        return False
    return True


class _Unchecked:
    """What :func:`write_atomic` replaces when the caller does not say what it expects."""

    def __repr__(self) -> str:
        return "UNCHECKED"


UNCHECKED = _Unchecked()


def write_atomic(path: Path, data: bytes, *, mode: int | None = None, node: Node | None = None,
                 expected: bytes | None | _Unchecked = UNCHECKED) -> None:
    """Replace ``path`` with ``data`` atomically, keeping an existing file's mode and owner.

    ``path`` is the real file, not a link (:meth:`Node.writable` resolved it): a config that is
    a link must have its target edited, as renaming over the link would replace it with a copy.
    The folder is reached from ``node``'s root without following a link (``/`` when no node is
    given), and the temporary file is made in it by name.

    ``expected``: the bytes the file must hold when the new file takes its place, or None when
    there must be no file; anything else there is kept and :class:`ConcurrentChangeError` raised
    (:func:`_swap_in`). Left out, whatever is there is replaced (gpuready's own files, under
    its lock).
    """
    try:
        with atfile.folder(path.parent, node=node or HOST) as folder_fd:
            _replace_at(folder_fd, path, data, mode=mode, expected=expected)
    except OwnerError as error:
        raise WriteError(f"{path}: {error}") from None
    except OSError as error:
        raise WriteError(f"{path}: cannot write: {error.strerror or error}") from None


def _replace_at(folder_fd: int, path: Path, data: bytes, *, mode: int | None,
                expected: bytes | None | _Unchecked) -> None:
    """:func:`write_atomic` inside the open folder: a temporary file beside the target, filled,
    given the mode and owner, swapped in."""
    existing = atfile.lstat_at(folder_fd, path.name)
    if existing is not None and stat.S_ISLNK(existing.st_mode):
        raise atfile.LinkSwappedError(path)
    if existing is None:
        file_mode, owner = NEW_FILE_MODE if mode is None else mode, None
    else:
        file_mode = existing.st_mode & 0o7777 if mode is None else mode
        owner = (existing.st_uid, existing.st_gid)
    temp = atfile.temporary_name(path.name)
    atfile.create_at(folder_fd, temp, data, mode=file_mode)
    try:
        if owner is not None:
            _give_owner(folder_fd, temp, owner)
    except BaseException:
        _unlinked(folder_fd, temp)
        raise
    _swap_in(folder_fd, temp, path, expected)
    atfile.fsync_folder(folder_fd)


def _give_owner(folder_fd: int, name: str, owner: tuple[int, int]) -> None:
    try:
        os.chown(name, *owner, dir_fd=folder_fd, follow_symlinks=False)
    except PermissionError:
        # Only root may give a file away: rather than silently change the owner, write nothing.
        raise OwnerError(f"cannot keep the owner ({owner[0]}:{owner[1]}); nothing written "
                         "(run as root or as the file's owner)") from None


def _swap_in(folder_fd: int, temp: str, path: Path,
             expected: bytes | None | _Unchecked) -> None:
    """Put the filled temporary ``temp`` in ``path``'s place; on failure it is removed.

    With ``expected`` bytes the new file is exchanged with the old in one step
    (``renameat2(RENAME_EXCHANGE)``) and what came out is compared with ``expected``: when it
    differs (an editor renamed its file over ours, or rewrote it, after gpuready read it), the
    two are exchanged back, so the edit is in place again, and nothing is written. The only
    window left is an editor that holds the file open across the swap and writes after the
    check: its bytes go into the old file, which is then gone (README, Safety). That window is
    closed where Linux can say whether the old file is still open for writing
    (:func:`gpuready.atfile.wait_until_unwritten`): gpuready waits up to
    :data:`WRITER_WAIT_SECONDS` for such a writer to close it before comparing, and swaps back
    when it does not.
    """
    name = path.name
    if isinstance(expected, _Unchecked):
        _finish(folder_fd, temp, lambda: atfile.rename_at(folder_fd, temp, name, replace=True))
        return
    if expected is None:
        try:
            _finish(folder_fd, temp,
                    lambda: atfile.rename_at(folder_fd, temp, name, replace=False))
        except FileExistsError:
            raise _changed(path) from None
        return
    try:
        swapped = _finish(folder_fd, temp, lambda: atfile.exchange(folder_fd, temp, name))
    except FileNotFoundError:  # the file went away meanwhile
        raise _changed(path) from None
    if not swapped:
        # No renameat2 (not glibc) or a file system without RENAME_EXCHANGE: check, then rename.
        # An edit renamed into place between the two is replaced; the lock keeps other
        # gpuready runs out of that window, not editors.
        if not _holds(folder_fd, name, expected, path):
            _unlinked(folder_fd, temp)
            raise _changed(path)
        _finish(folder_fd, temp, lambda: atfile.rename_at(folder_fd, temp, name, replace=True))
        return
    # Only a process that opened the old file before the exchange can still write to it (its
    # name is now the hidden temporary): once none holds it open for writing, it stays as read.
    if atfile.wait_until_unwritten(folder_fd, temp, seconds=WRITER_WAIT_SECONDS) is False:
        _swap_back(folder_fd, temp, path)
        raise ConcurrentChangeError(f"{path}: held open for writing by another process while "
                                    "gpuready wrote it; left as it was, nothing written, run "
                                    "again once it is closed")
    if _holds(folder_fd, temp, expected, path):
        _unlinked(folder_fd, temp)  # the file as it was read: replaced, as planned
        return
    _swap_back(folder_fd, temp, path)
    raise _changed(path)


WRITER_WAIT_SECONDS = 2.0  # how long a process writing the old file is given to close it


def _finish(folder_fd: int, temp: str, step):
    """Run the renaming ``step``; when it fails, the temporary goes."""
    try:
        return step()
    except BaseException:
        _unlinked(folder_fd, temp)
        raise


def _swap_back(folder_fd: int, temp: str, path: Path) -> None:
    """Exchange again: the file someone else changed is back at ``path``, ours goes."""
    try:
        atfile.exchange(folder_fd, temp, path.name)
    except OSError as error:
        raise WriteError(f"{path}: changed on disk while gpuready wrote it, and could not be "
                         f"put back ({error.strerror or error}): the changed file is "
                         f"{path.parent / temp}; move it back by hand") from None
    _unlinked(folder_fd, temp)
    atfile.fsync_folder(folder_fd)


def _holds(folder_fd: int, name: str, expected: bytes, shown: Path) -> bool:
    """True when ``name`` in the open folder is a regular file of exactly ``expected``."""
    try:
        return atfile.read_at(folder_fd, name, shown, limit=len(expected)) == expected
    except (OSError, WriteError):
        return False


def _changed(path: Path) -> ConcurrentChangeError:
    return ConcurrentChangeError(f"{path}: changed on disk while gpuready wrote it; that change "
                                 "is kept and nothing was written, run again")


def _require_owner_can_be_kept(path: Path, *, node: Node) -> None:
    """Refuse before writing anything when the replacement could not keep the file's owner."""
    if os.geteuid() == 0:
        return
    status = _lstat(path, node=node)
    if status is None:
        return
    groups = {os.getegid(), *os.getgroups()}
    if status.st_uid != os.geteuid() or status.st_gid not in groups:
        raise WriteError(
            f"{path}: cannot keep the owner ({status.st_uid}:{status.st_gid}); nothing written "
            "(run as root or as the file's owner)"
        )


def _keep_first_backup(path: Path, original: bytes, *, node: Node) -> Path | None:
    """Save the file as it was before gpuready first changed it; later runs keep that copy.
    Returns the backup when this call made it."""
    if require_backup_slot(path, node=node):
        return None
    status = _lstat(path, node=node)
    # the file's own mode, less group and world write: a backup is one of the files gpuready
    # trusts (Node.require_trusted), so a group-writable config must not give a refused backup
    mode = NEW_FILE_MODE if status is None else status.st_mode & 0o7777 & ~0o022
    backup = backup_path(path)
    write_atomic(backup, original, mode=mode, node=node, expected=None)
    return backup


def require_backup_slot(path: Path, *, node: Node | None = None) -> bool:
    """True when ``path``'s backup is already kept (a plain file), False when there is none yet.

    Anything else at the backup's path (a folder, a link, a FIFO) is not a backup gpuready could
    trust or write: :class:`WriteError` says so before anything is written.
    """
    backup = backup_path(path)
    try:
        status = _lstat(backup, node=node or HOST)
    except OSError as error:
        raise WriteError(f"{backup}: {error.strerror or error}; nothing written") from None
    if status is None:
        return False
    if stat.S_ISREG(status.st_mode):
        return True
    kind = "a symbolic link" if stat.S_ISLNK(status.st_mode) else (
        "a folder" if stat.S_ISDIR(status.st_mode) else "not a plain file")
    raise WriteError(f"{backup}: is {kind}, not a backup gpuready can keep the original in; "
                     "nothing written (move it away and run again)")


def _lstat(path: Path, *, node: Node) -> os.stat_result | None:
    """``lstat`` of ``path`` from its folder's descriptor; None when it or its folder is gone."""
    try:
        with atfile.folder(path.parent, node=node) as folder_fd:
            return atfile.lstat_at(folder_fd, path.name)
    except FileNotFoundError:
        return None


READ_LIMIT = 64 * 1024 * 1024  # what the writer reads of a file to compare: far above any limit


def _read_or_none(path: Path, *, node: Node) -> bytes | None:
    """The bytes of ``path``, read from its folder's descriptor; None when it is not there."""
    try:
        with atfile.folder(path.parent, node=node) as folder_fd:
            return atfile.read_at(folder_fd, path.name, path, limit=READ_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise WriteError(f"{path}: {error.strerror or error}") from None


def remove_planned(plan: Plan, *, node: Node) -> bool:
    """Remove ``plan.path`` (a plan whose ``after`` is None); False when it is already gone.

    The caller holds :func:`locked`. Raises :class:`ConcurrentChangeError` when the file no
    longer holds ``plan.before``. Only gpuready's own files are removed this way (a drop-in it
    wrote, its record, a backup equal to the restored file), so no backup is kept.
    """
    target = node.writable(plan.path)
    remove_stale_temporaries(target, node=node)
    current = _read_or_none(target, node=node)
    if current is None:
        return False
    if plan.before is None or current != plan.before.encode("utf-8"):
        raise ConcurrentChangeError(
            f"{plan.path}: changed on disk while gpuready was planning; nothing removed, run again"
        )
    return remove_file(target, node=node, expected=current)


def remove_file(path: Path, *, node: Node,
                expected: bytes | _Unchecked = UNCHECKED) -> bool:
    """Remove the file ``path`` (resolved) from its folder's descriptor; False when it is gone.

    With ``expected``, the file is first renamed aside and what was taken out compared: a file
    that no longer holds ``expected`` is renamed back and :class:`ConcurrentChangeError` raised.
    """
    try:
        with atfile.folder(path.parent, node=node) as folder_fd:
            if isinstance(expected, _Unchecked):
                os.unlink(path.name, dir_fd=folder_fd)
            else:
                _remove_checked(folder_fd, path, expected)
            atfile.fsync_folder(folder_fd)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise WriteError(f"{path}: cannot remove: {error.strerror or error}") from None
    return True


def _remove_checked(folder_fd: int, path: Path, expected: bytes) -> None:
    if atfile.is_link_at(folder_fd, path.name):
        raise atfile.LinkSwappedError(path)
    aside = atfile.temporary_name(path.name)
    atfile.rename_at(folder_fd, path.name, aside, replace=False)
    if _holds(folder_fd, aside, expected, path):
        _unlinked(folder_fd, aside)
        return
    try:
        atfile.rename_at(folder_fd, aside, path.name, replace=False)
    except OSError as error:
        raise WriteError(f"{path}: changed on disk while gpuready removed it, and could not be "
                         f"put back ({error.strerror or error}): the changed file is "
                         f"{path.parent / aside}; move it back by hand") from None
    raise ConcurrentChangeError(f"{path}: changed on disk while gpuready removed it; that "
                                "change is kept and nothing was removed, run again")


def remove_empty_folder(folder: Path, *, node: Node) -> bool:
    """Remove ``folder`` (resolved) when it is an empty folder, not a link; False when it holds
    anything or cannot be removed (a link on the way included: what was not made is not
    undone)."""
    try:
        with atfile.folder(folder.parent, node=node) as above:
            found = atfile.lstat_at(above, folder.name)
            if found is None or not stat.S_ISDIR(found.st_mode):
                return False
            os.rmdir(folder.name, dir_fd=above)
            atfile.fsync_folder(above)
    except (OSError, atfile.LinkSwappedError):
        return False
    return True


def make_folders(folder: Path, *, node: Node) -> None:
    """Create ``folder`` (resolved) and the folders above it that are missing, each from the
    descriptor of the one above it, never through a link."""
    base, below = node.anchor(folder)
    shown = Path(base)
    try:
        fd = atfile.open_folder(base, node=node)
        try:
            for part in below.parts:
                shown = shown / part
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                inner = atfile.subfolder(fd, part, shown)
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)
    except OSError as error:
        raise WriteError(f"{shown}: cannot create: {error.strerror or error}") from None


def remove_own_link(link: Path, targets: tuple[str, ...], *, node: Node | None = None) -> bool:
    """Remove the symbolic link ``link`` (a resolved host path: its folder's links followed)
    while it holds one of ``targets``; False when it is gone or is anything else, which stays.

    The caller holds :func:`locked` for the link's folder."""
    try:
        with atfile.folder(link.parent, node=node or HOST) as folder_fd:
            if not atfile.is_link_at(folder_fd, link.name) or os.readlink(
                    link.name, dir_fd=folder_fd) not in targets:
                return False
            os.unlink(link.name, dir_fd=folder_fd)
            atfile.fsync_folder(folder_fd)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise WriteError(f"{link}: cannot remove: {error.strerror or error}") from None
    return True


def apply_own_file(plan: Plan, *, node: Node) -> bool:
    """Write a file that is gpuready's own (its record): as :func:`apply_plan`, without a backup.

    The caller holds :func:`locked`.
    """
    return _write_planned(plan, node=node, keep_backup=False)
