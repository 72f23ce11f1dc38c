# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Copy the files ``gpuready doctor`` reads from a node into a temporary root on the controller.

Only what doctor reads crosses the wire: the main containerd config and the files its
``imports`` name (followed as containerd follows them), the CDI specs, the kubelet's config and
the toolkit's RuntimeClass. Runtime executables are not copied: an empty stand-in with the node's
permission bits records that the file exists there and whether it is executable, which is all
doctor asks of it.
"""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import Path, PurePosixPath

from ansible_collections.gpuready.node.plugins.plugin_utils.remote import (
    RemoteFile,
    RemoteNode,
    node_path,
)
from gpuready.containerd import facts
from gpuready.containerd.document import parse_toml
from gpuready.errors import InputError
from gpuready.paths import (
    CDI_DIRS,
    CDI_SPEC,
    CONTAINERD_CONFIG,
    FIXTURE_BASE,
    KUBELET_CONFIG,
    TOOLKIT_DIR,
)

RUNTIMECLASS = TOOLKIT_DIR / "runtimeclass.yaml"
TOOLKIT_FILES = ("default.txt", "parsed.txt", "cdi-keys.txt", "runtimeclass.yaml", "report.txt")
NEW_FILE_MODE = "0644"
NODE_DEFAULT = "node-containerd-config-default.toml"
SHIPPED = "gpuready-built-in-base.toml"
EXTRA_BASES = {
    NODE_DEFAULT: "base: `containerd config default` on the node",
    SHIPPED: "base: gpuready's built-in base (config version 2)",
}
# the specs, and the intent records gpuready keeps beside its own (what a refresh regenerates from)
CDI_PATTERNS = "*.yaml,*.json,*.gpuready.intent"
BINARY_KEYS = ("BinaryName", "runtime_path")
MAX_IMPORTED_FILES = 64


class Mirror:
    """A local copy of one node's files below ``local/node``, node paths kept."""

    def __init__(self, node: RemoteNode, *, root: str, local: Path) -> None:
        self.node = node
        self.root = root
        self.local = local / "node"
        self.extra = local / "extra"
        self.files: dict[str, RemoteFile] = {}
        self.absent: set[str] = set()  # node paths known not to exist
        self.folders: set[str] = set()  # node folders known to exist

    def node_file(self, local_path: str) -> str:
        """The node path (under the node's root) of a path inside the local copy."""
        relative = Path(local_path).relative_to(self.local)
        return node_path(self.root, "/" + relative.as_posix())

    def shown(self, text: str) -> str:
        """``text`` with local paths replaced by what they stand for on the node."""
        for name, phrase in EXTRA_BASES.items():
            text = text.replace(f"--base {self.extra / name}", phrase)
        return text.replace(str(self.local), self.root.rstrip("/"))

    def take(self, path: str) -> str | None:
        """Copy one node path (absolute, without the root); its text, or None when absent."""
        remote = node_path(self.root, path)
        if remote in self.absent:
            return None
        if remote in self.files:  # copied already
            return self.files[remote].text
        return self._keep(path, self.node.read(node_path(self.root, path)))

    def take_many(self, paths: list[str]) -> None:
        """Copy several node paths, asking the node once which of them exist."""
        if not paths:
            return
        found = self.node.read_many([node_path(self.root, path) for path in paths])
        for path in paths:
            self._keep(path, found[node_path(self.root, path)])

    def _keep(self, path: str, found: RemoteFile | None) -> str | None:
        if found is None:
            self.absent.add(node_path(self.root, path))
            return None
        target = self.local / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(found.text.encode("utf-8"))
        self.files[found.path] = found
        return found.text

    def take_parents(self, path: str) -> None:
        """Give the copy every folder above the node path ``path`` that the node has, and none
        it lacks, so that gpuready records the folders a write there creates as it does on the
        command line. Asks the node from the deepest folder up, until one exists."""
        folder = posixpath.dirname(path)
        while folder not in ("/", ""):
            status = self.node.stat(node_path(self.root, folder))
            if status["exists"]:
                if status.get("isdir"):
                    (self.local / folder.lstrip("/")).mkdir(parents=True, exist_ok=True)
                    self.folders.add(node_path(self.root, folder))
                return
            folder = posixpath.dirname(folder)

    def take_folders(self, folders: list[str], *, patterns: str) -> None:
        """Copy the files directly in node folders that match ``patterns``."""
        remote = self.node.find([node_path(self.root, folder) for folder in folders],
                                patterns=patterns)
        self.take_many(["/" + posixpath.relpath(path, node_path(self.root, "/"))
                        for path in remote])

    def take_node(self) -> None:
        """Everything doctor reads: the owner's markers, the config the owner makes containerd
        read and its imports, CDI specs, kubelet, RuntimeClass."""
        from gpuready.node import Node
        from gpuready.owners.detect import detect

        self.take_markers()
        config = str(detect(Node(self.local)).owner.config)
        self.take_many([config, str(KUBELET_CONFIG), str(RUNTIMECLASS)])
        texts = self.take_config_tree(config)
        self.take_folders([str(folder) for folder in CDI_DIRS], patterns=CDI_PATTERNS)
        for binary in sorted({b for text in texts for b in _binaries(text)}):
            self._stand_in(binary)

    def take_markers(self) -> None:
        """The files by which owner detection recognises k3s, RKE2, the GPU Operator and the
        rest: one ``find`` says which exist; a marker that must hold a text is copied, the others
        get an empty stand-in of the same kind (file or folder)."""
        from gpuready.owners.table import OWNERS

        markers = {str(m.path): m for owner in OWNERS for m in owner.markers}
        folders = sorted({posixpath.dirname(path) for path in markers})
        names = sorted({posixpath.basename(path) for path in markers})
        found = self.node.module(
            "find", paths=[node_path(self.root, f) for f in folders], patterns=names,
            file_type="any", hidden=True, recurse=False,
        )["files"]
        present = {"/" + posixpath.relpath(e["path"], node_path(self.root, "/")): e
                   for e in found}
        for path, marker in markers.items():
            entry = present.get(path)
            if entry is None:
                continue
            if marker.contains is not None and entry.get("isreg"):
                self.take(path)
            elif entry.get("isdir"):
                (self.local / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
            else:
                target = self.local / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()

    def take_setup_inputs(self, toolkit_dir: PurePosixPath) -> None:
        """Everything setup reads: config, the air-gap base, the CDI spec and its intent record,
        the toolkit's files."""
        from gpuready.cdi.intent import intent_path

        paths = [str(path) for path in (CONTAINERD_CONFIG, FIXTURE_BASE, CDI_SPEC,
                                        intent_path(CDI_SPEC))]
        self.take_many(paths + [str(toolkit_dir / name) for name in TOOLKIT_FILES])

    def base_for_setup(self) -> Path | None:
        """The base setup should start from when the node has neither a config nor the air-gap
        base: the node's own ``containerd config default``, else gpuready's built-in base.

        (Left to itself, setup would ask the controller's containerd, which is not the node's.)
        """
        if self.files.keys() & {node_path(self.root, str(p)) for p in (CONTAINERD_CONFIG,
                                                                       FIXTURE_BASE)}:
            return None
        from gpuready.containerd.base import shipped_base

        default = self.node.ask(["containerd", "config", "default"])
        name, text = (NODE_DEFAULT, default) if default else (SHIPPED, shipped_base())
        self.extra.mkdir(parents=True, exist_ok=True)
        (self.extra / name).write_text(text, encoding="utf-8")
        return self.extra / name

    def gpu_count(self) -> int | None:
        """How many ``/dev/nvidia<N>`` device nodes the node has (None for none)."""
        if node_path(self.root, str(CDI_SPEC)) in self.files:
            return None  # the node's spec is kept: no spec is generated
        found = self.node.find([node_path(self.root, "/dev")], patterns=r"nvidia[0-9]+",
                               file_type="any", use_regex=True)
        return len(found) or None

    def push(self, plan, *, backup: bool = True) -> None:
        """Write a plan's text to the node: over the file it was read from (keeping gpuready's
        backup of it unless ``backup`` is False), as a new file, or remove it (``after`` None)."""
        path = self.node_file(str(plan.path))
        original = self.files.get(path)
        if plan.after is None:
            self.node.remove(original or path)
            return
        if original is not None:
            self.node.write(path, plan.after, checksum=original.checksum, backup=backup)
            return
        folder = posixpath.dirname(path)
        if folder not in self.folders:
            self.node.make_folder(folder)
            self.folders.add(folder)
        self.node.write(path, plan.after, mode=NEW_FILE_MODE, exclusive=True)

    @staticmethod
    def runtimeclass_text(result) -> str | None:
        """The RuntimeClass manifest setup wrote (or would write)."""
        for plan in result.plans:
            if plan.path.name == RUNTIMECLASS.name:
                return plan.after
        return None

    def take_config_tree(self, main: str) -> list[str]:
        """The main config and, depth first, every file an ``imports`` entry names."""
        pending, seen, texts = [main], set(), []
        while pending and len(seen) < MAX_IMPORTED_FILES:
            path = pending.pop(0)
            if path in seen:
                continue
            seen.add(path)
            text = self.take(path)
            if text is None:
                continue
            texts.append(text)
            for entry in _imports(text):
                pending.extend(self._expand(entry, importer=path))
        return texts

    def _expand(self, entry: str, *, importer: str) -> list[str]:
        # containerd resolves a relative import against the importing file's folder.
        if entry.startswith("/"):
            path = entry
        else:
            path = posixpath.join(posixpath.dirname(importer), entry)
        folder, name = posixpath.split(posixpath.normpath(path))
        if not any(char in name for char in "*?["):
            return [path]
        remote = self.node.find([node_path(self.root, folder)], patterns=name)
        names = [posixpath.basename(item) for item in remote]
        return [posixpath.join(folder, item) for item in sorted(fnmatch.filter(names, name))]

    def _stand_in(self, binary: str) -> None:
        if not binary.startswith("/"):
            return
        status = self.node.stat(node_path(self.root, binary))
        if not status["exists"] or not status.get("isreg"):
            return
        target = self.local / binary.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"")
        target.chmod(int(status["mode"], 8))


def _parsed(text: str) -> dict:
    try:
        return parse_toml(text, "<node>")
    except InputError:
        return {}  # doctor reports the syntax error from the copy


def _imports(text: str) -> list[str]:
    return facts.imports(_parsed(text))


def _binaries(text: str) -> set[str]:
    found: set[str] = set()
    _walk(_parsed(text), found)
    return found


def _walk(value: object, found: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in BINARY_KEYS and isinstance(item, str):
                found.add(item)
            else:
                _walk(item, found)
