"""``gpuready doctor``: check a whole node the way containerd and the kubelet will see it."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests
from gpuready.cli.common import add_command, add_distribution, add_root, add_runtime_name

DESCRIPTION = """\
Check a node: the containerd config and its imports merged as containerd merges them (1.x: a
later plugin table replaces the earlier one whole; 2.x: tables merge key by key), the
RuntimeClass manifests against the registered runtimes, the CDI specs in /etc/cdi and
/var/run/cdi, and the cgroup drivers against the kubelet's and whether systemd runs (under
--root: only what the root holds says). Every path is looked up under --root.

It first says who owns containerd on the node (plain containerd, k3s, RKE2, k0s, MicroK8s,
kubespray, the GPU Operator), from which files, and checks the config that owner makes
containerd read; --distribution NAME overrides the detection.

The containerd release whose rules apply comes from --containerd-version, else from
'containerd --version', else from the config version (1, 2: 1.x; 3, 4: 2.x).
"""

EPILOG = """\

examples:
  gpuready doctor
  gpuready doctor --root /mnt/node-image --containerd-version 1.7.20
  gpuready doctor --runtimeclass runtimeclass.yaml --format json
  gpuready doctor --engine docker
  gpuready doctor --engine crio --root /mnt/node-image
"""


def register(subparsers) -> None:
    """Add the ``doctor`` sub-command."""
    from gpuready.cli.cmd_lint import add_rule_selection

    parser = add_command(
        subparsers,
        "doctor",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    add_root(parser)
    add_distribution(parser)
    add_runtime_name(parser)
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the main containerd config (default: the one the node's owner makes containerd "
        "read, under --root: /etc/containerd/config.toml for plain containerd)",
    )
    parser.add_argument(
        "--runtimeclass",
        action="append",
        default=[],
        metavar="FILE",
        help="a RuntimeClass manifest to check (repeatable; default: "
        "/root/toolkit/runtimeclass.yaml under --root when present)",
    )
    add_rule_selection(parser)
    from gpuready.cli.common import add_docker_version, add_engine

    add_engine(parser)
    add_docker_version(parser)
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Doctor:
    """``doctor``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Doctor, vars(args))


def run(request: requests.Doctor) -> int:
    """Check the node; return the exit code."""
    from pathlib import Path

    from gpuready.cli.common import detect_owner
    from gpuready.errors import ExitCode
    from gpuready.reporting import render
    from gpuready.rules import selection
    from gpuready.rules.context import Options
    from gpuready.rules.engine import doctor

    engine = common.engine_name(request, config=request.config)
    if engine != "containerd":
        from gpuready.cli import engine_cli

        return engine_cli.lint(request, engine, doctor=True)
    selected = selection(select=request.select, ignore=request.ignore)
    detection = detect_owner(request)
    report = doctor(
        options=Options(runtime_name=request.runtime_name, root=Path(request.root)),
        selected=selected,
        config_path=Path(request.config) if request.config else None,
        runtimeclass_paths=[Path(p) for p in request.runtimeclass],
        containerd_version=request.containerd_version,
        detection=detection,
    )
    text = render(request.format, report.problems, files=report.files, command="doctor")
    if request.format == "json":
        import json

        document = json.loads(text)
        document["owner"] = detection.to_dict()
        document["config"] = str(main_config(request, detection))
        text = json.dumps(document, indent=2) + "\n"
    elif request.format == "text":
        text = "\n".join(header(request, detection)) + "\n" + text
    print(text, end="")
    return ExitCode.CHECK_FAILED if report.failed else ExitCode.OK


def main_config(request: requests.Doctor, detection) -> object:
    """The main config doctor read: ``--config`` as given, else the owner's (a node path)."""
    return request.config or detection.owner.config


READS_PREFIX = "  containerd reads: "


def header(request: requests.Doctor, detection) -> list[str]:
    """The owner's lines, where the file named is the one doctor read: with ``--config`` it
    is that file, and the owner's default is said as such, not as the file checked."""
    import os

    from gpuready.node import Node

    lines = detection.describe()
    owners = Node(request.root).path(detection.owner.config)
    if not request.config or os.path.abspath(request.config) == os.path.abspath(owners):
        return lines
    checked = (f"  config checked: {request.config} (--config; without it: "
               f"{detection.owner.config}, the owner's)")
    return [checked if line.startswith(READS_PREFIX) else line for line in lines]
