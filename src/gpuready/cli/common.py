"""Options shared by several commands, so each is spelled and documented once."""

from __future__ import annotations

import argparse

from gpuready.paths import NVIDIA_RUNTIME_BINARY

FORMATTER = argparse.RawDescriptionHelpFormatter


def add_command(subparsers, name: str, *, help: str, description: str, epilog: str = ""):
    """Add one sub-command with the project's help formatting."""
    return subparsers.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=FORMATTER
    )


def add_root(parser: argparse.ArgumentParser) -> None:
    """``--root``: the folder every absolute node path is looked up under."""
    parser.add_argument(
        "--root",
        default="/",
        metavar="DIR",
        help="prefix every absolute node path with DIR, to work on a sandbox copy (default: /)",
    )


def add_root_and_config(parser: argparse.ArgumentParser) -> None:
    """``--root`` and ``--config``: the node and its main containerd config."""
    add_root(parser)
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="the main containerd config (default: /etc/containerd/config.toml under --root)",
    )


def add_runtime_name(parser: argparse.ArgumentParser) -> None:
    """``--runtime-name``: the name of the runtime and of the RuntimeClass handler."""
    parser.add_argument(
        "--runtime-name",
        default="nvidia",
        type=runtime_name,
        metavar="NAME",
        help="runtime name in containerd and RuntimeClass handler (default: nvidia)",
    )


def add_binary(parser: argparse.ArgumentParser) -> None:
    """``--binary``: the NVIDIA runtime executable that containerd's runc shim calls."""
    parser.add_argument(
        "--binary",
        default=str(NVIDIA_RUNTIME_BINARY),
        type=binary_path,
        metavar="PATH",
        help=f"the runtime's BinaryName (default: {NVIDIA_RUNTIME_BINARY})",
    )


def runtime_name(value: str) -> str:
    """A ``--runtime-name`` Kubernetes accepts as a RuntimeClass handler (the runtime's name)."""
    from gpuready.kubernetes.runtimeclass import label_problem

    problem = control_problem(value) or label_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}: the RuntimeClass handler is the runtime's "
                                         "name, and Kubernetes accepts only such a label")
    return value


def control_problem(value: str) -> str | None:
    """Why ``value`` cannot be a name or path on the node (a control character such as a
    newline, which a pattern's ``$`` lets through), or None when it has none."""
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return f"{value!r} holds a control character"
    return None


def node_folder(value: str) -> str:
    """A folder option on the node (``--toolkit-dir``): an absolute node path under ``--root``.

    A relative ``DIR`` is a node path too, taken from the node's top (``rel/tk`` is
    ``/rel/tk`` under ``--root``): nothing is ever written beside the current folder.
    """
    problem = control_problem(value) or ("is empty" if not value.strip() else None)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value if value.startswith("/") else "/" + value


def binary_path(value: str) -> str:
    """A ``--binary`` containerd's runc shim will run as meant: absolute, no control characters."""
    from gpuready.containerd.runc_options import binary_problem

    problem = binary_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_default_confirmation(parser: argparse.ArgumentParser, *, what: str) -> None:
    """``--confirm-every-pod-uses-it``: the one confirmation for changing the default runtime."""
    parser.add_argument(
        "--confirm-every-pod-uses-it",
        action="store_true",
        help=f"confirm {what}: every pod on the node will run through the changed default "
        "runtime",
    )


def gpu_count(value: str) -> int:
    """A ``--gpus`` count: 1 or more, at most the documented maximum."""
    from gpuready.cdi.inventory import MAX_GPUS

    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if not 1 <= count <= MAX_GPUS:
        raise argparse.ArgumentTypeError(f"give 1 to {MAX_GPUS} (the driver numbers GPU device "
                                         f"nodes /dev/nvidia0 to /dev/nvidia{MAX_GPUS - 1})")
    return count


def add_format(parser: argparse.ArgumentParser, choices=("text", "json")) -> None:
    """``--format``: how results are printed."""
    parser.add_argument(
        "--format",
        choices=choices,
        default="text",
        help="output format (default: text)",
    )


def add_dry_run(parser: argparse.ArgumentParser) -> None:
    """``--dry-run``: show the diff, write nothing."""
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would change as a unified diff and write nothing",
    )


def add_containerd_version(parser: argparse.ArgumentParser) -> None:
    """``--containerd-version``: the release line whose import merge applies."""
    parser.add_argument(
        "--containerd-version",
        metavar="X.Y",
        help="the containerd release the node runs (1.6, 1.7, 2.1, 2.3; others are read as "
        "the nearest). Default: on this machine 'containerd --version'; under --root the "
        "root's package database; else the config's version (2: 1.7, 3: 2.1, 4: 2.3)",
    )


def add_restart(parser: argparse.ArgumentParser) -> None:
    """``--restart`` and its options: apply the change as one transaction with containerd."""
    group = parser.add_argument_group(
        "restart transaction",
        "check the candidate files with the node's containerd, write them, restart containerd "
        "when the effective config changed, verify; on any failure put every file back and "
        "restart again",
    )
    group.add_argument(
        "--restart", action="store_true", help="apply as one transaction with a restart"
    )
    group.add_argument(
        "--address",
        default="unix:///run/containerd/containerd.sock",
        metavar="ADDRESS",
        help="containerd's CRI socket (default: unix:///run/containerd/containerd.sock)",
    )
    group.add_argument(
        "--restart-command",
        metavar="CMD",
        help="restart containerd with this shell command (default: systemctl restart containerd)",
    )
    group.add_argument(
        "--restart-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="for the restart command and for the CRI to answer again (default: 60)",
    )
    group.add_argument(
        "--probe",
        action="store_true",
        help="after the restart, also start and remove a pod sandbox through the runtime",
    )


def add_distribution(parser: argparse.ArgumentParser) -> None:
    """``--distribution``: who owns containerd on the node, instead of detecting it."""
    from gpuready.owners.table import BY_NAME

    parser.add_argument(
        "--distribution",
        default="auto",
        choices=("auto", *BY_NAME),
        metavar="NAME",
        help="who owns containerd on the node: auto (detect from its files, the default), "
        + ", ".join(BY_NAME),
    )


def detect_owner(args: argparse.Namespace):
    """The :class:`~gpuready.owners.detect.Detection` for ``--root`` and ``--distribution``."""
    from gpuready.node import Node
    from gpuready.owners.detect import detect

    return detect(Node(args.root), distribution=args.distribution)
