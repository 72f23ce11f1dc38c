"""``gpuready agent``: the node agent of the DaemonSet in ``deploy/kubernetes``."""

from __future__ import annotations

import argparse

from gpuready.cli import requests
from gpuready.cli.common import add_command

DESCRIPTION = """\
Keep the NVIDIA runtime registered on a node, from a pod: the host's / mounted at --root (the
DaemonSet mounts each node path it uses at /host/<path>), the settings a YAML file outside the
root (the ConfigMap). On start and on every change it sees (the config files and their
folders, the CDI folders, /dev; inotify, and a pass every interval_seconds), it reads the node
as 'doctor' does, plans as 'configure' does (same gate, same writer, same record), and writes
through the --restart transaction: containerd is restarted only when the config it would run
changed, then verified over the CRI, and everything is put back when that fails. A start with
nothing to change restarts nothing.

Owners it configures as 'configure' does: plain containerd, k3s/RKE2 templates, k0s drop-ins,
MicroK8s's template; kubespray only with force: true. The GPU Operator's toolkit (and its NRI
mode) is reported, never edited.

settings (every key checked at start; a missing or bad one is exit 2):
  runtime_name: nvidia          # the runtime and the RuntimeClass handler
  drop_in: false                # true: /etc/containerd/conf.d/99-nvidia.toml (plain containerd)
  enable_cdi: true              # as configure --enable-cdi
  systemd_cgroup: true          # true, false or inherit
  interval_seconds: 300         # the periodic pass
  force: false                  # as configure --force (kubespray)
  socket: /run/containerd/containerd.sock   # optional; default: the owner's CRI socket
  restart: {method: systemd}    # RestartUnit over /run/dbus/system_bus_socket (under --root)
  # restart: {method: command, command: [nsenter, -t, "1", -m, --, systemctl, restart, containerd]}

reports: GET /healthz (200 while it runs), /readyz (200 only when verified over the CRI),
/metrics (Prometheus: gpuready_restarts_total, gpuready_verdict, gpuready_findings), and node
labels in /etc/kubernetes/node-feature-discovery/features.d/gpuready for Node Feature
Discovery (gpuready.io/runtime.<name>, gpuready.io/containerd, gpuready.io/cdi,
gpuready.io/owner). SIGTERM stops it and changes nothing; a transaction it interrupts keeps its
journal, and the next start finishes it.
"""

EPILOG = """\
examples:
  gpuready agent --root /host --settings /etc/gpuready/settings.yaml
  gpuready agent --root /host --settings /etc/gpuready/settings.yaml --listen 0.0.0.0:9402
"""

DEFAULT_LISTEN = "0.0.0.0:9402"


def register(subparsers) -> None:
    """Add the ``agent`` command."""
    parser = add_command(subparsers, "agent", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--root", required=True, metavar="DIR",
                        help="where the node's / is mounted (the DaemonSet: /host)")
    parser.add_argument("--settings", required=True, metavar="FILE",
                        help="the agent's settings (YAML), outside --root")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="ADDR:PORT",
                        help=f"where /healthz, /readyz and /metrics are served "
                        f"(default: {DEFAULT_LISTEN}; port 0: any free port, printed)")
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Agent:
    """``agent``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Agent, vars(args))


def listen_address(value: str) -> tuple[str, int]:
    """``ADDR:PORT`` as a host and a port; :class:`UsageError` when it is not one."""
    from gpuready.errors import UsageError

    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen {value}: give ADDR:PORT, such as 0.0.0.0:9402")
    return host.strip("[]"), int(port)


def run(request: requests.Agent) -> int:
    """Check the settings, serve the reports, run passes until SIGTERM."""
    import os
    import sys
    from pathlib import Path

    from gpuready.agent.reports import Status, serve
    from gpuready.agent.service import run_agent
    from gpuready.agent.settings import load_settings
    from gpuready.errors import UsageError
    from gpuready.node import Node

    node = Node(request.root)
    if not node.is_host and node.contains(Path(os.path.abspath(request.settings))):
        raise UsageError(f"--settings {request.settings}: lies inside --root {request.root}; "
                         "the agent's settings are its own (the ConfigMap), never the node's")
    settings = load_settings(Path(request.settings))
    host, port = listen_address(request.listen)
    status = Status()
    try:
        server = serve(status, host, port)
    except OSError as error:
        raise UsageError(f"--listen {request.listen}: {error.strerror or error}") from None

    def say(line: str) -> None:
        print(line, flush=True)

    bound = server.server_address
    say(f"gpuready agent: serving http://{bound[0]}:{bound[1]} (/healthz, /readyz, /metrics); "
        f"node at {request.root}; restart: {settings.restart.describe()}")
    try:
        said = run_agent(Path(request.root), settings, status, say=say)
    finally:
        server.shutdown()
    say(said)
    sys.stdout.flush()
    return 0
