# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""The contract's eight steps on a node, computed on the controller as ``gpuready setup`` does.

The files setup reads are copied from the node into a temporary root, ``gpuready setup`` runs
there (every report file parsed back from that node's own files), and each file it changed is
written back to the node through the collection's ``node_file`` module, which follows no link
swapped in meanwhile. The node needs only its OS Python.
"""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath

from ansible.plugins.action import ActionBase

from ansible_collections.gpuready.node.plugins.module_utils.specs import GPUREADY_SETUP_SPEC
from ansible_collections.gpuready.node.plugins.plugin_utils.actions import (
    require_gpuready,
    validated_args,
)

STEPS = 8


class ActionModule(ActionBase):
    """The ``gpuready.node.gpuready_setup`` action."""

    TRANSFERS_FILES = True
    _supports_check_mode = True
    _supports_diff = True

    def run(self, tmp=None, task_vars=None):
        """Run setup on a copy of the node's files; write back what changed (not in check mode)."""
        result = super().run(tmp, task_vars or {})
        args = validated_args(self, GPUREADY_SETUP_SPEC)
        require_gpuready()
        from gpuready.errors import GpureadyError

        try:
            result.update(self._setup(args, task_vars or {}))
        except GpureadyError as error:
            result.update(failed=True, changed=False, msg=error.message())
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _setup(self, args: dict, task_vars: dict) -> dict:
        from ansible_collections.gpuready.node.plugins.plugin_utils.mirror import Mirror
        from ansible_collections.gpuready.node.plugins.plugin_utils.remote import RemoteNode

        node = RemoteNode(self, task_vars, root=args["root"])
        with tempfile.TemporaryDirectory(prefix="gpuready-setup-") as local:
            mirror = Mirror(node, root=args["root"], local=Path(local))
            mirror.take_setup_inputs(PurePosixPath(args["toolkit_dir"]))
            result = self._run_setup(args, mirror)
            changed = [plan for plan in result.plans if plan.changes]
            if not self._task.check_mode:
                for plan in changed:
                    mirror.push(plan)
            return self._outcome(result, changed, mirror)

    def _run_setup(self, args: dict, mirror):
        from gpuready.containerd.register import CgroupMode, RuntimeRequest
        from gpuready.node import Node
        from gpuready.workflow.setup import SetupOptions, run_setup

        return run_setup(SetupOptions(
            node=Node(mirror.local),
            request=RuntimeRequest(
                name=args["runtime_name"],
                binary=args["binary"],
                systemd_cgroup=CgroupMode(args["systemd_cgroup"]),
            ),
            toolkit_dir=PurePosixPath(args["toolkit_dir"]),
            base=mirror.base_for_setup(),
            gpus=args["gpus"] if args["gpus"] is not None else mirror.gpu_count(),
            dry_run=self._task.check_mode,
        ))

    def _outcome(self, result, changed: list, mirror) -> dict:
        failed = [check for check in result.checks if not check.ok]
        steps = [
            f"[{s.number}/{STEPS}] {s.title}: {mirror.shown(str(s.path))}: "
            f"{mirror.shown(s.outcome)}"
            for s in result.steps
        ]
        outcome = dict(
            changed=bool(changed),
            changed_files=[mirror.node_file(str(plan.path)) for plan in changed],
            steps=steps,
            notes=[mirror.shown(note) for note in result.notes],
            checks=[dict(name=c.name, ok=c.ok, detail=mirror.shown(c.detail))
                    for c in result.checks],
            runtimeclass=mirror.runtimeclass_text(result),
        )
        if failed:
            outcome.update(failed=True, msg="; ".join(
                f"FAIL {c.name}: {mirror.shown(c.detail)}" for c in failed))
        if self._task.diff and changed:
            outcome["diff"] = [
                dict(before=plan.before or "", after=plan.after,
                     before_header=mirror.node_file(str(plan.path)),
                     after_header=mirror.node_file(str(plan.path)))
                for plan in changed
            ]
        return outcome
