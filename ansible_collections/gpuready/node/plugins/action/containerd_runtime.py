# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""Register the NVIDIA runtime in a node's containerd config, planned on the controller.

The node's config is read with ``stat`` and ``slurp``, the edit is planned by gpuready's own
``configure`` planner (the same plan ``gpuready configure`` makes, comments and formatting kept),
and a changed file is written back through the ``copy`` module. The node runs only built-in
modules, so it needs nothing but its OS Python.
"""

from __future__ import annotations

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
        """Plan on the controller; write through ``copy`` unless in check mode."""
        result = super().run(tmp, task_vars or {})
        args = validated_args(self, CONTAINERD_RUNTIME_SPEC)
        require_gpuready()
        from gpuready.errors import GpureadyError

        try:
            result.update(self._configure(args, task_vars or {}))
        except GpureadyError as error:
            result.update(failed=True, changed=False, msg=error.message())
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _configure(self, args: dict, task_vars: dict) -> dict:
        from ansible_collections.gpuready.node.plugins.plugin_utils.remote import (
            RemoteNode,
            node_path,
        )
        from gpuready.containerd.configure import ConfigureRequest, plan_configure
        from gpuready.containerd.document import load_config_text
        from gpuready.containerd.register import CgroupMode, RuntimeRequest
        from gpuready.errors import InputError

        node = RemoteNode(self, task_vars)
        path = node_path(args["root"], args["config"])
        current = node.read(path)
        if current is None:
            raise InputError(path, "no such file")
        request = ConfigureRequest(
            runtime=RuntimeRequest(
                name=args["runtime_name"],
                binary=args["binary"],
                systemd_cgroup=CgroupMode(args["systemd_cgroup"]),
            ),
            enable_cdi=args["enable_cdi"],
        )
        plan = plan_configure(load_config_text(current.text, path), request)
        written = bool(plan.changes and not self._task.check_mode)
        if written:
            node.replace(current, plan.after)
        outcome = dict(
            changed=plan.changes,
            path=path,
            summary=plan.summary,
            notes=list(plan.notes),
            written=written,
            msg=f"{path}: {plan.summary}" + ("" if plan.changes else " (no change)"),
        )
        if self._task.diff and plan.changes:
            outcome["diff"] = dict(
                before=plan.before, after=plan.after, before_header=path, after_header=path
            )
        return outcome
