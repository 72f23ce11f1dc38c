"""``gpuready setup``: the registration contract's eight steps, end to end."""

from __future__ import annotations

import argparse
import json
import os
import sys

from gpuready.cli import common, requests
from gpuready.cli.cmd_configure import add_runtime_options, runtime_request

DESCRIPTION = """\
Run the eight steps of the registration contract, in order, and verify the result:

  1. stage the base config at /etc/containerd/config.toml, create the toolkit folder
  2. add [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia] (at the table the
     file's version reads) with runtime_type = "io.containerd.runc.v2"
  3. set its options: BinaryName and SystemdCgroup = true (a TOML boolean); false where the
     node shows that systemd does not run, unless --systemd-cgroup chooses
  4. read default_runtime_name and write default.txt (DEFAULT=runc, WHY=runtimeclass)
  5. parse config.toml with tomllib and write parsed.txt (VERSION, RUNTIMES)
  6. keep /etc/cdi/nvidia.yaml (checked for kind: nvidia.com/gpu) or generate it; cdi-keys.txt
  7. write runtimeclass.yaml (node.k8s.io/v1 RuntimeClass, handler = the runtime name)
  8. write report.txt: five lines, every value parsed back from the files just written

Base config, first found: --base FILE; the existing /etc/containerd/config.toml (edited in
place); /opt/fixtures/gpu-airgap/containerd/config.toml.base; `containerd config default`;
gpuready's built-in version 2 base. Every path is taken under --root. Running setup again
changes no byte.

Like configure, setup keeps a record of what it changed beside the config
(<config>.gpuready.json): 'gpuready unconfigure' then gives an existing config its original bytes
back and removes the files setup created (a file edited since is left as it is).
"""

EPILOG = """\
examples:
  gpuready setup --root /tmp/node --dry-run
  gpuready setup --root /tmp/node && cat /tmp/node/root/toolkit/report.txt
  gpuready setup --gpus 8 --format json
  gpuready setup --engine docker --root /tmp/workstation
"""


