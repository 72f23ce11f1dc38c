"""The systemd units that keep a CDI spec true: ``gpuready cdi refresh --install-units``.

Two units in ``/etc/systemd/system``:

- ``gpuready-cdi-refresh.service`` (``Type=oneshot``) runs ``gpuready cdi refresh`` with the
  spec's intent, at boot before containerd, Docker and CRI-O start (``Before=``,
  ``WantedBy=multi-user.target``);
- ``gpuready-cdi-refresh.path`` starts it when the kernel modules change
  (``PathChanged=/lib/modules/%v/modules.dep``: ``depmod`` rewrites it when a driver's module is
  installed for the running kernel, ``%v`` being that kernel's release) or the driver's library
  folder changes (a driver package adds or removes ``libcuda.so.<version>`` there). The files
  the driver's kernel module shows (``/proc/driver/nvidia/version``, ``/sys/module/nvidia``) are
  not watchable by inotify, so they are not watched.

The service runs the node's own gpuready (:func:`unit_program`): ``--program`` (a node path),
else the one installed under ``--root``; the path of the gpuready that writes the units is the
node's only when that is the node itself (``/``).

Both are written through the one safe writer and recorded, as whole files gpuready created, in
a record of their own beside them (``gpuready-cdi-refresh.gpuready.json``, in the format of
:mod:`gpuready.containerd.record`; systemd reads no ``.json`` file there), whatever the engine:
nothing is written under ``/etc/containerd`` for them. ``gpuready unconfigure`` removes them, for
every engine, while they hold what gpuready wrote (:func:`plan_removal`), with the links
``systemctl enable`` made to them (``multi-user.target.wants/gpuready-cdi-refresh.*``).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gpuready.errors import UsageError
from gpuready.node import FileKind, Node
from gpuready.paths import CDI_SPEC
from gpuready.plan import Plan

UNIT_DIR = PurePosixPath("/etc/systemd/system")
NAME = "gpuready-cdi-refresh"
SERVICE = UNIT_DIR / f"{NAME}.service"
PATH_UNIT = UNIT_DIR / f"{NAME}.path"
MODULES_DEP = "/lib/modules/%v/modules.dep"
# The record names this (no such file): its record is gpuready-cdi-refresh.gpuready.json.
RECORD_OF = UNIT_DIR / NAME
WANTS = UNIT_DIR / "multi-user.target.wants"
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:=,+@-]+")


def entry_point() -> list[str]:
    """The command that runs this gpuready: its ``gpuready`` script when that is what runs,
    else this Python with ``-m gpuready``."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "gpuready":
        script = os.path.abspath(argv0)
        if os.path.isfile(script) and os.access(script, os.X_OK):
            return [script]
    return [os.path.abspath(sys.executable), "-m", "gpuready"]


# Where a node keeps gpuready when nothing says otherwise (pip's scripts, a package's), in order.
NODE_PROGRAMS = ("/usr/local/bin/gpuready", "/usr/bin/gpuready")


def unit_program(node: Node, program: str | None) -> list[str]:
    """The command the ``.service`` unit starts, as the node will run it.

    ``program`` (``--program``) is a node path: an executable file there under the root. Without
    it, a node under ``--root`` runs the gpuready installed in it (:data:`NODE_PROGRAMS`): the
    unit runs on that node, where the host's own gpuready path (a virtual environment, this
    Python) means nothing. On ``/`` it is the gpuready that runs now (:func:`entry_point`).
    Raises :class:`UsageError` (exit 2) for a program that is not there, or none found.
    """
    from gpuready.errors import InputError

    if program is not None:
        if not program.startswith("/") or any(ord(c) < 32 or ord(c) == 127 for c in program):
            raise UsageError(f"--program {program!r}: give the absolute node path of gpuready "
                             "on the node (inside --root)")
        if not node.is_executable(node.path(program)):
            raise InputError(node.path(program), f"--program {program}: no executable file "
                             "there on the node; install gpuready there, or give the node path "
                             "where it is")
        return [program]
    if node.is_host:
        return entry_point()
    for candidate in NODE_PROGRAMS:
        if node.is_executable(node.path(candidate)):
            return [candidate]
    raise UsageError(f"--install-units --root {node.root}: no gpuready on the node "
                     f"({' or '.join(NODE_PROGRAMS)}) for the unit's ExecStart=; install it "
                     "there, or give --program PATH (its node path)")


