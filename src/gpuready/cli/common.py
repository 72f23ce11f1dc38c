"""Options shared by several commands, so each is spelled and documented once."""

from __future__ import annotations

import argparse

from gpuready.paths import NVIDIA_RUNTIME_BINARY

FORMATTER = argparse.RawDescriptionHelpFormatter
ENGINES = ("containerd", "docker", "crio")
DOCKER_ADDRESS = "unix:///var/run/docker.sock"

SET_AS_DEFAULT_REFUSAL = """\
refusing --set-as-default without --confirm-every-pod-uses-it.
With default_runtime_name = "{name}" every pod on this node, GPU or not, runs through the NVIDIA
runtime, and a problem in it (a driver upgrade, a missing library) stops them all. A RuntimeClass
with handler "{name}" gives GPU pods the runtime and leaves every other pod on runc:
  gpuready setup            # writes /root/toolkit/runtimeclass.yaml
  kubectl apply -f /root/toolkit/runtimeclass.yaml
  # then set runtimeClassName: {name} in the GPU pods' spec"""


def add_command(
    subparsers, name: str, *, description: str, epilog: str = "", help: str | None = None
):
    """Add one sub-command with the project's help formatting; a top-level command's one-line
    help is its summary in :mod:`gpuready.cli.commands`."""
    if help is None:
        from gpuready.cli.commands import BY_NAME

        help = BY_NAME[name].summary
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


# The values --restart's options take when none is given (valid: a transaction runs with them).
RESTART_DEFAULTS = {"address": "unix:///run/containerd/containerd.sock", "restart_command": None,
                    "restart_timeout": 60.0, "probe": False}


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
        default=RESTART_DEFAULTS["address"],
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
        default=RESTART_DEFAULTS["restart_timeout"],
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


def add_engine(parser: argparse.ArgumentParser) -> None:
    """``--engine``: which container engine's config to work on."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="containerd, docker or crio (default: detected from the node under --root: "
        "containerd when it is there or nothing is found)",
    )


def add_docker_address(parser: argparse.ArgumentParser) -> None:
    """``--docker-address``: dockerd's API socket, for --reload and verify."""
    parser.add_argument(
        "--docker-address",
        default=DOCKER_ADDRESS,
        metavar="ADDRESS",
        help=f"dockerd's API socket for --engine docker (default: {DOCKER_ADDRESS})",
    )


def add_docker_version(parser: argparse.ArgumentParser) -> None:
    """``--docker-version``: the Docker release whose keys apply."""
    parser.add_argument(
        "--docker-version",
        metavar="X.Y",
        help="with --engine docker: the Docker release whose keys apply (default: the installed "
        "dockerd's, when --root is /)",
    )


def engine_name(args: argparse.Namespace, *, config: str | None = None) -> str:
    """The engine asked for, else guessed from an explicit config file, else detected."""
    if getattr(args, "engine", None):
        return args.engine
    if config:
        return "docker" if config.endswith(".json") else "containerd"
    from pathlib import Path

    from gpuready.engines import detect

    return detect(Path(args.root)).name
