"""Options shared by several commands, so each is spelled and documented once."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuready.cli.formatting import Formatter
from gpuready.paths import NVIDIA_RUNTIME_BINARY

FORMATTER = Formatter
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

if TYPE_CHECKING:
    from gpuready.cli import requests


def add_command(
    subparsers, name: str, *, description: str, epilog: str = "", help: str | None = None
):
    """Add one sub-command with the project's help formatting; a top-level command's one-line
    help (None here) is its summary in :mod:`gpuready.cli.commands`, which
    :func:`gpuready.cli.main.build_parser` fills in."""
    return subparsers.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=FORMATTER
    )


class EngineAddress(argparse.Action):
    """``--address`` and its alias ``--docker-address``: the chosen engine's endpoint.

    Stores the value under the option's own name, and (for every engine) as ``engine_address``
    with the option that gave it (``engine_address_flag``), so that gpuready can tell an address
    given on the command line (which wins over ``DOCKER_HOST``) from a default. Two options that
    name different addresses are a usage error.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        """Store ``values``; refuse a second, different address."""
        given = getattr(namespace, "engine_address", None)
        if given is not None and given != values:
            raise argparse.ArgumentError(
                self, f"{values!r} is not the address {namespace.engine_address_flag} gave "
                f"({given!r}): --docker-address is --address with --engine docker")
        setattr(namespace, self.dest, values)
        namespace.engine_address = values
        namespace.engine_address_flag = option_string


def containerd_address(request: requests.AnyRequest, *, default: str) -> str:
    """containerd's socket: ``--address`` when given, else ``CONTAINERD_ADDRESS`` as ``ctr`` reads
    it (a socket path; ``unix:///PATH`` is taken too), else ``default`` (what gpuready detects).

    Under ``--root`` the socket is the node's: its path lies inside the root (a cluster agent
    with the host at ``/host`` reaches ``/host/run/containerd/containerd.sock``), never this
    machine's own socket of the same name."""
    import os

    given = getattr(request, "engine_address", None)
    value = os.environ.get("CONTAINERD_ADDRESS", "")
    if given:
        option = getattr(request, "engine_address_flag", None) or "--address"
        address = _without_control(given, f"{option} {given}")
    elif not value:
        address, option = default, "--address"
    else:
        option = "CONTAINERD_ADDRESS"
        _without_control(value, f"CONTAINERD_ADDRESS={value}")
        if value.startswith("/"):
            address = "unix://" + value
        elif value.startswith("unix:///"):
            address = value
        else:
            from gpuready.errors import UsageError

            raise UsageError(f"CONTAINERD_ADDRESS={value}: give containerd's socket as a path "
                             "(/run/containerd/containerd.sock) or unix:///PATH, or pass "
                             "--address")
    return node_socket(request.root, address, option=option)


def node_socket(root: str, address: str, *, option: str) -> str:
    """``address`` (``unix:///PATH`` or a path) as the node's socket: under a ``root`` other
    than ``/``, its path inside the root (:meth:`gpuready.node.Node.named`); any other scheme as
    given (refused where it is used)."""
    if root == "/":
        return address
    path = address[len("unix://"):] if address.startswith("unix://") else address
    if not path.startswith("/"):
        return address
    from gpuready.node import Node

    return "unix://" + Node(root).named(path, option=option)


def _without_control(value: str, shown: str) -> str:
    """``value``, or a UsageError naming ``shown``: a socket path holds no control character
    (a newline in an address would name another socket in every message and command shown)."""
    from gpuready.terminal import has_control

    if has_control(value):
        from gpuready.errors import UsageError

        raise UsageError(f"{shown!r}: holds a control character; give containerd's socket as a "
                         "path (/run/containerd/containerd.sock) or unix:///PATH")
    return value


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