def exec_word(word: str) -> str:
    """``word`` as one word of a systemd ``ExecStart=`` line: quoted when it has to be, with
    ``%`` and ``$`` escaped (systemd would expand them)."""
    if any(ord(char) < 32 or ord(char) == 127 for char in word):
        raise UsageError(f"{word!r}: a control character cannot be written into a unit file")
    if not _PLAIN_WORD.fullmatch(word):
        word = '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word.replace("%", "%%").replace("$", "$$")


def _path_word(path: str) -> str:
    """A path for ``PathChanged=`` (no quoting there): ``%`` escaped, whitespace refused."""
    if any(char.isspace() or ord(char) < 32 for char in path):
        raise UsageError(f"{path!r}: a path with whitespace cannot be watched by a path unit")
    return path.replace("%", "%%")


def refresh_arguments(found: Any, node: Node) -> list[str]:
    """``cdi refresh`` and the options that say the spec's intent (node paths)."""
    from gpuready.cdi import generate

    intent = found.intent
    words = ["cdi", "refresh"]
    spec = str(node.node_path(found.target))
    if spec != str(CDI_SPEC):
        words += ["--output", spec]
    if intent.gpus is not None:
        words += ["--gpus", str(intent.gpus)]
    if intent.inventory:
        inventory = os.path.abspath(intent.inventory)
        words += ["--inventory", str(node.node_path(inventory))]
    if intent.strategies != generate.DEFAULT_STRATEGIES:
        for strategy in intent.strategies:
            words += ["--device-name-strategy", strategy]
    if intent.driver_root != "/":
        words += ["--driver-root", intent.driver_root]
    if intent.hooks is not None:
        words.append("--hooks" if intent.hooks else "--no-hooks")
    if not intent.use_nvml:
        words.append("--no-nvml")
    return words


def library_folder(found: Any, node: Node) -> str:
    """The driver's library folder to watch (a node path): where the spec's driver libraries
    are, else where the generator would find them, else the first usual library folder."""
    from gpuready.cdi import node as facts

    folder = found.library_dir
    if folder is None:
        libraries = facts.find_driver(node, found.intent.driver_root).libraries
        folder = str(PurePosixPath(libraries[0]).parent) if libraries else None
    if folder is None:
        folder = next((d for d in facts.LIBRARY_DIRS if node.is_dir(node.path(d))),
                      facts.LIBRARY_DIRS[0])
    root = found.intent.driver_root
    return str(PurePosixPath(root, folder.lstrip("/"))) if root != "/" else folder