def register(subparsers) -> None:
    """Add the ``setup`` command."""
    parser = common.add_command(
        subparsers,
        "setup",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    common.add_root(parser)
    common.add_containerd_version(parser)
    common.add_distribution(parser)
    parser.add_argument("--base", metavar="FILE", help="the base config to start from")
    add_runtime_options(parser)
    parser.set_defaults(systemd_cgroup=None)  # not given: the node decides (true or false)
    common.add_default_confirmation(parser, what="registering under the default runtime's name, or "
                                    "a fix of the default runtime that changes how it runs")
    parser.add_argument(
        "--toolkit-dir",
        default="/root/toolkit",
        type=common.node_folder,
        metavar="DIR",
        help="node folder for default.txt, parsed.txt, cdi-keys.txt, runtimeclass.yaml and "
        "report.txt (default: /root/toolkit); a node path under --root, a relative DIR taken "
        "from the node's top (rel/tk is /rel/tk)",
    )
    parser.add_argument(
        "--gpus",
        type=common.gpu_count,
        default=None,
        metavar="N",
        help="plan a new CDI spec for N GPUs instead of the GPUs found under --root (when none "
        "are found and N is not given: 1)",
    )
    common.add_dry_run(parser)
    common.add_format(parser)
    parser.add_argument(
        "--engine", choices=("containerd", "docker"), default="containerd",
        help="containerd (the contract's engine, default) or docker: the same eight steps where "
        "they apply to Docker; the others say why not, and report.txt says N/A (docker)",
    )
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Setup:
    """``setup``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Setup, vars(args))


def run(request: requests.Setup) -> int:
    """Run the steps, print one line each (and the diffs in a dry run), then the checks."""
    from pathlib import Path, PurePosixPath

    from gpuready.node import Node
    from gpuready.workflow.setup import SetupOptions, run_setup

    if request.engine == "docker":
        from gpuready.errors import UsageError
        from gpuready.workflow.docker_setup import run_docker_setup as run_setup

        if request.base:
            raise UsageError("--base is containerd's: with --engine docker the existing "
                             "daemon.json is kept (or {} created)")

    node = Node(request.root)
    node.check_root()
    new_root = request.root != "/" and not os.path.lexists(request.root)
    if request.engine != "docker":
        from gpuready.cli import daytwo

        daytwo.finish_pending(request)  # a --restart a killed run left on containerd's config
    cgroup_given = request.systemd_cgroup is not None
    # the contract's value, unless the node shows no systemd (the workflow decides then)
    request = request._replace(systemd_cgroup=request.systemd_cgroup or "true")
    options = SetupOptions(
        node=node,
        request=runtime_request(request),
        toolkit_dir=PurePosixPath(request.toolkit_dir),
        base=Path(request.base) if request.base else None,
        gpus=request.gpus,
        dry_run=request.dry_run,
        enable_cri=request.enable_cri,
        detection=common.detect_owner(request),
        containerd_version=request.containerd_version,
        cgroup_given=cgroup_given,
    )
    result = _run_locked(options, run_setup)
    if new_root:  # a mistyped root of an existing node would otherwise pass unnoticed
        made = "would be made" if request.dry_run else "was made"
        print(f"note: --root {request.root} did not exist: a new sandbox node {made} there (if you "
              "meant an existing node, check the path)", file=sys.stderr)
    if request.format == "json":
        print(json.dumps(_as_json(result, dry_run=request.dry_run), indent=2))
    else:
        _print_text(result, dry_run=request.dry_run)
    return 0 if result.ok else 1


def _run_locked(options, run_setup):
    """Run setup holding the lock of every file it may write from the first read to the last
    write, so that a concurrent gpuready waits for it (and says so) instead of failing on a file
    that changed meanwhile. A dry run reads only and takes no lock."""
    if options.dry_run:
        return run_setup(options)
    from gpuready.changeset import locked_all

    with locked_all(_setup_paths(options), node=options.node):
        return run_setup(options)


def _setup_paths(options) -> list:
    """The files ``setup`` may write, for either engine and any owner of containerd."""
    from gpuready.engines.docker.facts import DAEMON_JSON
    from gpuready.workflow.contract import NodeFiles

    files = NodeFiles.on(options.node, options.toolkit_dir)
    paths = [files.config, files.cdi_spec, files.toolkit / "report.txt",
             options.node.path(DAEMON_JSON)]
    if options.detection is not None:
        paths.append(options.node.path(options.detection.owner.config))
    return paths


def _print_text(result, *, dry_run: bool) -> None:
    if dry_run:
        for plan in result.plans:
            sys.stdout.write(plan.diff())
    for step in result.steps:
        print(f"[{step.number}/8] {step.title}: {step.path}: {step.outcome}")
    for note in result.notes:
        print(f"note: {note}")
    if result.record is not None:
        print(f"record of what gpuready changed: kept in {result.record}")
    failed = [check for check in result.checks if not check.ok]
    warned = [check for check in result.checks if check.ok and check.warning]
    for check in warned:
        print(f"warning: {check.detail}\n     fix: {check.fix}")
    for check in failed:
        print(f"FAIL {check.name}: {check.detail}\n     fix: {check.fix}")
    verdict = "would pass" if dry_run else "passed"
    warnings = f", {len(warned)} with a warning" if warned else ""
    if failed:
        print(f"{len(failed)} of {len(result.checks)} checks failed{warnings}")
    else:
        print(f"all {len(result.checks)} checks {verdict}{warnings}" + (
            " (dry run: nothing written)" if dry_run else ""))
    for reason in result.without_effect:
        print(f"gpuready: error: {reason}", file=sys.stderr)


def _as_json(result, *, dry_run: bool) -> dict:
    return {
        "status": "ok" if result.ok else "failed",
        "dry_run": dry_run,
        "steps": [
            {"step": s.number, "title": s.title, "path": str(s.path), "outcome": s.outcome}
            for s in result.steps
        ],
        "notes": result.notes,
        "checks": [check._asdict() for check in result.checks],
        "without_effect": result.without_effect,
        "changed_files": [str(plan.path) for plan in result.plans if plan.changes],
        "record": None if result.record is None else str(result.record),
    }
