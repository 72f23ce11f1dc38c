"""Docker behind the engine interface."""

from __future__ import annotations

from pathlib import Path

from gpuready.engines.base import RuntimeChange, removing_created
from gpuready.engines.docker import config as daemon_json
from gpuready.engines.docker.facts import DAEMON_JSON, FACTS
from gpuready.node import Node
from gpuready.plan import Plan


class DockerEngine:
    """Docker's ``daemon.json`` (:mod:`gpuready.engines.docker.config`)."""

    facts = FACTS

    def config_path(self, node: Node) -> Path:
        """``/etc/docker/daemon.json`` on ``node``."""
        return node.path(DAEMON_JSON)

    def plan_add_runtime(self, path: Path, change: RuntimeChange, *, node: Node) -> Plan:
        """Register the runtime; then ``features.cdi`` and ``default-runtime`` when asked."""
        from gpuready.engines.docker.installed import installed_release

        current = daemon_json.load_daemon_config(path, node=node)
        parts = [lambda cfg: daemon_json.plan_add_runtime(
            cfg, daemon_json.DockerRuntime(change.name, change.binary))]
        if change.enable_cdi:
            parts.append(lambda cfg: daemon_json.plan_enable_cdi(cfg, release=installed_release()))
        if change.set_as_default:
            parts.append(lambda cfg: daemon_json.plan_default_runtime(cfg, change.name))
        return chain(current, parts)

    def plan_remove_runtime(self, path: Path, name: str, *, node: Node) -> list[Plan]:
        """Remove ``runtimes.NAME`` (and a ``default-runtime`` naming it); a daemon.json
        gpuready created and left as ``{}`` is removed."""
        plan = daemon_json.plan_remove_runtime(daemon_json.load_daemon_config(path, node=node),
                                               name)
        return [removing_created(plan, node=node, empty=("{}",))]

    def default_runtime(self, path: Path, *, node: Node) -> str | None:
        """``default-runtime``, or dockerd's own default ``runc``."""
        data = daemon_json.load_daemon_config(path, node=node).data
        value = data.get("default-runtime", "runc")
        return value if isinstance(value, str) else None

    def runtimes(self, path: Path, *, node: Node) -> dict[str, dict]:
        """The ``runtimes`` entries of daemon.json."""
        return {name: value for name, value in
                daemon_json.load_daemon_config(path, node=node).runtimes().items()
                if isinstance(value, dict)}


def plan_leftovers(path: Path, plans: list[Plan], *, node: Node) -> list[Plan]:
    """``unconfigure``'s plans, plus the removal of the backup gpuready kept of ``path`` when
    nothing else takes it back (the file was edited since gpuready wrote it, so the removal
    edits it instead of restoring the backup).

    Only a backup gpuready provably made goes, as its record says: one holding the very text the
    record names as the file's original (its SHA-256), or, when this run's own write of the file
    makes the backup, that new one. A backup the operator put there, or one with other content,
    stays. Without a record there is nothing to go by, and nothing is removed.
    """
    from gpuready.containerd.record import load_record, read_backup, sha256
    from gpuready.fsio import backup_path

    record = load_record(path, node=node)
    entry = None if record is None else record["files"].get(str(path))
    backup = backup_path(node.writable(path))
    if entry is None or any(plan.path == backup for plan in plans):
        return plans
    kept = read_backup(backup, node=node)
    edit = plans[0]
    if kept is None:
        writes = edit.changes and edit.before is not None and edit.after is not None
        if not writes:
            return plans
        # the writer keeps the file as it is now before changing it: that backup is this run's
        return [edit, Plan(backup, edit.before, None, "remove the backup this run made"),
                *plans[1:]]
    if entry["original"] is None or sha256(kept) != entry["original"]:
        return plans
    summary = f"{edit.summary}; remove gpuready's backup {backup.name}"
    return [edit._replace(summary=summary),
            Plan(backup, kept, None, "remove gpuready's backup"), *plans[1:]]


def chain(current: daemon_json.DaemonConfig, parts) -> Plan:
    """Each part planned on the text the one before produced, as one plan."""
    plans = []
    for part in parts:
        plan = part(current)
        plans.append(plan)
        if plan.changes:
            current = daemon_json.parse_daemon_config(plan.after, current.path)
    first = plans[0]
    changed = [plan.summary for plan in plans if plan.changes]
    summary = "; ".join(changed or [plan.summary for plan in plans])
    notes = tuple(note for plan in plans for note in plan.notes)
    return Plan(first.path, first.before, plans[-1].after if changed else first.after,
                summary, notes)


ENGINE = DockerEngine()
