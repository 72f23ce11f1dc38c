"""The journal of a ``--restart`` transaction: what it set out to do, kept until its verdict.

:func:`gpuready.workflow.transaction.run_transaction` writes the journal beside the main config
(``config.toml.gpuready.txn.json``) before the first file, moves it on to the restart and to the
roll-back, and removes it once the verdict is in: the change restarted and verified, or every
file put back and containerd back on them. A run killed in between leaves the journal, and with it
the node in a state nobody checked: files written that containerd has not read, or a roll-back
half done. The next writing command on the node finishes it first (:func:`finish_pending`); a
reading command reports it (the ``transaction-pending`` rule). This module is the journal as data
and as read, below the rules; writing it is :mod:`gpuready.workflow.journal_keeper`'s.

The journal holds, for every file of the change, its node path, the text it had before and the
hashes of the texts before and after, the files' new backups, what to verify (the runtime that must
be loaded, or gone), and the node's machine id. It holds no command and no socket: a pending
restart is carried out only with the finishing run's own ``--restart`` options, so nothing a tree
holds is ever run. It is data gpuready checks before it acts on it: a journal that is not valid,
that someone else could have written (not owned by the user running gpuready, or writable by
others), or that was written on another machine (its machine id is not the one under the root) is
refused with the reason and nothing is touched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuready.errors import InputError
from gpuready.node import Node
from gpuready.paths import BACKUP_SUFFIX
from gpuready.plan import Plan
from gpuready.records import Record
from gpuready.textfile import sha256

JOURNAL_SUFFIX = ".gpuready.txn.json"
KIND = "gpuready restart transaction"
# 2: no restart command nor address, and the node's machine id. A format 1 journal (which held
# the command its finisher ran) is refused: its files are compared and it is removed by hand.
FORMAT = 2
MACHINE_ID = "/etc/machine-id"  # a node path: read under the root, as the node's own
PROOF_FIELDS = ("runtime_name", "expect_runtime", "gone_runtime")
PHASES = ("write", "restart", "roll back")
MAX_TIMEOUT = 3600.0  # seconds: also the bound of --restart-timeout


class _Kind(Record):
    """What :meth:`gpuready.node.Node.read_bytes` asks of a file kind: a label and a limit.

    A journal holds the texts of every file of one change (each at most a 1 MiB config), more
    than any one file kind allows."""

    label: str
    limit: int


JOURNAL_KIND = _Kind("transaction journal", 16 * 1024 * 1024)


class Entry(Record):
    """One file of the change: its node path, its text before, the hashes before and after."""

    path: str
    before: str | None
    after_sha256: str | None

    @property
    def before_sha256(self) -> str | None:
        """The hash of ``before`` (None: the file did not exist)."""
        return sha256(self.before)


class Journal(Record):
    """A transaction's intent, as written beside the config.

    ``restart``: the effective config changes (containerd must be restarted to read it);
    ``options``: what the verdict proves (:data:`PROOF_FIELDS` of
    :class:`~gpuready.workflow.transaction.RestartOptions`), never how to restart;
    ``machine_id``: the node's ``/etc/machine-id`` when it was written (None: it had none).
    """

    config: str
    major: int
    phase: str
    restart: bool
    options: dict[str, Any]
    files: tuple[Entry, ...]
    backups: tuple[str, ...]
    machine_id: str | None = None

    def to_json(self, root: Path) -> str:
        """The journal's text (``node``, the root it was written under, is for people)."""
        return json.dumps({
            "kind": KIND, "format": FORMAT, "node": str(root), "config": self.config,
            "major": self.major, "phase": self.phase, "restart": self.restart,
            "options": self.options,
            "files": [{"path": e.path, "before": e.before, "before_sha256": e.before_sha256,
                       "after_sha256": e.after_sha256} for e in self.files],
            "backups": list(self.backups), "machine_id": self.machine_id,
        }, indent=2) + "\n"


def journal_path(config: Path) -> Path:
    """Where the journal of ``config`` lives: ``config.toml.gpuready.txn.json`` beside it."""
    return config.with_name(config.name + JOURNAL_SUFFIX)


def node_name(node: Node, path: Path) -> str:
    """How the journal names ``path``: its node path (a node folder copied or moved elsewhere
    keeps its journal)."""
    return str(node.node_path(path))


def intent(node: Node, config: Path, *, major: int, plans: list[Plan], backups: list[Path],
           options: Any, restart: bool) -> Journal:
    """The journal of writing ``plans`` (those that change) and restarting with ``options``."""
    files = tuple(
        Entry(node_name(node, plan.path), plan.before,
              sha256(plan.after))
        for plan in plans if plan.changes
    )
    return Journal(
        config=node_name(node, config), major=major, phase="write", restart=restart,
        options={name: getattr(options, name) for name in PROOF_FIELDS}, files=files,
        backups=tuple(node_name(node, backup) for backup in backups),
        machine_id=machine_id(node),
    )


def machine_id(node: Node) -> str | None:
    """The node's machine id (``/etc/machine-id`` under its root), None when it has none or it
    is not one: a cluster agent with the host at ``/host`` reads the host's, so it finishes its
    own journal after a restart of its pod."""
    from gpuready.node import FileKind

    path = node.path(MACHINE_ID)
    if not node.is_file(path):
        return None
    text = (node.read_text_or_none(path, kind=FileKind.NODE_FACT) or "").strip()
    return text if len(text) == 32 and all(c in "0123456789abcdef" for c in text) else None


