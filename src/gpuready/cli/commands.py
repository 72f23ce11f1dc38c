"""The commands, in the order ``--help`` lists them: name, the module that defines it, and the
one line ``gpuready --help`` shows for it.

The command line reads this table to list the commands without importing them: a run imports
the one module of the command it runs, and ``--help`` imports none.
"""

from __future__ import annotations


class Command:
    """One sub-command of ``gpuready``: its name, its module, its one-line summary, and whether
    its work is unbounded (``lasting``: a fleet, a watch), so that it collects cyclic garbage
    as it goes; the others run with the collector off (:func:`gpuready.cli.main.entrypoint`)."""

    __slots__ = ("lasting", "module", "name", "summary")

    def __init__(self, name: str, module: str, summary: str, *, lasting: bool = False) -> None:
        self.name, self.module, self.summary, self.lasting = name, module, summary, lasting


COMMANDS: tuple[Command, ...] = (
    Command("setup", "gpuready.cli.cmd_setup",
            "run the whole workflow: register, CDI spec, RuntimeClass, report"),
    Command("configure", "gpuready.cli.cmd_configure",
            "register the NVIDIA runtime in an existing containerd config"),
    Command("unconfigure", "gpuready.cli.cmd_unconfigure",
            "remove exactly what gpuready configure or setup added"),
    Command("show-config", "gpuready.cli.cmd_show_config",
            "print the effective containerd config (main file and imports merged)"),
    Command("migrate", "gpuready.cli.cmd_migrate",
            "upgrade a containerd config and its imports to version 3 or 4, keeping comments"),
    Command("check", "gpuready.cli.cmd_check",
            "verify the files setup produced against the contract"),
    Command("lint", "gpuready.cli.cmd_lint", "check containerd config files"),
    Command("doctor", "gpuready.cli.cmd_doctor",
            "check a whole node (config, imports, RuntimeClass, CDI)"),
    Command("audit", "gpuready.cli.cmd_audit",
            "check many nodes' fetched files in parallel and summarise", lasting=True),
    Command("rules", "gpuready.cli.cmd_rules", "list or explain the rules"),
    Command("cdi", "gpuready.cli.cmd_cdi",
            "validate, generate and list CDI specs (no GPU needed)"),
    Command("verify", "gpuready.cli.cmd_verify",
            "prove that the running containerd serves the GPU runtime handler"),
    Command("agent", "gpuready.cli.cmd_agent",
            "keep a node configured and verified from a DaemonSet pod, with health and labels",
            lasting=True),
)

BY_NAME = {command.name: command for command in COMMANDS}
