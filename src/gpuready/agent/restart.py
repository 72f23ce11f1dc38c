"""How the agent restarts the node's containerd: the settings' own method, never one read from
the node.

- ``command``: the argv, run without a shell, in the agent's own namespaces (``nsenter -t 1 -m
  -- systemctl restart containerd`` is such a command), under the transaction's timeout.
- ``systemd``: ``RestartUnit(unit, "replace")`` on systemd's manager over the system bus at the
  node path ``/run/dbus/system_bus_socket`` under the root (jeepney), then a wait until the job
  is gone: systemd answers with the job's path at once, and a containerd still serving on the
  old config would otherwise be verified (org.freedesktop.systemd1(5), "Methods": RestartUnit
  enqueues a job; the job object disappears once it finished).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path, PurePosixPath

from gpuready.agent.settings import COMMAND, Restart
from gpuready.node import Node
from gpuready.workflow.transaction import OUTPUT_KEPT

SYSTEMD_BUS = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"
UNIT_FOLDERS = ("/etc/systemd/system", "/usr/local/lib/systemd/system",
                "/usr/lib/systemd/system", "/lib/systemd/system")

# The unit that runs each owner's containerd; where an owner has two (server and agent), the
# one whose unit file the node has (the first when it has none). From the owners' sources in
# gpuready.owners.table: containerd's package unit, k3s's install script (k3s, k3s-agent),
# RKE2's packages (rke2-server, rke2-agent), k0s install (k0sworker, k0scontroller).
OWNER_UNITS: dict[str, tuple[str, ...]] = {
    "containerd": ("containerd.service",),
    "kubespray": ("containerd.service",),
    "k3s": ("k3s.service", "k3s-agent.service"),
    "rke2": ("rke2-server.service", "rke2-agent.service"),
    "k0s": ("k0sworker.service", "k0scontroller.service"),
    "microk8s": ("snap.microk8s.daemon-containerd.service",),
}


def owner_unit(owner_name: str, node: Node) -> str:
    """The systemd unit that runs ``owner_name``'s containerd on ``node``."""
    units = OWNER_UNITS.get(owner_name, ("containerd.service",))
    for unit in units:
        if any(node.is_file(node.path(PurePosixPath(folder) / unit)) for folder in UNIT_FOLDERS):
            return unit
    return units[0]


class Restarter:
    """Runs the settings' restart; ``run`` answers as the transaction's host ``shell`` does."""

    def __init__(self, restart: Restart, *, bus_socket: Path, unit: str) -> None:
        self.restart, self.bus_socket, self.unit = restart, bus_socket, unit

    def describe(self) -> str:
        """What runs, for the reports."""
        return self.restart.describe(self.unit)

    def run(self, *, timeout: float) -> tuple[int, str] | None:
        """The exit status and the last of standard error; None when it outlived ``timeout``."""
        if self.restart.method == COMMAND:
            return run_argv(list(self.restart.command), timeout=timeout)
        return restart_unit(self.bus_socket, self.unit, timeout=timeout)


def run_argv(argv: list[str], *, timeout: float) -> tuple[int, str] | None:
    """Run ``argv`` (no shell): its exit status and standard error's tail; None on timeout."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    except OSError as error:
        return 127, f"{argv[0]}: {error.strerror or error}"
    return done.returncode, done.stderr[-OUTPUT_KEPT:].decode("utf-8", errors="replace")


def restart_unit(bus_socket: Path, unit: str, *, timeout: float) -> tuple[int, str] | None:
    """``RestartUnit(unit, "replace")`` over the bus at ``bus_socket``, then wait for its job to
    finish: (0, "") when it did, (1, why) when the bus refused, None after ``timeout``."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.wrappers import DBusErrorResponse, unwrap_msg

    deadline = time.monotonic() + timeout
    manager = DBusAddress(SYSTEMD_PATH, bus_name=SYSTEMD_BUS, interface=SYSTEMD_MANAGER)
    try:
        with open_dbus_connection(bus=f"unix:path={bus_socket}") as connection:
            reply = connection.send_and_get_reply(
                new_method_call(manager, "RestartUnit", "ss", (unit, "replace")),
                timeout=max(deadline - time.monotonic(), 0.1))
            (job,) = unwrap_msg(reply)
            return _wait_for_job(connection, job, deadline)
    except DBusErrorResponse as error:
        return 1, f"RestartUnit {unit}: {error.name}: {' '.join(map(str, error.data))}"
    except TimeoutError:
        return None
    except (OSError, ValueError) as error:
        return 1, f"the system bus at {bus_socket}: {getattr(error, 'strerror', None) or error}"


def _wait_for_job(connection, job: str, deadline: float) -> tuple[int, str] | None:
    """Poll the job's ``State`` until systemd no longer knows the job (it finished)."""
    from jeepney import DBusAddress, Properties
    from jeepney.wrappers import DBusErrorResponse, unwrap_msg

    properties = Properties(DBusAddress(job, bus_name=SYSTEMD_BUS,
                                        interface="org.freedesktop.systemd1.Job"))
    while time.monotonic() < deadline:
        try:
            unwrap_msg(connection.send_and_get_reply(
                properties.get("State"), timeout=max(deadline - time.monotonic(), 0.1)))
        except DBusErrorResponse:
            return 0, ""  # the job object is gone: the restart finished
        time.sleep(0.2)
    return None
