"""Several planned files written as one change: all of them, or none.

``setup`` writes the config, the CDI spec and the contract's files; ``configure --drop-in``
writes a drop-in and the main file's ``imports``; ``unconfigure`` removes files and restores
others. Each file goes through the one safe writer (:mod:`gpuready.fsio`); if one of them cannot
be written (a full disk), the files already written are put back as they were and the backups
and folders the change created are removed, so the node never keeps half a change. A SIGKILL
cannot be undone this way; each file is then old or new, never a mix, and the next run completes
the work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from gpuready import fsio
from gpuready.node import Node
from gpuready.plan import Plan


def apply_all(plans: Sequence[Plan], *, node: Node, own: Iterable[Path] = ()) -> list[Plan]:
    """Write every plan that changes something, in order; return those written.

    The caller holds :func:`locked_all` for every path. The plans' guards are checked first
    (:func:`check`): a refused change writes nothing. A plan whose ``after`` is None removes
    its file; the files in ``own`` (gpuready's record) are written without a backup. On any
    failure the plans already written are undone (:func:`put_back`), and the folders this call
    created removed, before the error goes on.
    """
    check(plans)
    written: list[Plan] = []
    own = set(own)
    fresh = new_backups([plan for plan in plans if plan.path not in own], node=node)
    folders = new_folders(plans, node=node)
    try:
        for plan in plans:
            if not plan.changes:
                fsio.apply_plan(plan, node=node)  # writes nothing; removes stale temporaries
                continue
            if plan.after is None:
                done = fsio.remove_planned(plan, node=node)
            elif plan.path in own:
                done = fsio.apply_own_file(plan, node=node)
            else:
                done = fsio.apply_plan(plan, node=node)
            if done:
                written.append(plan)
    except BaseException:
        put_back(written, node=node, backups=fresh)
        for folder in reversed(folders):  # the deepest first; one still in use stays
            fsio.remove_empty_folder(folder, node=node)
        raise
    return written


def link_notes(plans: Sequence[Plan], *, node: Node) -> list[str]:
    """A note for each file a plan changes that has other hard links: the one writer writes a
    new file and renames it over the name (:mod:`gpuready.fsio`), so only this name gets the new
    text and every other link keeps the old one. Asked before the write, while the links hold."""
    notes = []
    for plan in plans:
        found = node.lstat(plan.path) if plan.changes and plan.before is not None else None
        if found is not None and found.st_nlink > 1:
            others = found.st_nlink - 1
            notes.append(f"{plan.path} has {others} other hard link{'s' if others > 1 else ''}: "
                         "gpuready writes a new file in its place, so the other links keep the "
                         "old text (edit through each, or replace them with this file)")
    return notes


def with_link_notes(plans: Sequence[Plan], *, node: Node) -> list[Plan]:
    """``plans``, each that changes a hard-linked file with :func:`link_notes`' note added."""
    return [plan._replace(notes=(*plan.notes, *found)) if found else plan
            for plan, found in ((plan, link_notes([plan], node=node)) for plan in plans)]


def check(plans: Sequence[Plan]) -> None:
    """Run every guard the plans carry over the whole change (the never-break gate,
    :mod:`gpuready.containerd.gate`); a refusal raises before anything is written. A dry run
    calls this too, so it shows the verdict a real run would meet."""
    for guard in dict.fromkeys(plan.guard for plan in plans if plan.guard is not None):
        guard.enforce(list(plans))


def new_folders(plans: Sequence[Plan], *, node: Node) -> list[Path]:
    """The folders, from the top down, that writing ``plans`` would create."""
    missing: list[Path] = []
    for plan in plans:
        if not plan.changes or plan.after is None:
            continue
        folder = node.writable(plan.path).parent
        chain = []
        while not folder.exists() and folder.parent != folder:
            chain.append(folder)
            folder = folder.parent
        missing.extend(folder for folder in reversed(chain) if folder not in missing)
    return missing


def new_backups(plans: Sequence[Plan], *, node: Node) -> list[Path]:
    """The backups that writing ``plans`` would create (taken out again when they are undone)."""
    backups = [
        fsio.backup_path(node.writable(plan.path)) for plan in plans
        if plan.changes and plan.before is not None and plan.after is not None
    ]
    return [backup for backup in backups if not backup.exists()]


def put_back(plans: Sequence[Plan], *, node: Node, backups: Iterable[Path] = ()) -> None:
    """Give every file of ``plans`` its ``before`` text again (remove the ones that were new),
    last written first, and remove ``backups`` (those the write created). The caller holds
    :func:`locked_all` for every path.

    A file that no longer holds the ``after`` gpuready wrote was changed by someone else since:
    it is left as it is (their change is not lost), the others are put back, and then
    :class:`gpuready.fsio.ConcurrentChangeError` says which."""
    refused: list[fsio.ConcurrentChangeError] = []
    for plan in reversed(plans):
        try:
            _put_back_one(plan, node=node)
        except fsio.ConcurrentChangeError as error:
            refused.append(error)
    for backup in backups:
        fsio.remove_file(node.writable(backup), node=node)
    if refused:
        raise refused[0]


def _put_back_one(plan: Plan, *, node: Node) -> None:
    target = node.writable(plan.path)
    # what gpuready wrote; a plan that removed its file (or a journal's, that names only the
    # text before) gives nothing to compare with
    written = fsio.UNCHECKED if plan.after is None else plan.after.encode("utf-8")
    if plan.before is None:
        fsio.remove_file(target, node=node, expected=written)
        return
    # the folder of a removed file may have gone with it (unconfigure removes the empty
    # folders gpuready created): it comes back with the file
    fsio.make_folders(target.parent, node=node)
    fsio.write_atomic(target, plan.before.encode("utf-8"), node=node, expected=written)


@contextlib.contextmanager
def locked_all(paths: Iterable[Path], *, node: Node) -> Iterator[None]:
    """Hold the lock of every file in ``paths`` (each folder once, in a fixed order, so two
    gpuready runs never wait on each other crosswise) while a change is planned and written.

    A folder that does not exist yet (``conf.d`` before the first drop-in) is not created: the
    nearest folder above it is locked instead (:func:`gpuready.fsio.locked`), and locked once
    even when it stands for two paths (a second lock of one folder would wait for the first).
    """
    folders = sorted({_nearest_folder(node.writable(path).parent) for path in paths})
    with contextlib.ExitStack() as stack:
        for folder in folders:
            # fsio.locked locks the folder of the path it is given; no file of that name is made
            stack.enter_context(fsio.locked(folder / ".gpuready-lock", node=node))
        yield


def _nearest_folder(folder: Path) -> Path:
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent
    return folder


def write_all(plans: Sequence[Plan], *, node: Node) -> list[Plan]:
    """Take the lock of every file in ``plans``, then write them all or none (:func:`apply_all`)."""
    with locked_all([plan.path for plan in plans], node=node):
        return apply_all(plans, node=node)
