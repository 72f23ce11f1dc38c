# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Register the NVIDIA runtime in a node's containerd config, or take it back, planned on the
controller.

The node's files are copied into a temporary root on the controller, the change is planned there
by gpuready's own planners (``configure --config``, ``configure --drop-in``, ``unconfigure``:
the same plans the command line makes, comments and formatting kept, gpuready's record of what it
added kept beside the config), and each changed file is written back (or removed) through the
collection's ``node_file`` module, which follows no link swapped in meanwhile. The node runs only
built-in modules and the collection's own, so it needs nothing but its OS Python.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ansible.plugins.action import ActionBase

from ansible_collections.gpuready.node.plugins.module_utils.specs import CONTAINERD_RUNTIME_SPEC
from ansible_collections.gpuready.node.plugins.plugin_utils.actions import (
    require_gpuready,
    validated_args,
)


class ActionModule(ActionBase):
    """The ``gpuready.node.containerd_runtime`` action."""

    TRANSFERS_FILES = True
    _supports_check_mode = True
    _supports_diff = True

    def run(self, tmp=None, task_vars=None):
        """Plan on the controller; write unless in check mode."""
        result = super().run(tmp, task_vars or {})
        args = validated_args(self, CONTAINERD_RUNTIME_SPEC)
        require_gpuready()
        from gpuready.errors import GpureadyError

        with tempfile.TemporaryDirectory(prefix="gpuready-runtime-") as local:
            try:
                result.update(self._change(args, task_vars or {}, Path(local)))
            except GpureadyError as error:
                result.update(failed=True, changed=False,
                              msg=self._shown(error.message(), local, args["root"]))
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    @staticmethod
    def _shown(message: str, local: str, root: str) -> str:
        """An error names the node's files, never the controller's copy of them."""
        return message.replace(str(Path(local) / "node"), root.rstrip("/"))

    def _change(self, args: dict, task_vars: dict, local: Path) -> dict:
        from ansible_collections.gpuready.node.plugins.plugin_utils.mirror import Mirror
        from ansible_collections.gpuready.node.plugins.plugin_utils.remote import RemoteNode
        from ansible_collections.gpuready.node.plugins.plugin_utils.runtime import RuntimeChange

        node = RemoteNode(self, task_vars, root=args["root"])
        mirror = Mirror(node, root=args["root"], local=local)
        runtime = RuntimeChange(mirror, args)
        line = self._line(runtime)
        major = line.major
        if args["restart"]:
            return self._transaction(runtime, args, major=major, line=line)
        change = runtime.plan(major=major, line=line)
        if self._task.check_mode:
            from gpuready.changeset import check

            check(change.plans)  # the never-break gate's verdict, as a real run would meet it
        written = [] if self._task.check_mode else runtime.write(change)
        return self._outcome(runtime, change, written)

    def _transaction(self, runtime, args: dict, *, major: int, line) -> dict:
        """``restart: true``: gpuready's restart transaction, each step on the node."""
        from ansible_collections.gpuready.node.plugins.plugin_utils.restart import AnsibleHost
        from ansible_collections.gpuready.node.plugins.plugin_utils.runtime import Change
        from gpuready.workflow.transaction import RestartOptions, run_transaction

        absent = args["state"] == "absent"
        recorded = runtime.take_record() or {} if absent else {}
        gone = [s.get("name") for s in recorded.get("settings", [])
                if isinstance(s, dict) and s.get("kind") == "runtime"]
        options = RestartOptions(
            address=args["address"], command=args["restart_command"],
            timeout=args["restart_timeout"], probe=args["probe"],
            runtime_name=args["runtime_name"],
            expect_runtime=None if absent else args["runtime_name"],
            gone_runtime=gone[0] if gone else None,
        )
        node = runtime.node_config(major=major, line=line)
        outcome = run_transaction(node, lambda: runtime.plan(major=major, line=line).plans,
                                  options=options, dry_run=self._task.check_mode,
                                  host=AnsibleHost(runtime))
        change = Change(outcome.plans, node.config)
        kept = outcome.written and not outcome.rolled_back  # rolled back: every file as it was
        written = [plan for plan in outcome.plans if plan.changes] if kept else []
        result = self._outcome(runtime, change, written)
        steps = [dict(name=step.name, ok=step.ok, detail=runtime.mirror.shown(step.detail))
                 for step in outcome.steps]
        result.update(
            changed=outcome.written or (self._task.check_mode and change.changed),
            restart=dict(steps=steps, written=outcome.written, restarted=outcome.restarted,
                         rolled_back=outcome.rolled_back),
        )
        if not outcome.ok:
            failed = [f"{step['name']}: {step['detail']}" for step in steps if not step["ok"]]
            back = "; every file was put back and containerd restarted on them" if (
                outcome.rolled_back) else ""
            result.update(failed=True, msg="; ".join(failed) + back)
        return result

    @staticmethod
    def _line(runtime):
        """The node's containerd release line: its merge rules decide a drop-in's content, and
        the never-break gate judges every change on it."""
        from gpuready.containerd.lines import NodeLine, from_config_version, line_for_release
        from gpuready.containerd.versions import parse_release

        release = parse_release(runtime.mirror.node.ask(["containerd", "--version"]) or "")
        if release and release[0] in (1, 2):
            return NodeLine(line_for_release(release)[0], release,
                            "containerd --version on the node")
        # No containerd on the node: the config's version says which line reads it.
        text = runtime.mirror.take(runtime.config_node) or ""
        from gpuready.containerd.document import load_config_text

        return from_config_version(load_config_text(text, runtime.config).data.get("version"))

    def _outcome(self, runtime, change, written: list) -> dict:
        files = runtime.files(change, written)
        config = runtime.mirror.node_file(str(runtime.config))
        if files:
            summary = "; ".join(entry["summary"] for entry in files if entry["changed"]) or (
                files[0]["summary"])
        else:
            summary = f"nothing recorded for {config}: nothing to remove"
        outcome = dict(
            changed=change.changed,
            path=config,
            summary=summary,
            notes=list(dict.fromkeys(runtime.mirror.shown(note)
                                     for plan in change.plans for note in plan.notes)),
            files=files,
            written=bool(written),
            msg=f"{config}: {summary}" + ("" if change.changed else " (no change)"),
        )
        if self._task.diff and change.changed:
            outcome["diff"] = runtime.diffs(change)
        return outcome
