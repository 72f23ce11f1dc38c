"""What a rule is: a stable name, a default severity, a scope, a documented ``check``.

A rule's class docstring is its user documentation: a one-line summary, then the sections
``## What it does``, ``## Why is this bad?``, ``## Example``, ``## Use instead`` and ``## Fix``.
``gpuready rules`` and ``docs/rules.md`` are generated from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from gpuready.compat import StrEnum
from gpuready.problems import Problem, Severity

SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix")


class Scope(StrEnum):
    """What a rule looks at.

    ``file``: one config file as written (``lint`` and ``doctor`` both run these on every file);
    ``config``: the configuration containerd uses (the file itself for ``lint``, the main file and
    its imports merged for ``doctor``); ``node``: everything else on the node (imports,
    RuntimeClass manifests, CDI specs), ``doctor`` only. ``docker`` and ``crio``: the config of
    those engines (``lint`` and ``doctor`` with ``--engine docker`` or ``--engine crio``).
    """

    FILE = "file"
    CONFIG = "config"
    NODE = "node"
    DOCKER = "docker"
    CRIO = "crio"


class Rule:
    """One check. Subclasses set the class attributes and implement :meth:`check`."""

    name: ClassVar[str]
    severity: ClassVar[Severity]
    scope: ClassVar[Scope]
    fixable: ClassVar[bool] = False

    def check(self, ctx: Any) -> Iterator[Problem]:
        """Yield the problems this rule finds in ``ctx`` (never print, never raise for data)."""
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        """The docstring's first line."""
        import inspect  # lazy: only the rule documentation reads docstrings

        return inspect.cleandoc(cls.__doc__ or "").splitlines()[0] if cls.__doc__ else ""

    @classmethod
    def sections(cls) -> dict[str, str]:
        """The docstring's ``## `` sections by title, their text dedented and stripped."""
        import inspect

        found: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in inspect.cleandoc(cls.__doc__ or "").splitlines():
            if line.startswith("## "):
                current = found.setdefault(line[3:].strip(), [])
            elif current is not None:
                current.append(line)
        return {title: "\n".join(lines).strip() for title, lines in found.items()}

    @classmethod
    def missing_sections(cls) -> list[str]:
        """The required sections this rule's docstring lacks or leaves empty."""
        present = cls.sections()
        return [title for title in SECTIONS if not present.get(title)]
