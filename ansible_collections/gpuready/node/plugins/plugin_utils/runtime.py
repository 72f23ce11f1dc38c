# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""The plans of ``containerd_runtime``, made on the controller from a copy of the node's files.

``state: present`` is ``gpuready configure --config FILE`` (with ``drop_in``, ``--drop-in
[PATH]``); ``state: absent`` is ``gpuready unconfigure``. The node's files are copied into a
temporary root (:class:`~.mirror.Mirror`), gpuready's own planners run there, and each plan is
turned back into node terms before anything crosses the wire:

- gpuready's record (``config.toml.gpuready.json``) names files by their host paths, which on the
  node are the paths under ``root``. Read from the node, those names are mapped into the copy so
  the planners find the files; written to the node, they are mapped back.
- any other path of the copy a planner writes into a text is written as the node's.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpuready.containerd.record import record_path
from gpuready.errors import InputError, UsageError
from gpuready.fsio import backup_path

# drop_in: true asks for gpuready's default drop-in, as ``--drop-in`` without a path does.
DEFAULT_DROP_IN_WORDS = ("true", "yes", "on")
NO_DROP_IN_WORDS = ("", "false", "no", "off")


@dataclass(frozen=True)
class Change:
    """Every file's plan for one host (the record's last), in the copy's paths."""

    plans: list
    config: Path

    @property
    def changed(self) -> bool:
        """True when any file would change."""
        return any(plan.changes for plan in self.plans)