def service_text(found: Any, node: Node, program: list[str]) -> str:
    """The ``.service`` unit, running ``program`` (:func:`unit_program`)."""
    command = " ".join(exec_word(word) for word in program + refresh_arguments(found, node))
    spec = node.node_path(found.target)
    return (
        "# Written by 'gpuready cdi refresh --install-units'; 'gpuready unconfigure' removes it.\n"
        "[Unit]\n"
        f"Description=Refresh the NVIDIA CDI spec {spec} (gpuready)\n"
        "After=local-fs.target systemd-modules-load.service\n"
        "Before=containerd.service docker.service crio.service\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={command}\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def path_text(found: Any, node: Node) -> str:
    """The ``.path`` unit."""
    return (
        "# Written by 'gpuready cdi refresh --install-units'; 'gpuready unconfigure' removes it.\n"
        "[Unit]\n"
        f"Description=Refresh the NVIDIA CDI spec when the driver or kernel modules change "
        "(gpuready)\n"
        "\n"
        "[Path]\n"
        f"PathChanged={MODULES_DEP}\n"
        f"PathChanged={_path_word(library_folder(found, node))}\n"
        f"Unit={NAME}.service\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def record_file(node: Node) -> Path:
    """The host path of the units' record."""
    from gpuready.containerd.record import record_path

    return record_path(node.path(RECORD_OF))


def plan_units(found: Any, node: Node, *, program: list[str]) -> list[Plan]:
    """The units' record's plan (first), then the ``.service`` and ``.path`` units' plans; the
    service runs ``program`` (:func:`unit_program`).

    Raises :class:`InputError` when the record is there but not one gpuready can read, or not
    one gpuready can trust."""
    from gpuready.containerd.record import load_record, record_changes, render_record

    plans = []
    for unit, text in ((SERVICE, service_text(found, node, program)),
                       (PATH_UNIT, path_text(found, node))):
        path = node.path(unit)
        before = node.read_text_or_none(path, kind=FileKind.CONFIG)
        summary = "unit unchanged" if before == text else (
            "write the unit" if before is None else "rewrite the unit")
        plans.append(Plan(path, before, text, summary))
    main = node.path(RECORD_OF)
    path = record_file(node)
    before = node.read_text_or_none(path, kind=FileKind.NODE_FACT)
    previous = load_record(main, node=node)
    if not any(plan.changes for plan in plans):
        return [Plan(path, before, before, "record unchanged"), *plans]
    record = record_changes(previous, plans, main=main, runtime_name="nvidia",
                            whole={plan.path for plan in plans}, node=node)
    after = render_record(record, main=main, node=node)
    return [Plan(path, before, after, "record the units for 'gpuready unconfigure'"), *plans]


@dataclass(frozen=True)
class Removal:
    """What ``unconfigure`` does to the units: the files' plans (the record's last), the
    ``systemctl enable`` links to remove once the units are gone, the folders to remove."""

    plans: list[Plan]
    links: list[Path]
    folders: list[Path]


def plan_removal(node: Node) -> Removal | None:
    """Take back the units gpuready wrote, as their record says (None without a record): each
    unit removed while it holds what gpuready wrote, left as it is once edited; a link in
    ``multi-user.target.wants`` named after one and pointing at it goes with it.

    Raises :class:`InputError` for a record gpuready cannot read."""
    from gpuready.containerd.record import load_record
    from gpuready.containerd.unconfigure import plan_file, recorded_folders

    main = node.path(RECORD_OF)
    record = load_record(main, node=node)
    if record is None:
        return None
    plans: list[Plan] = []
    links: list[Path] = []
    for name, entry in record["files"].items():
        path = Path(name)
        if not is_unit(path):
            continue
        unit_plans = plan_file(path, entry, [], node=node)
        plans += unit_plans
        if unit_plans and unit_plans[0].after is None:  # removed, or already gone
            link = enable_link(node, path)
            if link is not None:
                links.append(link)
    path = record_file(node)
    plans.append(Plan(path, node.read_text(path, kind=FileKind.NODE_FACT), None,
                      "remove gpuready's record of the units"))
    return Removal(plans, links, recorded_folders(record))


def enable_link(node: Node, unit: Path) -> Path | None:
    """The link ``systemctl enable`` made to ``unit`` (a host path of one of the two units) in
    ``multi-user.target.wants``, when it is a link that points at that unit; else None."""
    folder = node.path(WANTS)
    link = folder / unit.name
    if not node.is_link(link):
        return None
    try:
        target = os.readlink(node.writable(folder) / unit.name)
    except OSError:
        return None
    return link if target in link_targets(unit.name) else None


def link_targets(name: str) -> tuple[str, str]:
    """What a ``systemctl enable`` link to the unit ``name`` holds: its node path, or the
    relative form."""
    return (str(UNIT_DIR / name), f"../{name}")


def remove_links(links: list[Path], *, node: Node) -> list[Path]:
    """Remove the ``systemctl enable`` links (the caller holds the lock of their folder), each
    only while it is still a link to gpuready's unit; return those removed."""
    from gpuready.fsio import remove_own_link

    return [link for link in links
            if remove_own_link(node.writable(link.parent) / link.name, link_targets(link.name),
                               node=node)]


def enable_hint() -> str:
    """What the operator runs to turn the units on (gpuready writes files, it starts nothing)."""
    return (f"enable them: systemctl daemon-reload && systemctl enable {NAME}.path "
            f"{NAME}.service && systemctl start {NAME}.path")


def is_unit(path: Path) -> bool:
    """True for one of the two unit files (not the record)."""
    return path.name in (SERVICE.name, PATH_UNIT.name)