def add_runtime_to_remove(parser: argparse.ArgumentParser) -> None:
    """``--runtime-name`` of ``unconfigure``: the one runtime to take back (default: every
    runtime gpuready's record names)."""
    parser.add_argument(
        "--runtime-name",
        default=None,
        type=runtime_name,
        metavar="NAME",
        help="take back only this runtime, one gpuready registered (default: everything "
        "gpuready's record names); a name it never registered is refused (exit 2)",
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
    from gpuready.kubernetes.labels import label_problem

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
        metavar="X.Y[.Z]",
        help="the containerd release the node runs (1.6, 1.7, 2.1, 2.3, or a patch release "
        "such as 1.7.30; others are read as the nearest). Default: on this machine "
        "'containerd --version'; under --root the "
        "root's package database; else the config's version (2: 1.7, 3: 2.1, 4: 2.3)",
    )


# The values --restart's options take when none is given (valid: a transaction runs with them).
RESTART_DEFAULTS = {"address": "unix:///run/containerd/containerd.sock", "restart_command": None,
                    "restart_timeout": 60.0, "probe": False, "probe_image": "node",
                    "probe_binary": "/bin/busybox"}


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
        action=EngineAddress,
        metavar="ADDRESS",
        help="the chosen engine's socket: containerd's CRI socket (default: $CONTAINERD_ADDRESS "
        "when set, else unix:///run/containerd/containerd.sock); with --engine docker, "
        "dockerd's API socket for --reload (default: $DOCKER_HOST when set, else "
        f"{DOCKER_ADDRESS}). Under --root a node path inside the root",
    )
    group.add_argument(
        "--restart-command",
        metavar="CMD",
        help="restart containerd with this shell command (default: systemctl restart "
        "containerd; under --root required: this machine's containerd is not the node's)",
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
    add_probe_image(group)


def add_probe_image(parser) -> None:
    """``--probe-image`` and ``--probe-binary``: where the probe's pause image comes from."""
    parser.add_argument(
        "--probe-image",
        choices=("node", "build"),
        default="node",
        help="node: use containerd's pause image (pulled if absent); build: if it is absent, "
        "build a stand-in from --probe-binary and import it under the pause image's name with "
        "ctr. Every pod on the node then uses that stand-in as its pause container until the "
        "real image is imported (ctr --address SOCKET -n k8s.io images rm NAME removes it) "
        "(default: node)",
    )
    parser.add_argument(
        "--probe-binary",
        default="/bin/busybox",
        metavar="PATH",
        help="static binary for --probe-image build (default: /bin/busybox from busybox-static)",
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


def detect_owner(request: requests.AnyRequest):
    """The :class:`~gpuready.owners.detect.Detection` for ``--root`` and ``--distribution``."""
    from gpuready.node import Node
    from gpuready.owners.detect import detect

    return detect(Node(request.root), distribution=request.distribution)


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
    """``--docker-address``: dockerd's API socket, for --reload and verify; an alias of
    ``--address`` with --engine docker. Given neither, gpuready reads ``DOCKER_HOST`` (see
    :func:`gpuready.cli.engine_cli.docker_address`)."""
    parser.add_argument(
        "--docker-address",
        action=EngineAddress,
        default=None,
        metavar="ADDRESS",
        help="with --engine docker, the same as --address: dockerd's API socket, unix:///PATH "
        f"(default: $DOCKER_HOST when set, else {DOCKER_ADDRESS})",
    )


def add_docker_version(parser: argparse.ArgumentParser) -> None:
    """``--docker-version``: the Docker release whose keys apply."""
    parser.add_argument(
        "--docker-version",
        metavar="X.Y",
        help="with --engine docker: the Docker release whose keys apply (default: the installed "
        "dockerd's, when --root is /)",
    )


def engine_name(request: requests.AnyRequest, *, config: str | None = None) -> str:
    """The engine asked for, else guessed from an explicit config file, else detected."""
    if getattr(request, "engine", None):
        return request.engine
    if config:
        return "docker" if config.endswith(".json") else "containerd"
    from pathlib import Path

    from gpuready.engines import detect

    return detect(Path(request.root)).name