# -- reading: data checked before it is used -----------------------------------------------------


def pending(node: Node, config: Path) -> bool:
    """True when a journal lies beside ``config`` (read nothing; see :func:`load`)."""
    return node.lexists(journal_path(config))


def pending_state(node: Node, config: Path) -> str | None:
    """What a reading command says of the journal beside ``config``: None when there is none,
    else the phase the killed run reached, or why gpuready would refuse the journal. Reads only;
    never finishes anything."""
    if not pending(node, config):
        return None
    try:
        found = load(node, config)
    except InputError as error:
        return f"a journal gpuready refuses to act on: {error.message()}"
    return f"killed in its {found.phase} phase" if found else "just finished"


def pending_message(node: Node, config: Path) -> str | None:
    """The one line a reading command reports for a pending transaction (None: none pending)."""
    state = pending_state(node, config)
    if state is None:
        return None
    return (f"a --restart transaction on {config} was never finished ({state}): containerd "
            f"may not run what the files say; its journal is {journal_path(config)}")


PENDING_FIX = ("run a writing command on this node (gpuready configure --restart, unconfigure, "
               "migrate, setup): it finishes the transaction first")


def load(node: Node, config: Path) -> Journal | None:
    """The journal beside ``config``, checked; None when there is none.

    Raises :class:`InputError` with the reason for a journal gpuready must not act on."""
    path = journal_path(config)
    if not node.lexists(path):
        return None
    node.require_trusted(path, what="transaction journal")  # finishing it restores files
    try:
        data = json.loads(node.read_bytes(path, kind=JOURNAL_KIND))  # type: ignore[arg-type]
    except (ValueError, RecursionError):
        raise InputError(path, "the transaction journal is not valid JSON; refused") from None
    try:
        journal = _parse(data)
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(path, f"the transaction journal is not valid ({error}); refused, "
                         "nothing touched") from None
    if journal.config != node_name(node, config):
        raise InputError(path, f"the transaction journal is for {journal.config}, not "
                         f"{node_name(node, config)}; refused, nothing touched")
    here = machine_id(node)
    if journal.machine_id != here:
        raise InputError(path, f"the transaction journal was written on another machine "
                         f"(machine id {journal.machine_id or 'none'}, this node's is "
                         f"{here or 'none'}): refused, nothing touched; compare the files it "
                         "lists, then remove it")
    return journal


def _parse(data: Any) -> Journal:
    """The journal in ``data``; :class:`ValueError` (or ``KeyError``/``TypeError``) says why not."""
    _expect(isinstance(data, dict), "not an object")
    _expect(data.get("kind") == KIND, "unknown kind")
    _expect(data.get("format") == FORMAT, f"format {data.get('format')!r}, not {FORMAT}: "
            "written by another gpuready release")
    _expect(data["phase"] in PHASES, f"phase {data['phase']!r}")
    _expect(_is_int(data["major"]) and data["major"] in (1, 2), "major")
    _expect(isinstance(data["restart"], bool), "restart")
    files = tuple(_entry(item) for item in _list(data["files"], "files"))
    names = {entry.path for entry in files}
    backups = tuple(_node_path(item, "backup") for item in _list(data["backups"], "backups"))
    for backup in backups:
        _expect(backup.endswith(BACKUP_SUFFIX)
                and backup[:-len(BACKUP_SUFFIX)] in names,
                f"backup {backup} is not the backup of a file of the change")
    config = _node_path(data["config"], "config")
    _expect(config in names or not files, "config is not a file of the change")
    found_id = data.get("machine_id")
    _expect(found_id is None or isinstance(found_id, str), "machine_id")
    return Journal(config=config, major=data["major"], phase=data["phase"],
                   restart=data["restart"], options=_options(data["options"]),
                   files=files, backups=backups, machine_id=found_id)


def _entry(item: Any) -> Entry:
    _expect(isinstance(item, dict), "a file is not an object")
    path = _node_path(item["path"], "path")
    before, before_sha, after_sha = item["before"], item["before_sha256"], item["after_sha256"]
    _expect(before is None or isinstance(before, str), f"{path}: before")
    entry = Entry(path, before, _sha(after_sha, path))
    _expect(entry.before_sha256 == _sha(before_sha, path), f"{path}: before does not match "
            "its hash")
    return entry


def _options(item: Any) -> dict[str, Any]:
    """What the journal says to prove; anything else in it (a command, a socket) is refused."""
    _expect(isinstance(item, dict), "options")
    _expect(set(item) == set(PROOF_FIELDS), f"options hold {sorted(item)}, not only "
            f"{list(PROOF_FIELDS)}")
    _expect(isinstance(item["runtime_name"], str), "options.runtime_name")
    for name in ("expect_runtime", "gone_runtime"):
        _expect(item[name] is None or isinstance(item[name], str), f"options.{name}")
    return dict(item)


def _node_path(value: Any, what: str) -> str:
    _expect(isinstance(value, str) and value.startswith("/") and "\0" not in value
            and ".." not in value.split("/"), f"{what} {value!r} is not an absolute node path")
    return value


def _sha(value: Any, path: str) -> str | None:
    _expect(value is None or (isinstance(value, str) and len(value) == 64
                              and all(c in "0123456789abcdef" for c in value)),
            f"{path}: a hash")
    return value


def _list(value: Any, what: str) -> list:
    _expect(isinstance(value, list), what)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(what)