class RuntimeChange:
    """Plan ``state`` on one node's copy, and write the plans back to the node."""

    def __init__(self, mirror, args: dict) -> None:
        self.mirror = mirror
        self.args = args
        config = args["config"]
        if not posixpath.isabs(config):
            raise UsageError(f"config {config!r}: give the node path (absolute)")
        self.config_node = config
        self.config = mirror.local / config.lstrip("/")
        # state: absent: the node folders gpuready created, to remove once empty (deepest first)
        self.created_folders: list[str] = []

    # -- reading ------------------------------------------------------------------------------

    def take_record(self) -> dict | None:
        """Copy gpuready's record of the config, its file names mapped into the copy; None when
        there is none, or when it cannot be read (gpuready's loader then says why, naming it)."""
        path = str(record_path(Path(self.config_node)))
        text = self.mirror.take(path)
        if text is None:
            return None
        try:
            record = json.loads(text)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        if record.get("format") != 1:  # node paths: the same names in the copy as on the node
            local = self.mirror.local / path.lstrip("/")
            local.write_text(text, encoding="utf-8")
            return record
        mapped = self._record_paths(record, self.to_local)
        local = self.mirror.local / path.lstrip("/")
        from gpuready.containerd.record import render_record

        local.write_text(render_record(mapped), encoding="utf-8")
        return mapped

    def has_record(self) -> bool:
        """True when the node has a record of the config (readable or not)."""
        return self.mirror.take(str(record_path(Path(self.config_node)))) is not None

    def _record_paths(self, record: dict, convert) -> dict:
        mapped = dict(record)
        if isinstance(record.get("config"), str):
            mapped["config"] = convert(record["config"])
        if isinstance(record.get("files"), dict):
            mapped["files"] = {convert(name): entry for name, entry in record["files"].items()}
        if isinstance(record.get("settings"), list):
            mapped["settings"] = [
                {**item, "file": convert(item["file"])}
                if isinstance(item, dict) and isinstance(item.get("file"), str) else item
                for item in record["settings"]
            ]
        return mapped

    def to_local(self, host_path: str) -> str:
        """The copy's path of a node file named as the record names it (under ``root``)."""
        root = self.mirror.root.rstrip("/")
        if root and not (host_path == root or host_path.startswith(root + "/")):
            raise InputError(str(record_path(Path(self.config_node))),
                             f"names {host_path}, which is not under root {self.mirror.root}")
        relative = host_path[len(root):] if root else host_path
        return str(self.mirror.local / relative.lstrip("/"))

    def to_node_text(self, text: str | None) -> str | None:
        """``text`` with the copy's paths written as the node's."""
        if text is None:
            return None
        return text.replace(str(self.mirror.local), self.mirror.root.rstrip("/"))

    # -- planning -----------------------------------------------------------------------------

    def plan(self, *, major: int, line=None) -> Change:
        """The plans for the task's ``state``; with ``line`` (the node's containerd line), they
        carry the never-break gate the write checks (:mod:`gpuready.containerd.gate`)."""
        if self.args["state"] == "absent":
            return self.plan_absent(major=major, line=line)
        return self.plan_present(major=major, line=line)

    def plan_present(self, *, major: int, line=None) -> Change:
        """Register the runtime in the config or in the drop-in; the record's plan last."""
        from gpuready.containerd.configure import ConfigureRequest, plan_configure
        from gpuready.containerd.document import load_config
        from gpuready.containerd.dropin import plan_drop_in
        from gpuready.containerd.register import CgroupMode, RuntimeRequest
        from gpuready.workflow.daytwo import configure_guard, plan_record

        if self.mirror.take(self.config_node) is None:
            raise InputError(self.mirror.node_file(str(self.config)), "no such file")
        self.take_record()
        node = self.node_config(major=major, line=line)
        request = ConfigureRequest(
            runtime=RuntimeRequest(
                name=self.args["runtime_name"],
                binary=self.args["binary"],
                systemd_cgroup=CgroupMode(self.args["systemd_cgroup"]),
            ),
            enable_cdi=self.args["enable_cdi"],
        )
        main = load_config(node.config, node=node.node)
        drop_in = self.drop_in()
        if drop_in is None:
            plans = [plan_configure(main, request)]
        else:
            self.mirror.take_config_tree(self.config_node)
            self.mirror.take(drop_in.entry)
            self.mirror.take_parents(drop_in.entry)  # which folders a new drop-in creates
            plans = plan_drop_in(main, drop_in, request, root=node.root, major=major)
        guard = configure_guard(node, request)
        if guard is not None:  # what the node's line loads: every file it imports, copied
            from gpuready.containerd.keep_default import keep_default_runtime

            self.mirror.take_config_tree(self.config_node)
            plans = keep_default_runtime(plans, guard, beside=request.runtime.name)
        # The node's names in the texts first: the record keeps the SHA-256 of what is written.
        plans = [plan._replace(before=self.to_node_text(plan.before),
                               after=self.to_node_text(plan.after)) for plan in plans]
        record = plan_record(node, plans, request=request, drop_in=drop_in,
                             folders=drop_in is not None)
        return Change([*plans, record], self.config)

    def plan_absent(self, *, major: int, line=None) -> Change:
        """Take back what the record says gpuready added (no plans: nothing recorded)."""
        from gpuready.workflow.daytwo import folders_to_remove, plan_unconfigure_node

        record = self.take_record()
        if record is None and not self.has_record():
            return Change([], self.config)  # nothing recorded: nothing to take back
        files = record.get("files") if record and isinstance(record.get("files"), dict) else {}
        node_paths = []
        for local in files:
            if record.get("format") != 1:  # node paths (gpuready's loader checks each)
                if not (isinstance(local, str) and local.startswith("/")):
                    continue
                path = local
            else:
                path = "/" + Path(local).relative_to(self.mirror.local).as_posix()
            node_paths += [path, str(backup_path(Path(path)))]
        self.mirror.take_many(node_paths)
        if line is not None:
            self.mirror.take_config_tree(self.config_node)
        node = self.node_config(major=major, line=line)
        plans = plan_unconfigure_node(node)  # the record checked: its folders too
        self.created_folders = [self.mirror.node_file(str(folder))
                                for folder in folders_to_remove(plans, node=node)]
        return Change(plans, self.config)

    def node_config(self, *, major: int, line=None):
        """The copy as gpuready's day-two planners see a node."""
        from gpuready.workflow.daytwo import NodeConfig

        return NodeConfig(config=self.config, root=self.mirror.local, major=major, line=line)

    def drop_in(self):
        """The drop-in ``drop_in`` names in the copy, or None to register in the config."""
        from gpuready.containerd.dropin import drop_in_target

        value = (self.args.get("drop_in") or "").strip()
        if value.lower() in NO_DROP_IN_WORDS:
            return None
        if value.lower() in DEFAULT_DROP_IN_WORDS:
            return drop_in_target(None, root=self.mirror.local)
        if not PurePosixPath(value).is_absolute():
            raise UsageError(f"drop_in {value!r}: give the node path (absolute), or true for "
                             "/etc/containerd/conf.d/99-nvidia.toml")
        return drop_in_target(value, root=self.mirror.local)

    # -- writing ------------------------------------------------------------------------------

    def write(self, change: Change) -> list:
        """Write every plan that changes something to the node; those written.

        gpuready's record goes first when it is written and last when it is removed, as on the
        command line: a run that stops half way leaves a record the next run completes from.
        """
        from gpuready.changeset import check
        from gpuready.containerd.record import is_record
        from gpuready.workflow.daytwo import journal_order

        check(change.plans)  # the never-break gate, as the one writer runs it on the CLI
        written = []
        for plan in journal_order(change.plans):
            if not plan.changes:
                continue
            shown = plan._replace(before=self.record_text(plan.before),
                                  after=self.record_text(plan.after)) if is_record(plan) else plan
            self.mirror.push(shown, backup=not is_record(plan))
            self.keep_local(plan.path, plan.after)  # the copy stays the node's (verify reads it)
            written.append(shown)
        if any(is_record(plan) and plan.after is None for plan in written):
            self.remove_created_folders()
        return written

    def remove_created_folders(self) -> None:
        """Remove the folders gpuready created for its files (as its record said), deepest
        first, each only while empty: a folder that holds anything is left, and that is no
        failure (as on the command line)."""
        for folder in self.created_folders:
            self.mirror.node.remove(folder)

    def keep_local(self, path: Path, text: str | None) -> None:
        """Give the copy's file ``text`` (None: remove it), as the node's file now has."""
        local = Path(path)
        if text is None:
            local.unlink(missing_ok=True)
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(text, encoding="utf-8")

    def record_text(self, text: str | None) -> str | None:
        """The record's text with its file names as the node's."""
        if text is None:
            return None
        from gpuready.containerd.record import render_record

        record = json.loads(text)
        if record.get("format") != 1:  # node paths: the same names on the node as in the copy
            return text
        return render_record(self._record_paths(record, self._to_node_path))

    def _to_node_path(self, local: str) -> str:
        return self.mirror.node_file(local)

    # -- reporting ----------------------------------------------------------------------------

    def files(self, change: Change, written: list) -> list[dict]:
        """Each file's outcome as the module returns it (gpuready's record left out)."""
        from gpuready.containerd.record import is_record

        done = {plan.path for plan in written}
        return [
            dict(path=self.mirror.node_file(str(plan.path)), changed=plan.changes,
                 written=plan.path in done, removed=plan.changes and plan.after is None,
                 summary=self.mirror.shown(plan.summary))
            for plan in change.plans if not is_record(plan)
        ]

    def diffs(self, change: Change) -> list[dict]:
        """Ansible's diff of every changed file (gpuready's own bookkeeping files left out)."""
        from gpuready.containerd.record import is_bookkeeping

        shown = []
        for plan in change.plans:
            if not plan.changes or is_bookkeeping(plan):
                continue
            name = self.mirror.node_file(str(plan.path))
            shown.append(dict(
                before=plan.before or "", after=plan.after or "",
                before_header=name if plan.before is not None else "/dev/null",
                after_header=name if plan.after is not None else "/dev/null",
            ))
        return shown
