"""The one registry of rules, keyed by their stable names (part of gpuready's interface)."""

from __future__ import annotations

from collections.abc import Iterable

from gpuready.errors import UsageError
from gpuready.rules import (
    crio,
    docker,
    keys,
    node,
    options,
    ownership,
    runtimes,
    structure,
    transaction,
)
from gpuready.rules.base import Rule

_RULES: tuple[Rule, ...] = (
    structure.TomlSyntax(),
    structure.VersionMissing(),
    structure.VersionUnsupported(),
    structure.UnquotedPluginKey(),
    structure.WrongVersionPath(),
    structure.WrongShape(),
    keys.UnknownKey(),
    keys.MovedKey(),
    runtimes.RuntimeNotRegistered(),
    runtimes.RuntimeTypeMissing(),
    runtimes.RuntimeTypeDeprecated(),
    options.BoolAsString(),
    options.OptionOutsideOptions(),
    options.OptionSpelling(),
    options.OptionSpelledTwice(),
    options.UnknownOption(),
    options.DeprecatedSystemdCgroup(),
    runtimes.BinaryPathRelative(),
    runtimes.BinaryMissing(),
    runtimes.DefaultRuntimeChanged(),
    runtimes.DefaultRuntimeMissing(),
    options.CgroupDriverMismatch(),
    runtimes.CriDisabled(),
    node.ImportOverridesCri(),
    node.ImportMissing(),
    node.ImportVersionHigher(),
    node.HandlerMismatch(),
    node.HandlerInvalid(),
    node.CdiSpecMissing(),
    node.CdiSpecInvalid(),
    ownership.ConfigRegenerated(),
    ownership.OwnerTemplateStale(),
    ownership.SocketMismatch(),
    ownership.MultipleContainerd(),
    transaction.TransactionPending(),
    docker.DockerJsonSyntax(),
    docker.DockerUnknownKey(),
    docker.DockerWrongType(),
    docker.DockerRuntimeNotRegistered(),
    docker.DockerRuntimeUnknownKey(),
    docker.DockerRuntimeReserved(),
    docker.DockerRuntimePathRelative(),
    docker.DockerRuntimeMissing(),
    docker.DockerDefaultRuntimeMissing(),
    docker.DockerDefaultRuntimeChanged(),
    docker.DockerCdiIgnored(),
    crio.CrioTomlSyntax(),
    crio.CrioRuntimeWrongTable(),
    crio.CrioRuntimeNotRegistered(),
    crio.CrioRuntimeUnknownKey(),
    crio.CrioRuntimeTypeInvalid(),
    crio.CrioRuntimePathInvalid(),
    crio.CrioDefaultRuntimeMissing(),
)

REGISTRY: dict[str, Rule] = {rule.name: rule for rule in _RULES}


def get(name: str) -> Rule:
    """The rule called ``name``; an unknown name is a usage error listing the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown rule {name!r}; run 'gpuready rules' for the list") from None


def _names(values: Iterable[str] | None) -> list[str]:
    """Split repeatable, comma-separated option values into names."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def selection(*, select: Iterable[str] | None, ignore: Iterable[str] | None) -> frozenset[str]:
    """The rule names to run: ``select`` (all when empty) minus ``ignore``; unknown names fail."""
    chosen = _names(select)
    dropped = _names(ignore)
    for name in (*chosen, *dropped):
        get(name)
    return frozenset(chosen or REGISTRY) - frozenset(dropped)
