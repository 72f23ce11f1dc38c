"""``gpuready verify --live``: prove the running containerd routes the handler to the runtime."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests
from gpuready.cli.common import (
    add_command,
    add_containerd_version,
    add_distribution,
    add_format,
    add_root,
    add_runtime_name,
)

DEFAULT_ADDRESS = "unix:///run/containerd/containerd.sock"

DESCRIPTION = """\
Ask the running containerd, through the CRI, which runtime handlers it loaded (what
'crictl info' shows), and compare them with the config file on disk: the runtime present, its
runtime_type, BinaryName and SystemdCgroup, the default runtime, enable_cdi. A runtime on disk but
not live means containerd was not restarted or reads another file; gpuready says which. On a
node that shows no systemd, a loaded runc runtime with SystemdCgroup = true fails the check
(systemd-cgroup-without-systemd, as doctor says it): its first sandbox would fail.

With --probe, start a throw-away pod sandbox through the handler (host network, no CNI needed),
the way the kubelet starts a pod with that RuntimeClass, check that containerd decoded the runtime
type, BinaryName and SystemdCgroup the config intends for it (a sandbox that came up through plain
runc fails), and stop and remove it again, also on Ctrl-C or timeout. No GPU is needed.
"""

EPILOG = """\
examples:
  gpuready verify --live
  gpuready verify --live --runtimeclass runtimeclass.yaml --probe
  gpuready verify --live --probe --probe-image build   # air-gapped node, no pause image
  gpuready verify --live --engine docker --probe       # dockerd: /info, then a throw-away container
"""


def register(subparsers) -> None:
    """Add the ``verify`` command."""
    parser = add_command(
        subparsers,
        "verify",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument(
        "--live", action="store_true", help="ask the running containerd (required for now)"
    )
    parser.add_argument(
        "--address",
        action=common.EngineAddress,
        metavar="ADDRESS",
        help="the chosen engine's socket: containerd's CRI socket (default: $CONTAINERD_ADDRESS "
        f"when set, else the socket of the node's owner: {DEFAULT_ADDRESS} for plain containerd, "
        "unix:///run/k3s/containerd/containerd.sock for k3s and RKE2, ...); with --engine "
        "docker, dockerd's API socket (default: $DOCKER_HOST when set, else "
        "unix:///var/run/docker.sock). Under --root every socket is a node path inside the "
        "root",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="the config file to compare with (default: the one the node's owner makes "
        "containerd read, under --root)",
    )
    add_root(parser)
    add_distribution(parser)
    add_runtime_name(parser)
    add_containerd_version(parser)
    parser.add_argument(
        "--handler",
        dest="runtime_handler",  # "handler" is the command's dispatch function
        metavar="NAME",
        help="RuntimeClass handler to check (default: --runtime-name)",
    )
    parser.add_argument(
        "--runtimeclass",
        action="append",
        default=[],
        metavar="FILE",
        help="RuntimeClass manifest whose handler must be a live runtime (repeatable)",
    )
    parser.add_argument(
        "--probe", action="store_true", help="start and remove a pod sandbox through the handler"
    )
    common.add_probe_image(parser)
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="per CRI call (default: 10)"
    )
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="for the probe sandbox to become ready (default: 60)",
    )
    add_format(parser)
    from gpuready.cli.common import add_docker_address, add_engine

    add_engine(parser)
    add_docker_address(parser)
    parser.set_defaults(handler=run)


def options_from(request: requests.Verify):
    """The :class:`~gpuready.cri.verify.VerifyOptions` for parsed arguments."""
    from pathlib import Path

    from gpuready.cli.common import detect_owner
    from gpuready.cri.verify import VerifyOptions
    from gpuready.errors import UsageError
    from gpuready.node import Node

    if not request.live:
        raise UsageError("verify needs --live (it asks the running containerd)")
    if request.timeout <= 0 or request.probe_timeout <= 0:
        raise UsageError("--timeout and --probe-timeout must be positive")
    root = Path(request.root)
    owner = detect_owner(request).owner
    # The owner's socket at its node path: inside the root under --root (containerd_address).
    return VerifyOptions(
        address=common.containerd_address(request, default=f"unix://{owner.socket}"),
        config_path=Path(request.config) if request.config else Node(root).path(owner.config),
        root=root,
        runtime_name=request.runtime_name,
        handler=request.runtime_handler or request.runtime_name,
        runtimeclass_files=tuple(Path(f) for f in request.runtimeclass),
        probe=request.probe,
        probe_image=request.probe_image,
        probe_binary=Path(request.probe_binary),
        timeout=request.timeout,
        probe_timeout=request.probe_timeout,
        containerd_version=request.containerd_version,
        judge_systemd=judges_node(request, root),
    )


def judges_node(request: requests.Verify, root) -> bool:
    """Whether the node's facts (does systemd run?) judge what the running containerd loaded:
    for the config the node's owner makes it read, or a ``--config`` in the node's containerd
    folder; a containerd compared with a working copy elsewhere is a lab, not the node."""
    from pathlib import Path

    from gpuready.node import Node
    from gpuready.rules.effect import in_containerd_folder

    return request.config is None or in_containerd_folder(Path(request.config), node=Node(root))


def request_from(args: argparse.Namespace) -> requests.Verify:
    """``verify``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Verify, vars(args))


