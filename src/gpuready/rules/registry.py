"""The one catalogue of rules, keyed by their stable names (part of gpuready's interface).

The catalogue names each rule, its scope and the module that defines it, so that a check imports
only the modules of the rules it runs: ``lint FILE`` the file and config rules, ``doctor`` the
node rules too, ``--engine docker`` Docker's rules alone (they live with Docker's support, in
``gpuready.engines.docker.rules``; CRI-O's in ``gpuready.engines.crio.rules``). Choosing rules by
name (``--select``/``--ignore``) imports nothing. ``REGISTRY``, every rule by name in catalogue
order, imports every rule module the first time it is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from gpuready.errors import UsageError
from gpuready.rules.base import Rule, Scope

_STRUCTURE = "gpuready.rules.structure"
_KEYS = "gpuready.rules.keys"
_RUNTIMES = "gpuready.rules.runtimes"
_OPTIONS = "gpuready.rules.options"
_NODE = "gpuready.rules.node"
_CDI_NODE = "gpuready.rules.cdi_node"
_OWNERSHIP = "gpuready.rules.ownership"
_TRANSACTION = "gpuready.rules.transaction"
_GPU_PATHS = "gpuready.rules.gpu_paths"
_DOCKER = "gpuready.engines.docker.rules"
_CRIO = "gpuready.engines.crio.rules"

# (name, scope, module): the catalogue's order is the order of `gpuready rules` and of the docs.
CATALOGUE: tuple[tuple[str, Scope, str], ...] = (
    ("toml-syntax", Scope.FILE, _STRUCTURE),
    ("version-missing", Scope.FILE, _STRUCTURE),
    ("version-unsupported", Scope.FILE, _STRUCTURE),
    ("unquoted-plugin-key", Scope.FILE, _STRUCTURE),
    ("wrong-version-path", Scope.FILE, _STRUCTURE),
    ("wrong-shape", Scope.FILE, _STRUCTURE),
    ("unknown-key", Scope.FILE, _KEYS),
    ("moved-key", Scope.FILE, _KEYS),
    ("runtime-not-registered", Scope.CONFIG, _RUNTIMES),
    ("runtime-type-missing", Scope.CONFIG, _RUNTIMES),
    ("runtime-type-deprecated", Scope.FILE, _RUNTIMES),
    ("bool-as-string", Scope.FILE, _OPTIONS),
    ("option-wrong-type", Scope.FILE, _OPTIONS),
    ("option-outside-options", Scope.FILE, _OPTIONS),
    ("option-spelling", Scope.FILE, _OPTIONS),
    ("option-spelled-twice", Scope.FILE, _OPTIONS),
    ("unknown-option", Scope.FILE, _OPTIONS),
    ("deprecated-systemd-cgroup", Scope.CONFIG, _OPTIONS),
    ("binary-path-relative", Scope.FILE, _RUNTIMES),
    ("binary-missing", Scope.CONFIG, _RUNTIMES),
    ("default-runtime-changed", Scope.CONFIG, _RUNTIMES),
    ("default-runtime-missing", Scope.CONFIG, _RUNTIMES),
    ("cgroup-driver-mismatch", Scope.CONFIG, _OPTIONS),
    ("systemd-cgroup-without-systemd", Scope.CONFIG, _OPTIONS),
    ("cri-disabled", Scope.CONFIG, _RUNTIMES),
    ("import-overrides-cri", Scope.NODE, _NODE),
    ("setting-shadowed", Scope.NODE, _NODE),
    ("base-runtime-spec-missing", Scope.NODE, _NODE),
    ("import-missing", Scope.NODE, _NODE),
    ("import-version-higher", Scope.NODE, _NODE),
    ("handler-mismatch", Scope.NODE, _NODE),
    ("handler-invalid", Scope.NODE, _NODE),
    ("cdi-spec-missing", Scope.NODE, _NODE),
    ("cdi-spec-invalid", Scope.NODE, _NODE),
    ("cdi-not-read", Scope.NODE, _CDI_NODE),
    ("cdi-spec-shadowed", Scope.NODE, _CDI_NODE),
    ("cdi-device-conflict", Scope.NODE, _CDI_NODE),
    ("cdi-spec-stale", Scope.NODE, _CDI_NODE),
    ("cdi-version-too-new", Scope.NODE, _GPU_PATHS),
    ("nri-mode-not-ready", Scope.NODE, _GPU_PATHS),
    ("dra-not-ready", Scope.NODE, _GPU_PATHS),
    ("config-regenerated", Scope.NODE, _OWNERSHIP),
    ("owner-template-stale", Scope.NODE, _OWNERSHIP),
    ("socket-mismatch", Scope.NODE, _OWNERSHIP),
    ("multiple-containerd", Scope.NODE, _OWNERSHIP),
    ("transaction-pending", Scope.NODE, _TRANSACTION),
    ("docker-json-syntax", Scope.DOCKER, _DOCKER),
    ("docker-unknown-key", Scope.DOCKER, _DOCKER),
    ("docker-wrong-type", Scope.DOCKER, _DOCKER),
    ("docker-runtime-not-registered", Scope.DOCKER, _DOCKER),
    ("docker-runtime-unknown-key", Scope.DOCKER, _DOCKER),
    ("docker-runtime-reserved", Scope.DOCKER, _DOCKER),
    ("docker-runtime-path-relative", Scope.DOCKER, _DOCKER),
    ("docker-runtime-missing", Scope.DOCKER, _DOCKER),
    ("docker-default-runtime-missing", Scope.DOCKER, _DOCKER),
    ("docker-default-runtime-changed", Scope.DOCKER, _DOCKER),
    ("docker-cdi-ignored", Scope.DOCKER, _DOCKER),
    ("crio-toml-syntax", Scope.CRIO, _CRIO),
    ("crio-runtime-wrong-table", Scope.CRIO, _CRIO),
    ("crio-runtime-not-registered", Scope.CRIO, _CRIO),
    ("crio-runtime-unknown-key", Scope.CRIO, _CRIO),
    ("crio-runtime-type-invalid", Scope.CRIO, _CRIO),
    ("crio-runtime-path-invalid", Scope.CRIO, _CRIO),
    ("crio-default-runtime-missing", Scope.CRIO, _CRIO),
)

NAMES: tuple[str, ...] = tuple(name for name, _, _ in CATALOGUE)
_MODULE_OF = {name: module for name, _, module in CATALOGUE}
_LOADED: dict[str, dict[str, Rule]] = {}  # module -> its rules by name, once imported


def _rules_in(module: str) -> dict[str, Rule]:
    if module not in _LOADED:
        _LOADED[module] = {rule.name: rule for rule in importlib.import_module(module).RULES}
    return _LOADED[module]


def get(name: str) -> Rule:
    """The rule called ``name``; an unknown name is a usage error listing the known ones."""
    if name not in _MODULE_OF:
        from gpuready.suggest import hint

        raise UsageError(f"unknown rule {name!r}{hint(name, NAMES)} "
                         "(run 'gpuready rules' for the list)")
    return _rules_in(_MODULE_OF[name])[name]


def rules_for(scope: Scope, selected: frozenset[str] | None = None) -> list[Rule]:
    """The rules of ``scope`` (those in ``selected`` only, when given) in catalogue order,
    importing only the modules that define them."""
    return [get(name) for name, rule_scope, _ in CATALOGUE
            if rule_scope is scope and (selected is None or name in selected)]


def every_rule() -> dict[str, Rule]:
    """Every rule by name, in catalogue order (imports every rule module)."""
    return {name: get(name) for name in NAMES}


def __getattr__(attribute: str):
    if attribute == "REGISTRY":  # read lazily: most runs never need every rule
        return every_rule()
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def _names(values: Iterable[str] | None) -> list[str]:
    """Split repeatable, comma-separated option values into names."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def selection(*, select: Iterable[str] | None, ignore: Iterable[str] | None) -> frozenset[str]:
    """The rule names to run: ``select`` (all when empty) minus ``ignore``; unknown names fail."""
    chosen = _names(select)
    dropped = _names(ignore)
    for name in (*chosen, *dropped):
        if name not in _MODULE_OF:
            get(name)  # raises the usage error
    return frozenset(chosen or NAMES) - frozenset(dropped)
