"""The node gpuready works on: one object that owns ``--root`` and every path below it.

Readers and writers never join a root onto a path by hand: they ask a :class:`Node`. It resolves
paths the way a ``chroot`` would -- an absolute symbolic link target starts again at the root,
``..`` stops at the root -- so a tree copied from a node (or a host mounted at ``/host``) is read
and written as the node sees it, and nothing outside the root is ever followed, read or created.
Reads take regular files only (never a device, a FIFO or a socket) and at most a size limit that
depends on what the file is; sockets are only checked for existence.

Paths handed in and out are *host paths*: the root joined with the node path
(:meth:`Node.path`), which is also what messages show. A file of the node named on the command
line (``--config``, ``lint FILE``, a socket) is a node path too (:meth:`Node.named`): under a root
it is the file inside the root, never the machine's own file of that name.
"""

from __future__ import annotations

import contextlib
import enum
import fnmatch
import functools
import os
import posixpath
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from gpuready.errors import InputError, MissingFileError, UsageError
from gpuready.textfile import decode

MAX_LINKS = 40  # as Linux's ELOOP limit for one path lookup
_PATHS_KEPT = 256  # node paths whose host path a Node keeps (the fixed paths gpuready reads)
_MIB = 1024 * 1024
# What one Node view reads in all (imports, globs, specs), beside each file's own limit: far
# above a real node (a config and a few drop-ins, a CDI spec or two), low enough that reading
# and checking it all stays within seconds and a few hundred MB.
MAX_NODE_FILES = 256
MAX_NODE_BYTES = 16 * _MIB


