"""``gpuready check``: verify what ``setup`` produced, one line per check."""

from __future__ import annotations

import argparse
import json

from gpuready.cli import common, requests

DESCRIPTION = """\
Re-read every file of the registration contract and verify it: config.toml parses; runc and the
NVIDIA runtime are registered; default_runtime_name is runc; SystemdCgroup is the boolean true and
the cgroup drivers agree (the verdict doctor gives: a warning when runc differs and the kubelet's
driver is unknown, a failure when a runtime differs from the kubelet's configured driver, or
uses systemd's on a node where systemd does not run: there SystemdCgroup must be false);
the RuntimeClass handler equals a registered runtime; the CDI spec has kind nvidia.com/gpu; and
default.txt, parsed.txt, cdi-keys.txt and report.txt say what the files they describe say.
"""

EPILOG = """\
examples:
  gpuready check                          # the node itself
  gpuready check --root /tmp/node         # a sandbox copy written by 'gpuready setup --root'
  gpuready check --format json | jq .status
  gpuready check --engine docker          # what 'setup --engine docker' produced
"""


def register(subparsers) -> None:
    """Add the ``check`` command."""
    parser = common.add_command(
        subparsers,
        "check",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    common.add_root(parser)
    common.add_containerd_version(parser)
    common.add_distribution(parser)
    common.add_runtime_name(parser)
    parser.add_argument(
        "--toolkit-dir", default="/root/toolkit", metavar="DIR",
        help="node folder of the toolkit files (default: /root/toolkit)",
    )
    common.add_format(parser)
    parser.add_argument(
        "--engine", choices=("containerd", "docker"), default="containerd",
        help="check what 'setup --engine docker' produced (daemon.json instead of config.toml)",
    )
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Check:
    """``check``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Check, vars(args))


def run(request: requests.Check) -> int:
    """Run every contract check and print them."""
    from pathlib import PurePosixPath

    from gpuready.node import Node
    from gpuready.workflow.contract import NodeFiles, contract_checks

    if request.engine == "docker":
        from gpuready.workflow.docker_setup import docker_checks, docker_files

        files = docker_files(Node(request.root), PurePosixPath(request.toolkit_dir))
        checks = docker_checks(files, request.runtime_name, files.read)
    else:
        node = Node(request.root)
        detection = common.detect_owner(request)
        owner = detection.owner
        # on an owned node: the config the owner will generate, as setup reported it
        files = NodeFiles.on(node, PurePosixPath(request.toolkit_dir))
        read = files.read
        if not owner.owns_runtime_config:  # (rendering an owner's config needs its template code)
            from gpuready.owners.effective import contract_view

            files, read = contract_view(owner, node, files)
        checks = contract_checks(files, request.runtime_name, read,
                                 containerd_version=request.containerd_version,
                                 detection=detection)
    ok = all(check.ok for check in checks)
    if request.format == "json":
        print(json.dumps({"status": "ok" if ok else "failed",
                          "checks": [check._asdict() for check in checks]}, indent=2))
        return 0 if ok else 1
    for check in checks:
        mark = ("warn" if check.warning else "ok  ") if check.ok else "FAIL"
        print(f"{mark} {check.name}: {check.detail}")
        if not check.ok or check.warning:
            print(f"     fix: {check.fix}")
    failed = sum(not check.ok for check in checks)
    warned = sum(check.ok and check.warning for check in checks)
    print(f"{len(checks) - failed} passed ({warned} with a warning), {failed} failed"
          if warned else f"{len(checks) - failed} passed, {failed} failed")
    return 0 if ok else 1
