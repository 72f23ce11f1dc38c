# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""What every action plugin of the collection shares: argument checks and gpuready's errors."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

MISSING_LIBRARY = (
    "the gpuready library is not installed on the controller (pip install gpuready): this "
    "module computes every edit on the controller and needs nothing on the node"
)


def validated_args(action, spec: dict) -> dict:
    """The task's arguments checked against ``spec``; booleans given for strings are lowered.

    YAML reads ``systemd_cgroup: true`` as a boolean, while the option also takes ``inherit``;
    both spellings mean the same here.
    """
    args = action._task.args
    for name, option in spec.items():
        if option.get("type") == "str" and isinstance(args.get(name), bool):
            args[name] = "true" if args[name] else "false"
    validated = action.validate_argument_spec(argument_spec=spec)[1]
    return {name: _plain(value) for name, value in validated.items()}


def _plain(value):
    """The value as a plain Python object: Ansible hands templated strings over as ``str``
    subclasses that carry their origin, which gpuready's YAML writer rightly refuses."""
    for kind in (bool, int, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def require_gpuready() -> None:
    """Fail the task with a clear message when the controller lacks gpuready."""
    try:
        import gpuready  # noqa: F401
    except ImportError:
        raise AnsibleActionFail(MISSING_LIBRARY) from None
