# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""A node's ``gpuready doctor`` result as facts, computed on the controller.

The files doctor reads are copied from the node into a temporary root on the controller, doctor
runs there with the node's own containerd release (asked with ``containerd --version`` on the
node, unless given), and the problems name the files where they are on the node.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ansible.plugins.action import ActionBase

from ansible_collections.gpuready.node.plugins.module_utils.specs import GPUREADY_FACTS_SPEC
from ansible_collections.gpuready.node.plugins.plugin_utils.actions import (
    require_gpuready,
    validated_args,
)


class ActionModule(ActionBase):
    """The ``gpuready.node.gpuready_facts`` action."""

    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        """Copy the node's files, run doctor on the copy, return the result as facts."""
        result = super().run(tmp, task_vars or {})
        args = validated_args(self, GPUREADY_FACTS_SPEC)
        require_gpuready()
        from gpuready.errors import GpureadyError

        try:
            facts = self._doctor(args, task_vars or {})
        except GpureadyError as error:
            result.update(failed=True, changed=False, msg=error.message())
        else:
            result.update(changed=False, ansible_facts={"gpuready": facts})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _doctor(self, args: dict, task_vars: dict) -> dict:
        from ansible_collections.gpuready.node.plugins.plugin_utils.mirror import Mirror
        from ansible_collections.gpuready.node.plugins.plugin_utils.remote import RemoteNode
        from gpuready.fleet.nodes import NodeSource, check_node
        from gpuready.rules import selection

        node = RemoteNode(self, task_vars, root=args["root"])
        version = args["containerd_version"] or self._node_containerd(node)
        with tempfile.TemporaryDirectory(prefix="gpuready-node-") as local:
            mirror = Mirror(node, root=args["root"], local=Path(local))
            mirror.take_node()
            found = check_node(
                NodeSource(task_vars.get("inventory_hostname", "node"), mirror.local),
                runtime_name=args["runtime_name"],
                selected=selection(select=None, ignore=None),
                containerd_version=version,
            ).relocated(str(mirror.local), args["root"])
            owner = self._owner(mirror)
        facts = found.to_dict()
        facts.update(containerd_version=version, root=args["root"], owner=owner)
        return facts

    @staticmethod
    def _owner(mirror) -> dict:
        """Who owns containerd on the node (k3s, RKE2, the GPU Operator, ...), and why."""
        from gpuready.node import Node
        from gpuready.owners.detect import detect

        detected = detect(Node(mirror.local)).to_dict()
        detected["why"] = [mirror.shown(reason) for reason in detected["why"]]
        return detected

    @staticmethod
    def _node_containerd(node) -> str | None:
        """The node's containerd release (``1.6``), or None when it has none."""
        from gpuready.containerd.versions import parse_release

        # Without containerd on the node, the config version decides, as doctor does.
        release = parse_release(node.ask(["containerd", "--version"]) or "")
        return f"{release[0]}.{release[1]}" if release else None
