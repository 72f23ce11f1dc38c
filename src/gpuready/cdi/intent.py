"""The intent record kept beside a CDI spec: ``<spec>.gpuready.intent``.

A spec is generated from an *intent*: ``--gpus N``, an ``--inventory`` file, or the GPUs the node
shows, with device-name strategies, hooks and a driver root. ``cdi generate`` and ``setup`` keep
it beside the spec (JSON; the CDI loader reads only ``*.json`` and ``*.yaml``, so it never sees
it), with the SHA-256 of the spec it describes. ``cdi refresh`` regenerates from it and
``doctor`` reads it (:mod:`gpuready.cdi.staleness`); this module reads it without the generator,
so a check of a node does not load what only writing a spec needs.

A record is data, never an instruction: one whose fields the command line would refuse (a GPU
count outside 1 to 255, a relative driver root, an unknown strategy or format), or that another
user could have written (not a regular file owned by the user running gpuready and writable by
no one else), is as good as none to a reader; a command that writes refuses the latter. The
inventory file is kept as an absolute path: the node's own path when it lies inside ``--root``
(or on the node itself), else the host path, marked ``inventory_outside_root``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpuready.errors import InputError
from gpuready.node import FileKind, Node
from gpuready.records import Record
from gpuready.textfile import sha256

INTENT_SUFFIX = ".gpuready.intent"
INTENT_FORMAT = 1
STRATEGIES = ("index", "uuid", "type-index")
DEFAULT_STRATEGIES = ("index", "uuid")
FORMATS = ("yaml", "json")
MAX_GPUS = 255  # as ``--gpus`` takes it (/dev/nvidia255 is nvidiactl)
# ``detected.source`` of a spec written with no GPU detected and no --gpus or inventory given
# (setup's): one planned GPU, a placeholder, not a fact about the node
PLACEHOLDER_SOURCE = "placeholder: no GPU detected"
INTENT_WHAT = "CDI intent record"


def intent_path(spec: Path) -> Path:
    """Where the intent of the spec at ``spec`` (a host path) is kept: beside it."""
    return spec.with_name(spec.name + INTENT_SUFFIX)


class GenerateOptions(Record):
    """How to build the spec: names, hooks (None: when the hook binary exists), the driver root."""

    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    hooks: bool | None = None
    driver_root: str = "/"


class Intent(Record):
    """What a spec is generated from; a None field of a command line means "as recorded".

    ``inventory`` is a host path (absolute once recorded or resolved)."""

    gpus: int | None = None
    inventory: str | None = None
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    hooks: bool | None = None
    driver_root: str = "/"
    use_nvml: bool = True
    fmt: str | None = None

    def options(self) -> Any:
        """The generator's options for this intent."""
        return GenerateOptions(strategies=self.strategies, hooks=self.hooks,
                               driver_root=self.driver_root)

    def described(self) -> str:
        """``--gpus 4``, ``--inventory node.yaml`` or ``the node's GPUs``."""
        if self.inventory and self.gpus is not None:
            return f"--gpus {self.gpus} --inventory {self.inventory}"
        if self.inventory:
            return f"--inventory {self.inventory}"
        if self.gpus is not None:
            return f"--gpus {self.gpus}"
        return "the node's GPUs"


def intent_fields(intent: Intent, node: Node | None = None) -> dict[str, Any]:
    """The intent as the record keeps it; with ``node``, the inventory as a node path when it
    lies inside the root (else its absolute host path, marked ``inventory_outside_root``)."""
    inventory, outside = intent.inventory, False
    if inventory is not None and node is not None:
        absolute = os.path.abspath(inventory)
        if node.is_host or node.contains(absolute):
            inventory = str(node.node_path(absolute))
        else:
            inventory, outside = absolute, True
    fields = {"gpus": intent.gpus, "inventory": inventory,
              "device_name_strategies": list(intent.strategies), "hooks": intent.hooks,
              "driver_root": intent.driver_root, "nvml": intent.use_nvml, "format": intent.fmt}
    if outside:
        fields["inventory_outside_root"] = True
    return fields


def load_intent(node: Node, spec: Path) -> dict[str, Any] | None:
    """The intent record of the spec at ``spec``; None when there is none or it is not one
    this version reads (a damaged record is as good as none: the spec is then judged alone).

    The record's ``parsed`` item is its :class:`Intent`, the inventory named by host path. A
    record another user could have written is as good as none here too; a writer refuses it
    first (:func:`require_trusted_intent`)."""
    try:
        node.require_trusted(intent_path(spec), what=INTENT_WHAT)
        text = node.read_text_or_none(intent_path(spec), kind=FileKind.NODE_FACT)
    except InputError:
        return None
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(record, dict) and record.get("format") == INTENT_FORMAT
            and isinstance(record.get("intent"), dict) and isinstance(record.get("detected"),
                                                                      dict)):
        return None
    try:
        record["parsed"] = parsed_intent(record["intent"], node)
    except (TypeError, ValueError):
        return None
    return record


def require_trusted_intent(node: Node, spec: Path) -> None:
    """Refuse (:class:`InputError`, exit 2) an intent record beside ``spec`` that another user
    could have written, before a command regenerates from it or writes over it (the writer
    keeps a file's owner and mode)."""
    node.require_trusted(intent_path(spec), what=INTENT_WHAT)


def parsed_intent(fields: dict[str, Any], node: Node) -> Intent:
    """The :class:`Intent` a record's ``intent`` fields say; ValueError for any field the
    command line would refuse."""
    gpus = fields.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)
                             or not 1 <= gpus <= MAX_GPUS):
        raise ValueError("gpus")
    strategies = fields.get("device_name_strategies")
    if strategies is None:
        strategies = list(DEFAULT_STRATEGIES)
    if not isinstance(strategies, list) or not strategies or not all(
            isinstance(s, str) and s in STRATEGIES for s in strategies):
        raise ValueError("strategies")
    inventory, driver_root = fields.get("inventory"), fields.get("driver_root", "/")
    hooks, fmt, nvml = fields.get("hooks"), fields.get("format"), fields.get("nvml", True)
    outside = fields.get("inventory_outside_root", False)
    if not isinstance(driver_root, str) or not driver_root.startswith("/") or "\0" in driver_root:
        raise ValueError("driver_root")
    if inventory is not None and (not isinstance(inventory, str) or not inventory.startswith("/")
                                  or "\0" in inventory):
        raise ValueError("inventory")
    if hooks not in (None, True, False) or fmt not in (None, *FORMATS) \
            or not isinstance(nvml, bool) or not isinstance(outside, bool):
        raise ValueError("fields")
    if inventory is not None and not outside:
        inventory = str(node.path(inventory))
    return Intent(gpus, inventory, tuple(strategies), hooks, driver_root, nvml, fmt)


def recorded_intent(node: Node, spec: Path, text: str | None = None) -> dict[str, Any] | None:
    """The intent record of ``spec`` when it describes the spec as it is now (the record's
    SHA-256 is the spec's); None otherwise (no record, or the spec was rewritten since)."""
    record = load_intent(node, spec)
    if record is None:
        return None
    if text is None:
        try:
            text = node.read_text_or_none(spec, kind=FileKind.CDI_SPEC)
        except InputError:
            return None
    return record if record.get("spec_sha256") == sha256(text) else None
