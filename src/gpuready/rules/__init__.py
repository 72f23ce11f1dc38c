"""The rule catalogue: every way a GPU runtime registration silently fails, one rule each.

:mod:`gpuready.rules.registry` names every rule and where it lives; ``gpuready.rules.engine``
runs them. Importing this package imports no rule: ``REGISTRY``, ``get`` and ``selection`` are
looked up in the registry when first used.
"""

from gpuready.rules.base import SECTIONS, Rule, Scope

__all__ = ["REGISTRY", "SECTIONS", "Rule", "Scope", "get", "selection"]


def __getattr__(attribute: str):
    if attribute in ("REGISTRY", "get", "selection"):
        from gpuready.rules import registry

        return getattr(registry, attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
