"""A stdout callback for the tests: every task's result per host, and the recap, as one JSON.

ansible-core ships no JSON callback (it lives in ansible.posix, which the tests do not install).
"""

from __future__ import annotations

import json

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: results_json
type: stdout
short_description: the results of every task per host, and the recap, as one JSON document
description: For gpuready's tests.
"""


class CallbackModule(CallbackBase):
    """Collects results and prints them at the end of the run."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "results_json"

    def __init__(self) -> None:
        super().__init__()
        self.tasks: dict[str, dict] = {}

    def _record(self, result, **extra) -> None:
        task = self.tasks.setdefault(result._task.get_name(), {})
        task[result._host.get_name()] = {**self._convert(result._result), **extra}

    @staticmethod
    def _convert(value):
        return json.loads(json.dumps(value, default=str))

    def v2_runner_on_ok(self, result) -> None:
        """A host's task succeeded."""
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        """A host's task failed."""
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result) -> None:
        """A host's task was skipped."""
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result) -> None:
        """A host could not be reached."""
        self._record(result, unreachable=True)

    def v2_playbook_on_stats(self, stats) -> None:
        """Print everything collected, with the recap per host."""
        recap = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._display.display(json.dumps({"tasks": self.tasks, "stats": recap}))