class FileKind(enum.Enum):
    """What a file is, and how large gpuready lets it be (bytes).

    The limits are far above anything real (a containerd config is a few KiB; a CDI spec for 255
    GPUs is 26 KiB, and 512 KiB hold about 5000 devices) and low enough that reading and
    checking the largest file allowed takes about two seconds of CPU and little memory.
    """

    CONFIG = ("containerd config", 1 * _MIB)
    CDI_SPEC = ("CDI spec", _MIB // 2)
    MANIFEST = ("Kubernetes manifest", 1 * _MIB)
    INVENTORY = ("inventory", 1 * _MIB)
    TOOLKIT = ("toolkit file", 1 * _MIB)
    NODE_FACT = ("node fact file", 64 * 1024)
    DOCKER_CONFIG = ("Docker daemon.json", 1 * _MIB)
    CRIO_CONFIG = ("CRI-O config", 1 * _MIB)
    # a full Debian system's dpkg status is a few MiB; read only to find containerd's version
    PACKAGE_DATABASE = ("package database", 32 * _MIB)

    def __init__(self, label: str, limit: int) -> None:
        self.label = label
        self.limit = limit


class Node:
    """The file system of one node, seen from ``root`` (``/`` for the machine gpuready runs on).

    Paths are resolved as strings with ``os.lstat`` (no :mod:`pathlib` objects on the way: a fleet
    audit resolves tens of paths per node). Inside :meth:`reading` the node also remembers what
    each path it looked at is, for a read-only pass that asks about the same folders again and
    again; :meth:`writable` always looks afresh.
    """

    def __init__(self, root: Path | str = "/", *, budget: bool = True) -> None:
        self.root = Path(os.path.abspath(root))
        self._root = str(self.root)
        self._prefix = self._root.rstrip("/") + "/"  # what a path below the root starts with
        self._host = self._root == "/"
        self._seen: dict[str, os.stat_result | None] | None = None  # None: not remembering
        self._targets: dict[str, str] = {}
        self._resolved: dict[str, tuple[str, bool]] = {}
        self._contents: dict[str, bytes] = {}  # resolved path -> bytes read, inside reading()
        self._paths: dict[str, Path] = {}  # node path -> host path (no lookup: kept always)
        # resolved path -> bytes, of every file read (None: no budget, as for HOST)
        self._read: dict[str, int] | None = {} if budget else None
        self._bytes_read = 0

    def __repr__(self) -> str:
        return f"Node({self._root!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @property
    def is_host(self) -> bool:
        """True when the root is ``/``: node paths are the machine's own paths."""
        return self._root == "/"

    @contextlib.contextmanager
    def reading(self) -> Iterator[Node]:
        """Remember what each path is (and where each link points) during a read-only pass.

        The pass (``doctor``, ``lint``) then sees each path as it was when first looked at, as a
        reader racing a writer may anyway; leaving the outermost ``with`` forgets it all, so the
        next command, or a write after the pass, looks afresh. Writers resolve with
        :meth:`writable`, which never uses the memory.
        """
        if self._seen is not None:
            yield self
            return
        self._seen = {}
        try:
            yield self
        finally:
            self._seen = None
            self._targets, self._resolved, self._contents = {}, {}, {}

    def path(self, node_path: PurePosixPath | str) -> Path:
        """The host path of an absolute node path (``/etc/cdi`` → ``<root>/etc/cdi``).

        Not yet resolved: what messages show. ``..`` stops at the root (``/../x`` is ``/x``). A
        relative path is the user's own and is returned as given.
        """
        text = os.fspath(node_path)
        found = self._paths.get(text)
        if found is None:
            if not text.startswith("/"):
                return Path(node_path)
            below = _below_root(text)
            found = self.root / below if below else self.root
            if len(self._paths) < _PATHS_KEPT:
                self._paths[text] = found
        return found

    def path_text(self, node_path: PurePosixPath | str) -> str:
        """:meth:`path` of an absolute node path as a string: for the many lookups of fixed
        paths (owner markers) that need no :class:`~pathlib.Path`."""
        text = os.fspath(node_path)
        if not text.startswith("/"):
            return text  # the user's own relative path, as :meth:`path` returns it
        below = _below_root(text)
        return self._prefix + below if below else self._root

    def named(self, value: str, *, option: str) -> str:
        """The host path of a file of this node the operator named (``--config PATH``, ``lint
        FILE``, ``--address unix:///PATH``'s path).

        On the machine itself, ``value`` as given. Under a root, the node path ``value`` inside
        the root (``/etc/containerd/config.toml`` is ``<root>/etc/containerd/config.toml``), or
        ``value`` itself when it already lies inside the root; a relative path outside the root
        names no file of the node and is refused (:class:`UsageError`, exit 2): a run on a tree
        never reads nor writes the machine's own file of the same name.
        """
        if self.is_host:
            return value
        absolute = os.path.abspath(value)
        if self._contains(absolute):
            return absolute
        if value.startswith("/"):
            return str(self.path(value))
        raise UsageError(f"{option} {value}: under --root {self._root}, give the node path "
                         f"(absolute, such as /etc/containerd/config.toml) or a path inside "
                         f"{self._root}")

    def node_path(self, host_path: Path | str) -> PurePosixPath | Path:
        """The node's own name for a host path below the root (``<root>/etc/x`` → ``/etc/x``),
        the inverse of :meth:`path`; a path outside the root, or on the host, as given."""
        absolute = Path(os.path.abspath(host_path))
        if self.is_host or not self.contains(absolute):
            return Path(host_path)
        return PurePosixPath("/") / absolute.relative_to(self.root)

    def check_root(self) -> None:
        """Refuse a root that exists but is not a folder (a file given as ``--root``)."""
        if self.root.exists() and not self.root.is_dir():
            raise InputError(self.root, "--root is not a folder")

    def contains(self, host_path: Path | str) -> bool:
        """True when ``host_path`` lies below the root (lexically, before links are followed)."""
        return self._contains(_absolute(host_path))

    def _contains(self, absolute: str) -> bool:
        return self._host or absolute == self._root or absolute.startswith(self._prefix)

    def resolve(self, host_path: Path | str) -> Path:
        """The host path of the file ``host_path`` names, every link followed inside the root.

        Missing parts are kept as named (the file may be about to be created). A host path
        outside the root is resolved as the operating system would (it is the user's own).
        """
        return Path(self._real(host_path))

    def _real(self, host_path: Path | str) -> str:
        """:meth:`resolve` as a string, for the calls gpuready makes with it."""
        return self._resolve(_absolute(host_path))[0]

    def writable(self, host_path: Path | str) -> Path:
        """The resolved path to write ``host_path`` at (links followed inside the root).

        Looked up afresh even inside :meth:`reading`. A file named outside the root is written
        where it was named: the root confines node paths and the links met on the way, not the
        files a user names explicitly.
        """
        return Path(self._resolve(os.path.abspath(host_path), fresh=True)[0])

    def anchor(self, host_path: Path | str) -> tuple[str, PurePosixPath]:
        """Where a writer starts walking to the resolved ``host_path`` (see
        :mod:`gpuready.atfile`), and the parts it walks from there: the root for a path inside
        it (the root itself is taken as the user named it), ``/`` for the live node and for a
        file named outside the root."""
        absolute = os.path.abspath(host_path)
        if self._host or not self._contains(absolute):
            return "/", PurePosixPath(absolute[1:])
        return self._root, PurePosixPath(absolute[len(self._prefix):] if absolute != self._root
                                         else "")

    def _resolve(self, absolute: str, *, fresh: bool = False) -> tuple[str, bool]:
        """The resolved form of an absolute host path, and True when a part of it is missing
        (then nothing below that part exists either)."""
        remembered = None if fresh or self._seen is None else self._resolved
        if remembered is not None:
            found = remembered.get(absolute)  # only paths below the root are remembered
            if found is not None:
                return found
        if not self._contains(absolute):
            return os.path.realpath(absolute), False
        if absolute == self._root:
            return absolute, False
        if remembered is None:
            return self._walk(absolute[len(self._prefix):].split("/"), absolute, fresh=fresh)
        found = self._below_known(absolute, remembered) or self._walk(
            absolute[len(self._prefix):].split("/"), absolute, fresh=False)
        remembered[absolute] = found
        return found

    def _below_known(self, absolute: str, remembered: dict[str, tuple[str, bool]]
                     ) -> tuple[str, bool] | None:
        """:meth:`_resolve` of ``absolute`` from the nearest folder above it whose resolution is
        remembered (or the root), when no part below that folder is a link: the walk from the
        root would take the same steps. Each folder on the way is remembered too. None when a
        part is a link (or odd): the walk decides."""
        names: list[str] = []
        folder = absolute
        while True:
            folder, _, name = folder.rpartition("/")
            if name in ("", ".", ".."):
                return None
            names.append(name)
            if folder == self._root:
                real, missing = folder, False
                break
            known = remembered.get(folder)
            if known is not None:
                real, missing = known
                break
            if not folder.startswith(self._prefix):
                return None
        if missing:  # below a missing part nothing exists: the names are only appended
            return real.rstrip("/") + "/" + "/".join(reversed(names)), True
        for name in reversed(names):
            candidate = real.rstrip("/") + "/" + name
            if not missing:
                found = self._lstat(candidate)
                if found is not None and stat.S_ISLNK(found.st_mode):
                    return None
                missing = found is None
            real = candidate
            folder = folder.rstrip("/") + "/" + name
            remembered[folder] = (real, missing)
        return real, missing

    def _walk(self, parts: list[str], shown: str, *, fresh: bool) -> tuple[str, bool]:
        # chroot semantics: an absolute link target restarts at the root, ".." stops there.
        # folders[i] is the host path of the first i resolved parts (folders[0]: the root).
        folders = [self._root]
        missing: int | None = None  # index in folders of the first part that does not exist
        pending = list(reversed(parts))
        links = 0
        # Inside reading(), until a link is followed each folder reached is the written prefix
        # of the path, resolved: remembered for the paths below it that are asked next.
        remember = None if fresh or self._seen is None else self._resolved
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if len(folders) > 1:
                    folders.pop()
                    if missing is not None and missing >= len(folders):
                        missing = None
                continue
            candidate = folders[-1].rstrip("/") + "/" + part
            if missing is not None:
                folders.append(candidate)  # below a missing part nothing exists: no lookup
                if remember is not None and not links:
                    remember[candidate] = (candidate, True)
                continue
            found = self._lstat(candidate, fresh=fresh)
            if found is None or not stat.S_ISLNK(found.st_mode):
                folders.append(candidate)
                if found is None:  # missing (or below a file): nothing more to follow
                    missing = len(folders) - 1
                if remember is not None and not links:
                    remember[candidate] = (candidate, missing is not None)
                continue
            links += 1
            if links > MAX_LINKS:
                raise InputError(shown, "too many levels of symbolic links")
            try:
                target = self._readlink(candidate, fresh=fresh)
            except OSError:  # no link any more: it was swapped between the lstat and now
                raise InputError(candidate, "changed while gpuready looked at it (a symbolic "
                                 "link that went away); nothing written, run again") from None
            if target.startswith("/"):
                folders, missing = [self._root], None
            pending.extend(reversed(target.split("/")))
        return folders[-1], missing is not None

    def _lstat(self, path: str, *, fresh: bool = False) -> os.stat_result | None:
        """``os.lstat`` of a host path (None when it cannot be looked at), remembered inside
        :meth:`reading`."""
        seen = None if fresh else self._seen
        if seen is not None and path in seen:
            return seen[path]
        try:
            found = os.lstat(path)
        except OSError:
            found = None
        if seen is not None:
            seen[path] = found
        return found

    def _readlink(self, path: str, *, fresh: bool) -> str:
        if fresh or self._seen is None:
            return os.readlink(path)
        target = self._targets.get(path)
        if target is None:
            target = self._targets[path] = os.readlink(path)
        return target

    # -- facts: existence and kinds (never raise for a missing path) --------------------------

    def lstat(self, host_path: Path | str) -> os.stat_result | None:
        """``lstat`` of the resolved path, or None when it does not exist or cannot be looked at."""
        try:
            real, missing = self._resolve(_absolute(host_path))
        except InputError:
            return None
        return None if missing else self._lstat(real)

    def _unfollowed(self, host_path: Path | str) -> os.stat_result | None:
        """``lstat`` of the path itself: its folder resolved, its last part not followed."""
        absolute = _absolute(host_path)
        folder, _, name = absolute.rpartition("/")
        if not name:  # the file system's root itself
            return self._lstat(absolute)
        folder = folder or "/"
        try:
            parent, missing = (self._resolve(folder) if self._contains(absolute)
                               else (folder, False))
        except InputError:
            return None
        return None if missing else self._lstat(parent.rstrip("/") + "/" + name)

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
        return self.is_file(host_path) and os.access(self._real(host_path), os.X_OK)

    def listdir(self, host_path: Path | str) -> list[str]:
        """The names in a folder, sorted; raises ``OSError`` as ``os.listdir`` does."""
        return sorted(os.listdir(self._real(host_path)))

    def readlink_name(self, host_path: Path | str) -> str | None:
        """The last part of a link's target (the link is read, not followed); None if no link."""
        absolute = os.path.abspath(host_path)
        folder, name = os.path.split(absolute)
        parent = self._resolve(folder)[0] if self._contains(absolute) else folder
        try:
            return PurePosixPath(os.readlink(os.path.join(parent, name))).name
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

    # -- trust: gpuready's own files, checked before it acts on them -----------------------------

    def require_trusted(self, host_path: Path | str, *, what: str) -> None:
        """Refuse a file gpuready acts on (a record, a backup, a journal, an intent record) that
        someone else could have written; nothing happens when there is no such file.

        It must be a regular file (links followed inside the root) owned by the effective user
        and writable by no group and no one else: gpuready restores, removes and regenerates
        what such a file says, as root, so a file another user could have put there or changed
        would turn gpuready's rights against the node. Raises :class:`InputError` (exit 2) with
        the owner and mode found and the fix, before anything is touched.
        """
        if not self.lexists(host_path):
            return
        found = self.lstat(host_path)
        if found is None or not stat.S_ISREG(found.st_mode):
            raise InputError(host_path, f"the {what} is not a regular file: gpuready does not "
                             "act on it; refused, nothing touched; fix: remove it")
        wrong = untrusted_reason(found)
        if wrong:
            raise InputError(host_path, f"the {what} {wrong}: gpuready does not act on a file "
                             "another user could have written; refused, nothing touched; fix: "
                             f"if its content is yours, chown {os.geteuid()} {host_path} && "
                             f"chmod go-w {host_path}, else remove it")

    # -- reads ----------------------------------------------------------------------------------

    def read_bytes(self, host_path: Path | str, *, kind: FileKind) -> bytes:
        """The bytes of a regular file no larger than ``kind``'s limit; else :class:`InputError`.

        Every file this view reads counts against one budget, :data:`MAX_NODE_FILES` files and
        :data:`MAX_NODE_BYTES` bytes in all (a file read again counts once): the read that would
        pass it is refused before the file is opened.

        A FIFO, device or socket is refused before it is opened; the descriptor is checked again
        after opening (``O_NOFOLLOW``, ``O_NONBLOCK``: a file swapped for a link or a FIFO meanwhile
        neither escapes nor blocks), and at most limit + 1 bytes are ever read.

        Inside :meth:`reading` a file is read once: asked again (an owner marker, then the
        config), it gives the bytes first read, checked against ``kind``'s limit. Those bytes are
        within the node's budget, so what is kept is bounded by it.
        """
        real = self._real(host_path)
        kept = self._contents.get(real) if self._seen is not None else None
        if kept is not None:
            _require_size(len(kept), kind, host_path)
            self._charge(real, len(kept), kind, host_path)
            return kept
        try:
            before = os.lstat(real)
        except FileNotFoundError:
            raise MissingFileError(host_path, self.missing_reason(host_path, kind)) from None
        except OSError as error:
            raise InputError(host_path, _reason(error)) from None
        _require_regular(before, host_path)
        _require_size(before.st_size, kind, host_path)
        self._charge(real, before.st_size, kind, host_path)
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
        self._charge(real, len(data), kind, host_path)
        if self._seen is not None and self._read is not None and (
                kind is not FileKind.PACKAGE_DATABASE):  # within the budget: bounded
            self._contents[real] = data
        return data

    def missing_reason(self, host_path: Path | str, kind: FileKind) -> str:
        """Why a missing file matters: for containerd's main config, what containerd runs
        without one and which command writes it."""
        from gpuready.paths import CONTAINERD_CONFIG

        root = "" if self.is_host else f" --root {self.root}"
        if kind is FileKind.CONFIG and self.node_path(host_path) == CONTAINERD_CONFIG:
            return ("no such file: without it containerd runs its built-in defaults ('containerd "
                    "config default' prints them), which register no NVIDIA runtime; "
                    f"'gpuready setup{root}' writes it")
        if kind is FileKind.DOCKER_CONFIG and self._is_daemon_json(host_path):
            return ("no such file: without it dockerd runs its defaults, which register no NVIDIA "
                    f"runtime; 'gpuready setup --engine docker{root}' writes it")
        return "no such file"

    def _is_daemon_json(self, host_path: Path | str) -> bool:
        from gpuready.engines.docker.facts import DAEMON_JSON

        return self.node_path(host_path) == DAEMON_JSON

    def _charge(self, real: str, size: int, kind: FileKind, shown: Path | str) -> None:
        """Count a file of ``size`` bytes against the budget, or refuse it when it would pass."""
        if self._read is None or kind is FileKind.PACKAGE_DATABASE:
            return  # the package database is one fixed file, bounded by its own limit
        known = self._read.get(real)
        if known is None and len(self._read) >= MAX_NODE_FILES:
            raise InputError(shown, f"one file more than the {MAX_NODE_FILES} files gpuready "
                             "reads from one node (imports, globs, CDI specs); refused")
        total = self._bytes_read - (known or 0) + size
        if total > MAX_NODE_BYTES:
            raise InputError(shown, f"reading it passes the {MAX_NODE_BYTES // _MIB} MiB "
                             "gpuready reads from one node (imports, globs, CDI specs); refused")
        self._read[real], self._bytes_read = size, total

    def read_text(self, host_path: Path | str, *, kind: FileKind) -> str:
        """The file's UTF-8 text (see :meth:`read_bytes`; binary or non-UTF-8 text is refused)."""
        return decode(self.read_bytes(host_path, kind=kind), host_path)

    def read_text_or_none(self, host_path: Path | str, *, kind: FileKind) -> str | None:
        """The file's text, or None when nothing exists at the path."""
        if not self.exists(host_path):
            return None
        return self.read_text(host_path, kind=kind)


HOST = Node("/", budget=False)  # the files a user names: each bounded by its own limit


def untrusted_reason(found: os.stat_result) -> str | None:
    """Why a file with this ``stat`` is not one gpuready may act on (owned by another user, or
    writable by its group or others), in words with the uid and mode; None when it may."""
    me = os.geteuid()
    mode = stat.S_IMODE(found.st_mode)
    if found.st_uid != me:
        return f"is owned by uid {found.st_uid}, not by uid {me} that runs gpuready"
    if mode & 0o022:
        who = "its group and others" if mode & 0o022 == 0o022 else (
            "its group" if mode & 0o020 else "others")
        return f"has mode {mode:04o}: {who} may write it"
    return None


def _absolute(host_path: Path | str) -> str:
    """``os.path.abspath`` of a host path, without the work for one that is already absolute and
    normal (no empty, ``.`` or ``..`` part, no trailing ``/``): most paths asked about are."""
    text = os.fspath(host_path)
    if (text[:1] == "/" and "//" not in text and "/." not in text
            and (text[-1:] != "/" or text == "/")):
        return text
    return os.path.abspath(text)


@functools.lru_cache(maxsize=1024)
def _below_root(node_path: str) -> str:
    """An absolute node path relative to the root, normalised (``..`` stops at the root)."""
    return "/".join(PurePosixPath(posixpath.normpath(node_path)).parts[1:])


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