def run(request: requests.Verify) -> int:
    """Verify against the running containerd and print the report."""
    import json

    from gpuready.cri.verify import verify_live
    from gpuready.errors import ExitCode

    engine = common.engine_name(request, config=request.config)
    if engine != "containerd":
        from gpuready.cli import engine_cli

        return engine_cli.verify(request, engine)
    report = verify_live(options_from(request))
    if request.format == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(text_lines(report)))
    return ExitCode.OK if report.ok else ExitCode.CHECK_FAILED


def _show(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _decoded(decoded, field_name: str) -> str:
    if not decoded.known:
        return "unknown"
    shown = _show(decoded.value)
    return f"{shown} (as {decoded.key})" if decoded.key not in (None, field_name) else shown


def runtime_table(report) -> list[str]:
    """The live handler table: name, runtime_type, and BinaryName and SystemdCgroup as the
    running containerd decodes them for the shim (``(as binaryName)`` for another spelling)."""
    rows = [("HANDLER", "RUNTIME_TYPE", "BINARYNAME", "SYSTEMDCGROUP")]
    for name, runtime in sorted(report.runtimes.items()):
        marker = " (default)" if name == report.default_runtime_name else ""
        rows.append(
            (
                name + marker,
                runtime.runtime_type or "-",
                _decoded(runtime.field("BinaryName"), "BinaryName"),
                _decoded(runtime.field("SystemdCgroup"), "SystemdCgroup"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        "  " + "  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row))
        for row in rows
    ]


def text_lines(report) -> list[str]:
    """The human-readable report."""
    version = report.version
    served = f", pid {report.served_by.pid}" if report.served_by else ""
    lines = [
        f"{version.runtime_name} {version.runtime_version} (CRI {version.runtime_api_version}) "
        f"at {report.address}{served}; compared with {report.config_path}",
        "live runtime handlers:",
        *runtime_table(report),
    ]
    lines += [f"{check.outcome.value:<8}{check.message}" for check in report.checks]
    if report.pause_image and report.pause_image.built:
        from gpuready.cri.verify import ctr_command

        name = report.pause_image.name
        lines.append(
            f"{'built':<8}pause image {name} (a stand-in imported with ctr; pods use it until the "
            f"real image is imported: {ctr_command(report.address, 'rm ' + name)} removes it)"
        )
    if report.probe:
        probe = report.probe
        outcome = "ok" if probe.ok and probe.removed else "failed"
        if outcome == "ok" and probe.proof == "unreadable":
            outcome = "unproven"
        cleanup = "; removed" if probe.removed else f"; {probe.cleanup_error}"
        lines.append(f"{'probe':<8}{outcome}: {probe.message} ({probe.seconds:g}s){cleanup}")
    lines.append(f"status: {'ok' if report.ok else 'failed'}")
    return lines
