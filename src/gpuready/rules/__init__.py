"""The rule catalogue: every way a GPU runtime registration silently fails, one rule each.

``REGISTRY`` maps each stable rule name to its rule; ``gpuready.rules.engine`` runs them.
"""

from gpuready.rules.base import SECTIONS, Rule, Scope
from gpuready.rules.registry import REGISTRY, get, selection

__all__ = ["REGISTRY", "SECTIONS", "Rule", "Scope", "get", "selection"]
