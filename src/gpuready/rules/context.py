"""What rules look at: one file, the configuration containerd uses, or the whole node.

One file as read (:class:`FileContext`, with its :class:`Options`) lives below the rules, in
:mod:`gpuready.containerd.files`, since the effective model reads the node's files through it;
it is imported here for the rules.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuready.containerd import facts
from gpuready.containerd.files import FileContext, Options
from gpuready.containerd.semantics import Semantics
from gpuready.containerd.versions import ConfigVersion, KeyPath
from gpuready.problems import Problem, Severity
from gpuready.records import Record


class ConfigContext:
    """The configuration containerd uses: one file's data, or the main file and its imports merged.

    ``files`` are in load order (main first); a problem about a key is reported in the last file
    that sets it, since that is the one whose value wins.
    """

    def __init__(self, data: dict[str, Any], spec: ConfigVersion, semantics: Semantics,
                 options: Options, files: list[FileContext], *,
                 kubelet_cgroup_driver: str | None = None, kubelet_file: str | None = None,
                 systemd: Any = None) -> None:
        self.data = data
        self.spec = spec
        self.semantics = semantics
        self.options = options
        self.files = files
        self.kubelet_cgroup_driver = kubelet_cgroup_driver
        self.kubelet_file = kubelet_file
        # whether systemd runs (gpuready.init_system.SystemdFact); None: the node is not judged
        # (lint FILE checks a file, not a node)
        self.systemd = systemd

    @property
    def main(self) -> FileContext:
        """The file containerd was started with."""
        return self.files[0]

    def origin(self, key_path: KeyPath) -> FileContext:
        """The file whose value for ``key_path`` wins (else the nearest one that has its table)."""
        for cut in range(len(key_path), 0, -1):
            for file in reversed(self.files):
                if file.data is not None and facts.lookup(file.data, key_path[:cut]) is not None:
                    return file
        return self.main

    def report(self, rule: Any, message: str, key_path: KeyPath = (), **details: Any) -> Problem:
        """A problem of ``rule`` at ``key_path``, placed in the file that set it."""
        return self.origin(tuple(key_path)).report(rule, message, key_path, **details)

    def runtimes(self) -> dict[str, Mapping[str, Any]]:
        """The runtime handlers registered in the table containerd reads."""
        return facts.runtimes(self.data, self.spec)

    @functools.cached_property
    def loaded(self):
        """What the node's containerd line loads from these files over its own defaults
        (:class:`gpuready.containerd.model.Loaded`): the verdict every command shares."""
        from gpuready.containerd.lines import from_config_version
        from gpuready.containerd.model import build

        line = self.semantics.line or from_config_version(self.spec.number)
        return build([(file.path, file.data) for file in self.files if file.data is not None],
                     line)


class RuntimeClassDocument(Record):
    """One RuntimeClass as read, with the text of its file (to find the ``handler:`` line)."""

    name: object
    handler: object
    file: str
    line: int
    text: str


class NodeContext:
    """Everything ``doctor`` gathered from a node besides the merged config."""

    def __init__(self, options: Options, config: ConfigContext | None,
                 files: list[FileContext], *,
                 missing_imports: list[tuple[FileContext, str]] | None = None,
                 replaced_tables: list[tuple[FileContext, str, list[str]]] | None = None,
                 runtime_classes: list[RuntimeClassDocument] | None = None,
                 cdi_dirs: list[Path] | None = None, ownership: Any = None) -> None:
        self.options = options
        self.config = config
        self.files = files
        self.missing_imports = missing_imports or []
        self.replaced_tables = replaced_tables or []
        self.runtime_classes = runtime_classes or []
        self.cdi_dirs = cdi_dirs or []
        self.ownership = ownership  # gpuready.owners.state.OwnerState: who owns containerd here
        self._cdi_scan: Any = None

    def display(self, path: Path) -> str:
        """How a node path is shown in problems."""
        return str(path)

    def cdi_scan(self):
        """The CDI specs and devices a runtime would load from ``cdi_dirs`` (read once)."""
        if self._cdi_scan is None:
            from gpuready.cdi.present import spec_files_exist

            if not spec_files_exist(self.options.node, self.cdi_dirs):
                self._cdi_scan = NoSpecs()  # nothing to read: the spec reader is not loaded
            else:
                from gpuready.cdi.validate import scan

                self._cdi_scan = scan(self.cdi_dirs, missing_ok=True, node=self.options.node)
        return self._cdi_scan


class NoSpecs:
    """The scan of CDI directories that hold no spec file (as :class:`gpuready.cdi.validate.Scan`
    reads, without loading it)."""

    def __init__(self) -> None:
        self.specs: list[Any] = []
        self.devices: dict[str, Any] = {}
        self.unreadable: list[Any] = []

    @property
    def problems(self) -> list[Any]:
        """No file, no problem."""
        return []


def plain_problem(
    rule: Any,
    message: str,
    *,
    file: str,
    line: int | None = None,
    column: int | None = None,
    key_path: str = "",
    fix: str = "",
    severity: Severity | None = None,
) -> Problem:
    """A problem in a file that is not a containerd config (a manifest, a CDI spec, a folder)."""
    return Problem(
        rule=rule.name,
        severity=severity or rule.severity,
        message=message,
        file=file,
        key_path=key_path,
        line=line,
        column=column,
        fix=fix,
    )
