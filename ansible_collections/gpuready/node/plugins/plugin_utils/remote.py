# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""A node seen from the controller: read its files, and write them without following a link.

Reads are ``ansible.builtin`` modules (``stat``, ``slurp``, ``find``); every write, new folder
and removal is the collection's own ``gpuready.node.node_file``, which walks from the root folder
by folder without following a link, as gpuready's writer does on the command line. Both need
nothing on the node but the Python its OS ships. gpuready itself runs only here, on the
controller. Errors are gpuready's own (:class:`gpuready.errors.InputError`,
:class:`gpuready.errors.WriteError`), so an action plugin turns all of them into one failed-host
message the way the command line does.
"""

from __future__ import annotations

import base64
import contextlib
import posixpath
from dataclasses import dataclass

from gpuready.errors import InputError, WriteError
from gpuready.node import FileKind
from gpuready.textfile import decode

# The largest file gpuready reads of any kind; anything bigger is refused before it crosses the
# wire (the copy is then held to the limit of its own kind, as on a local node).
MAX_FILE_BYTES = max(kind.limit for kind in FileKind)
# The most files one folder may contribute to a node's copy (hostile input: bound the work).
MAX_FILES_PER_FOLDER = 256
NODE_FILE = "gpuready.node.node_file"


@dataclass(frozen=True)
class RemoteFile:
    """A file as read from the node: its node path, exact text, SHA-1 and permission bits."""

    path: str
    text: str
    checksum: str
    mode: str


def node_path(root: str, path: str) -> str:
    """``path`` looked up under ``root`` on the node, as ``--root`` does on the command line."""
    if not posixpath.isabs(path):
        return path
    return posixpath.join(root, path.lstrip("/")) if root not in ("", "/") else path


class RemoteNode:
    """The node an action plugin's task runs against."""

    def __init__(self, action, task_vars: dict, *, root: str = "/") -> None:
        self._action = action
        self._task_vars = task_vars
        self.root = root

    def module(self, name: str, **args) -> dict:
        """Run an ``ansible.builtin`` module on the node; a failure raises :class:`InputError`."""
        result = self._action._execute_module(
            module_name=f"ansible.legacy.{name}", module_args=args, task_vars=self._task_vars
        )
        if result.get("failed"):
            where = args.get("path") or args.get("src") or args.get("dest") or name
            raise InputError(where, str(result.get("msg") or f"{name} failed on the node"))
        return result

    def module_named(self, name: str, **args) -> dict:
        """Run any module on the node, check mode or not (those it is used for change nothing
        the task manages); its result, failed or not."""
        with self.acting():
            return self._action._execute_module(module_name=name, module_args=args,
                                                task_vars=self._task_vars)

    @contextlib.contextmanager
    def acting(self):
        """Run modules for real while inside, even in check mode: for reading commands and for
        gpuready's own temporary files on the node, never for the files the task manages."""
        task = self._action._task
        check_mode = task.check_mode
        task.check_mode = False
        try:
            yield
        finally:
            task.check_mode = check_mode

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        """Run a command on the node: its exit code, standard output and standard error (a
        command that could not be started: 127 and the reason)."""
        result = self.module_named("ansible.legacy.command", argv=argv)
        code = result.get("rc")
        if code is None:
            return 127, "", str(result.get("msg") or "could not run")
        return code, result.get("stdout", ""), result.get("stderr") or (
            str(result.get("msg", "")) if result.get("failed") and code != 0 else "")

    def temporary_folder(self) -> str:
        """A new temporary folder on the node (remove it with :meth:`remove_folder`)."""
        with self.acting():
            return self.module("tempfile", state="directory", prefix="gpuready-")["path"]

    def remove_folder(self, path: str) -> None:
        """Remove a temporary folder and everything in it."""
        with self.acting():
            self.module("file", path=path, state="absent")

    def put(self, path: str, text: str) -> None:
        """Write a file into a temporary folder of :meth:`temporary_folder` (folders made)."""
        with self.acting():
            self.make_folder(posixpath.dirname(path))
            self.write(path, text, mode="0600")

    def ask(self, argv: list[str]) -> str | None:
        """The output of a command that only reads (``containerd --version``), check mode or not;
        None when it fails or is not there."""
        try:
            with self.acting():  # it changes nothing, and check mode must still see the answer
                answer = self.module("command", argv=argv)
        except InputError:
            return None
        return answer.get("stdout", "")

    def stat(self, path: str) -> dict:
        """The ``stat`` module's answer for ``path`` (``exists`` False when it is absent)."""
        return self.module(
            "stat", path=path, follow=True, get_checksum=True, checksum_algorithm="sha1",
            get_mime=False, get_attributes=False,
        )["stat"]

    def read(self, path: str) -> RemoteFile | None:
        """The file's text, or None when it does not exist; refuses all but a small text file."""
        status = self.stat(path)
        return self._slurp(path, status) if status["exists"] else None

    def _slurp(self, path: str, status: dict) -> RemoteFile:
        """Read a file whose ``stat`` (or ``find``) entry is ``status``, if it may be read."""
        if status.get("isdir"):
            raise InputError(path, "is a directory, not a file")
        if not status.get("isreg"):
            raise InputError(path, "is not a regular file")
        if status["size"] > MAX_FILE_BYTES:
            raise InputError(
                path, f"{status['size']} bytes, more than the {MAX_FILE_BYTES} gpuready reads"
            )
        content = self.module("slurp", src=path)["content"]
        raw = base64.b64decode(content)
        return RemoteFile(path, decode(raw, path), status["checksum"], status["mode"])

    def read_many(self, paths: list[str]) -> dict[str, RemoteFile | None]:
        """Several files at once: one ``find`` says which exist (size, mode, SHA-1), then each
        existing one is read. A link is read through, as :meth:`read` does."""
        folders = sorted({posixpath.dirname(path) for path in paths})
        names = sorted({posixpath.basename(path) for path in paths})
        found = self.module(
            "find", paths=folders, patterns=names, file_type="any", hidden=True, recurse=False,
            get_checksum=True, checksum_algorithm="sha1",
        )["files"]
        entries = {entry["path"]: entry for entry in found}
        return {path: self._read_entry(path, entries.get(path)) for path in paths}

    def _read_entry(self, path: str, entry: dict | None) -> RemoteFile | None:
        if entry is None:
            return None
        if entry.get("islnk"):
            return self.read(path)
        return self._slurp(path, entry)

    def find(self, folders: list[str], *, patterns: str = "*", file_type: str = "file",
             use_regex: bool = False) -> list[str]:
        """The files directly in ``folders`` (none from a folder that does not exist), at most a
        bounded few."""
        found = self.module(
            "find", paths=folders, recurse=False, file_type=file_type, hidden=True,
            patterns=patterns, use_regex=use_regex, follow=False,
        )["files"]  # a missing folder is only a warning, and this result is not shown
        if len(found) > MAX_FILES_PER_FOLDER * len(folders):
            raise InputError(", ".join(folders),
                             f"{len(found)} files, more than gpuready reads from them")
        return sorted(item["path"] for item in found)

    def replace(self, original: RemoteFile, text: str) -> None:
        """Write ``text`` over ``original``'s file, keeping the first backup gpuready made.

        Refused when the file's SHA-1 is no longer the one read (someone changed it since the
        plan was made); ``FILE.gpuready.bak`` is made only when no backup exists yet, so it keeps
        the file as it was before gpuready first changed it, as the command line does.
        """
        self.write(original.path, text, checksum=original.checksum, backup=True)

    def write(self, path: str, text: str, *, checksum: str | None = None,
              exclusive: bool = False, mode: str | None = None, backup: bool = False) -> dict:
        """Write ``text`` at ``path`` with ``gpuready.node.node_file``: over the file read
        (``checksum``: refused when it changed since), as a new file (``exclusive``, with
        ``mode``), or over whatever is there. No link, even one swapped in meanwhile, takes the
        write out of the root."""
        args = dict(content=base64.b64encode(text.encode("utf-8")).decode("ascii"),
                    exclusive=exclusive, backup=backup)
        if checksum is not None:
            args["checksum"] = checksum
        if mode is not None:
            args["mode"] = mode
        return self.node_file(path, state="file", **args)

    def make_folder(self, path: str) -> None:
        """Make the folder ``path`` and those above it, inside the root (``mkdir -p``)."""
        self.node_file(path, state="directory")

    def remove(self, target: RemoteFile | str) -> None:
        """Remove a file (or an empty folder) from the node; a file that was read (a
        :class:`RemoteFile`) only while its SHA-1 is still the one read (someone may have
        changed it since the plan was made)."""
        if isinstance(target, RemoteFile):
            self.node_file(target.path, state="absent", checksum=target.checksum)
        else:
            self.node_file(target, state="absent")

    def node_file(self, path: str, **args) -> dict:
        """Run ``gpuready.node.node_file`` on ``path`` (a node path under the root, as
        :func:`node_path` makes it; one outside the root, such as a temporary folder, is looked
        up under ``/``). A failure raises :class:`WriteError` with the module's one line."""
        root, below = self._anchor(path)
        result = self._action._execute_module(
            module_name=NODE_FILE, module_args=dict(args, root=root, path=below),
            task_vars=self._task_vars)
        if result.get("failed"):
            raise WriteError(" ".join(str(result.get("msg") or f"{path}: not written").split()))
        return result

    def _anchor(self, path: str) -> tuple[str, str]:
        """The root ``path`` is looked up under, and its node path there."""
        prefix = self.root.rstrip("/") + "/"
        if self.root in ("", "/") or not path.startswith(prefix):
            return "/", path
        return self.root, "/" + path[len(prefix):]
