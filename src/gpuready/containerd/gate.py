"""The never-break gate: a change to containerd's files is written only if the node stays whole.

Before the one writer (:func:`gpuready.changeset.apply_all`) writes a change that carries a
:class:`Guard`, the guard computes what the node's containerd line loads now and what it would
load from the files as planned (:mod:`gpuready.containerd.model`), and refuses, nothing written,
when the change would:

- lose a runtime containerd loads now (other than one the change removes on purpose);
- stop the CRI plugin from loading, or leave ``default_runtime_name`` naming no runtime (the
  CRI plugin then fails to load, and no pod starts);
- not load the GPU runtime it registers;
- be a config version the node's containerd does not read;
- without the operator's confirmation: change how the default runtime runs (its type, binary
  or options, also through a drop-in or an import), make another runtime the default, or turn a
  runtime of another type (``kata``) into a different one.

Where the node is this machine and its containerd answered ``--version``, that containerd's own
``config dump`` of the staged files decides what is loaded; a disagreement with the model is
said in the notes. A node containerd does not start on now only because an import names no file
(one made at boot, or not copied with a root) is judged as it would load with that file there.

:class:`EngineGuard` applies the same rules to Docker's ``daemon.json`` and CRI-O's drop-in, on
the engine's own reading of its files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuready.containerd.lines import NodeLine
from gpuready.containerd.model import Loaded, build, load_node, without_zero_values
from gpuready.errors import GpureadyError
from gpuready.records import Factory, MutableRecord, Record

CONFIRM_FLAG = "--confirm-every-pod-uses-it"


class RefusedError(GpureadyError):
    """The gate refused the change; nothing was written."""


class Intent(Record):
    """What a change means to do to containerd's runtimes.

    ``adds``: the runtime that must be loaded afterwards (configure, setup); ``removes``: the
    runtimes the change takes away on purpose (unconfigure); ``confirmed``: the operator passed
    the confirmation for changes to the default runtime; ``restores``: the change gives the
    operator's own settings back (unconfigure), so a CRI plugin the operator had disabled may be
    disabled again, the default runtime may become one of ``defaults`` again (what gpuready's
    record says it was before gpuready changed it), and a default runtime among ``removes`` may
    get its own settings back. Any other change of the default is refused for a restore too: a
    backup is a file on the node, and what it holds is judged like any other write.
    """

    adds: str | None = None
    removes: frozenset[str] = frozenset()
    confirmed: bool = False
    restores: bool = False
    defaults: frozenset[str] = frozenset()


class Verdict(MutableRecord):
    """What the node loads before and after the change, and why the change is refused (empty:
    it may be written)."""

    before: Loaded | None
    after: Loaded
    refusals: list[str] = Factory(list)
    notes: list[str] = Factory(list)

    @property
    def ok(self) -> bool:
        """True when the change may be written."""
        return not self.refusals


class Guard(Record):
    """The check one change to a node's containerd files must pass before it is written.

    ``main`` is the config containerd is started with (a host path), ``root`` the node's root.
    """

    main: Path
    root: Path
    line: NodeLine
    intent: Intent = Intent()

    def verdict(self, plans: Sequence[Any], *, ask_installed: bool = True) -> Verdict:
        """Judge ``plans`` (:class:`gpuready.plan.Plan`) against the node as it is now;
        ``ask_installed``: let this machine's containerd have the final word where it can."""
        from gpuready.containerd.record import is_bookkeeping
        from gpuready.node import Node

        node = Node(self.root)
        candidates = {plan.path: plan.after for plan in plans
                      if plan.changes and not is_bookkeeping(plan)}
        before = _current(self.main, node, self.line)
        after = load_node(self.main, node=node, line=self.line, overrides=candidates)
        verdict = Verdict(before, after, notes=list(after.notes))
        dumped = _installed_dump(self, candidates) if candidates and ask_installed else None
        if dumped is not None:
            now, then = dumped
            verdict.notes += _disagreement(after, then)
            # a dump is always in the line's own version: what the files' versions left unread
            # is the model's to say
            then.unread = after.unread
            now.unread = before.unread if before is not None else None
            verdict.before, verdict.after = now, then
        verdict.refusals = judge(verdict.before, verdict.after, self.intent)
        if verdict.after.cri_error and verdict.after.cri_error.startswith("disabled_plugins"):
            from gpuready.rules.effect import enable_cri_hint

            verdict.refusals = [f"{reason}; fix: {enable_cri_hint(node)}"
                                if "disabled_plugins" in reason else reason
                                for reason in verdict.refusals]
        return verdict

    def enforce(self, plans: Sequence[Any]) -> Verdict:
        """:meth:`verdict`, raising :class:`RefusedError` with every reason when it refuses."""
        verdict = self.verdict(plans)
        if verdict.refusals:
            raise RefusedError(refusal_message(self, verdict))
        return verdict


def refusal_message(guard: Guard, verdict: Verdict) -> str:
    """One line: the config, the line that judged it, every reason, and that nothing changed."""
    reasons = "; ".join(verdict.refusals)
    return f"{guard.main}: refusing the change ({guard.line.label}): {reasons}; nothing written"


def judge(before: Loaded | None, after: Loaded, intent: Intent) -> list[str]:
    """The reasons to refuse a change from ``before`` (None: no config yet) to ``after``.

    A node containerd does not start on now because an import names no file (one made at boot,
    say, or not copied with the root) is judged on what the line would load once that file is
    there: the change must not make it worse either.
    """
    if after.refused:
        return [after.refused]
    shared = (before is not None and after.import_missing is not None
              and before.import_missing == after.import_missing)
    if after.import_missing and not shared:
        return [after.import_missing]
    if intent.restores and after.cri_error and after.cri_error.startswith("disabled_plugins"):
        return []  # the node as the operator had it: containerd there for Docker alone

    def usable(loaded: Loaded) -> bool:
        return loaded.cri_error is None and loaded.refused is None and (
            loaded.import_missing is None or shared)

    if after.unread and (intent.adds or before is None or not before.unread):
        # the runtimes are not read at all: nothing else to say about them
        missing = intent.adds and intent.adds not in after.runtimes
        return [after.unread, *([f"runtime {intent.adds!r} would not be loaded"]
                                if missing else [])]
    reasons: list[str] = []
    had = before.runtimes if before is not None and usable(before) else {}
    lost = sorted(set(had) - set(after.runtimes if usable(after) else {}) - intent.removes)
    if before is not None and usable(before) and not usable(after):
        reasons.append(f"the CRI plugin would no longer load: {after.cri_error}")
    elif after.cri_error and before is not None and not usable(before) and \
            before.cri_error == after.cri_error:
        reasons.append(_broken_before(before))
    elif after.cri_error and (intent.adds or before is None or usable(before)):
        reasons.append(f"the CRI plugin would not load: {after.cri_error}")
    if lost and usable(after):
        reasons.append(f"runtime(s) {', '.join(lost)} would no longer be loaded")
    if intent.adds and usable(after) and intent.adds not in after.runtimes:
        reasons.append(f"runtime {intent.adds!r} would not be loaded")
    # giving back what was there before gpuready (unconfigure) may change the default runtime
    # back to what the record says it was: that is the point of it; to anything else, not
    if not intent.confirmed and before is not None:
        if usable(before) and usable(after):
            reasons += (_restored_default_changes(before, after, intent) if intent.restores
                        else _default_changes(before, after))
        if not intent.restores:
            reasons += _taken_over(before, after, intent)
    return reasons


def _broken_before(before: Loaded) -> str:
    """Broken before is not broken by: the node's CRI plugin does not load now, and the change
    leaves it so; the cause is the model's, in the file that holds it."""
    cause = before.cause
    if cause is None or cause.file is None:
        return (f"the CRI plugin does not load now, and would not after this change: "
                f"{before.cri_error}")
    fix = f"; fix: {cause.fix}" if cause.fix else ""
    return (f"the CRI plugin does not load now, and would not after this change: "
            f"{cause.file}: {cause.message}{fix}")


def _default_changes(before: Loaded, after: Loaded) -> list[str]:
    name = after.default_runtime
    if name != before.default_runtime:
        return [f"default_runtime_name would change from {before.default_runtime!r} to "
                f"{name!r}: every pod would run through it (pass {CONFIRM_FLAG} if that is "
                "meant)"]
    changed = _default_runtime_changes(before, after)
    if not changed:
        return []
    return [f"how the default runtime {name!r} runs would change ({', '.join(changed)}): every "
            f"pod on the node would be affected (pass {CONFIRM_FLAG} if that is meant)"]


def _default_runtime_changes(before: Loaded, after: Loaded) -> list[str]:
    """The settings of the default runtime (the same name before and after) that change."""
    name = after.default_runtime
    old = without_zero_values(_as_decoded(before.runtimes.get(name, {})))
    new = without_zero_values(_as_decoded(after.runtimes.get(name, {})))
    return [] if old == new else sorted(_changed_keys(old, new))


def _restored_default_changes(before: Loaded, after: Loaded, intent: Intent) -> list[str]:
    """:func:`_default_changes` for a restore: the default may become what the record says it
    was before gpuready (``intent.defaults``), and a runtime gpuready changed (``removes``) may
    run as it did; any other change comes from a backup or an edit gpuready did not make."""
    name, now = after.default_runtime, before.default_runtime
    unmade = ("gpuready's record does not say the node had it (restore the file by hand if "
              "that is meant)")
    if name != now:
        if name in intent.defaults:
            return []
        return [f"giving the file back would make {name!r} the default runtime instead of "
                f"{now!r}, and every pod would run through it: {unmade}"]
    changed = [] if name in intent.removes else _default_runtime_changes(before, after)
    if not changed or _built_in(after, name):
        return []  # the line's own runtime: a file gpuready created is gone, nothing replaces it
    return [f"giving the file back would change how the default runtime {name!r} runs "
            f"({', '.join(changed)}), for every pod on the node: {unmade}"]


def _built_in(loaded: Loaded, name: str) -> bool:
    """True when runtime ``name`` runs in ``loaded`` as the line runs it with no config file
    (its recorded defaults): what is left once gpuready's files are gone."""
    alone = build([(Path("config.toml"), {})], loaded.line)
    return without_zero_values(_as_decoded(alone.runtimes.get(name, {}))) == \
        without_zero_values(_as_decoded(loaded.runtimes.get(name, {})))


def _as_decoded(value: Any) -> Any:
    """``value`` with booleans written as strings (``"true"``) read as the booleans they mean:
    a spelling fix that keeps the value is not a change of how a runtime runs."""
    from gpuready.containerd.default_runtime import decoded

    if isinstance(value, Mapping):
        return {key: _as_decoded(inner) for key, inner in value.items()}
    return decoded(value)


def _taken_over(before: Loaded, after: Loaded, intent: Intent) -> list[str]:
    reasons = []
    for name, entry in before.runtimes.items():
        if name == before.default_runtime or name not in after.runtimes:
            continue
        old_type = entry.get("runtime_type")
        new_type = after.runtimes[name].get("runtime_type")
        if old_type and new_type != old_type:
            reasons.append(f"runtime {name!r} of type {old_type} would become {new_type} "
                           f"(choose another --runtime-name, or pass {CONFIRM_FLAG})")
    return reasons


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any], at: str = "") -> list[str]:
    changed = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changed += _changed_keys(a, b, f"{at}{key}.")
        elif a != b:
            changed.append(f"{at}{key}")
    return changed


def _current(main: Path, node, line: NodeLine) -> Loaded | None:
    """What the node loads now; None when it has no config yet (containerd runs its defaults)."""
    if not node.is_file(main):
        return None
    return load_node(main, node=node, line=line)


def _installed_dump(guard: Guard, candidates: Mapping[Path, str | None]):
    """``(now, then)`` as this machine's containerd dumps them, when the node is this machine
    and its containerd told the line; None otherwise."""
    from gpuready.node import Node

    if guard.line.source != "containerd --version" or not Node(guard.root).is_host:
        return None
    if not Path(guard.main).is_file():
        return None
    from gpuready.containerd.dump import config_dumps  # subprocess: only when it will run

    now, then = config_dumps(guard.main, root=guard.root, candidate_sets=[{}, candidates])
    if isinstance(now, GpureadyError):
        return None  # containerd refuses the files as they are: the model judges the change
    if isinstance(then, GpureadyError):
        raise RefusedError(f"{guard.main}: refusing the change ({guard.line.label}): "
                           f"{then.message()}; nothing written")
    return build([(guard.main, now)], guard.line), build([(guard.main, then)], guard.line)


def _disagreement(model: Loaded, dumped: Loaded) -> list[str]:
    ours, theirs = sorted(model.runtimes), sorted(dumped.runtimes)
    if ours == theirs and model.default_runtime == dumped.default_runtime:
        return []
    return [f"the installed containerd's config dump loads runtimes {', '.join(theirs) or 'none'}"
            f" where gpuready's model of {model.line.line} expected "
            f"{', '.join(ours) or 'none'}: the dump decides"]


class EngineGuard(Record):
    """The same gate for Docker's ``daemon.json`` and CRI-O's drop-in, judged on the engine's
    own reading of its files (``engine.runtimes`` and ``engine.default_runtime``, which merge
    what the engine merges): no runtime lost, the default runtime kept as it runs, and no
    runtime created under the name the default runtime gives (one that names no runtime yet),
    unless ``intent`` says so."""

    engine: Any
    path: Path
    root: Path
    intent: Intent = Intent()

    def enforce(self, plans: Sequence[Any]) -> None:
        """Raise :class:`RefusedError` when the change to ``path`` would break the node."""
        from gpuready.node import Node

        node = Node(self.root)
        plan = next((p for p in plans if p.path == self.path and p.changes), None)
        if plan is None:
            return
        runtimes = self.engine.runtimes(self.path, node=node)
        default = self.engine.default_runtime(self.path, node=node)
        planned = planned_node(self.root, {self.path: plan.after})
        after_runtimes = self.engine.runtimes(self.path, node=planned)
        after_default = self.engine.default_runtime(self.path, node=planned)
        reasons = _engine_reasons(runtimes, default, after_runtimes, after_default, self.intent)
        if reasons:
            raise RefusedError(f"{self.path}: refusing the change ({self.engine.facts.title}): "
                               f"{'; '.join(reasons)}; nothing written")


def _engine_reasons(runtimes: Mapping[str, Any], default: str | None,
                    after: Mapping[str, Any], after_default: str | None,
                    intent: Intent) -> list[str]:
    reasons = []
    lost = sorted(set(runtimes) - set(after) - intent.removes)
    if lost:
        reasons.append(f"runtime(s) {', '.join(lost)} would no longer be configured")
    if intent.confirmed or default in intent.removes:  # confirmed, or the default taken back
        return reasons
    if after_default != default:
        reasons.append(f"the default runtime would change from {default!r} to "
                       f"{after_default!r}: every container would run through it (pass "
                       f"{CONFIRM_FLAG} if that is meant)")
    elif default is not None and default not in runtimes and default in after:
        # the files name a default that is no runtime of theirs yet: creating a runtime under
        # that name makes it the one every container runs through, as containerd's gate says
        reasons.append(f"the default runtime {default!r} names no runtime yet, and this change "
                       f"would create it: every container would run through it (pass "
                       f"{CONFIRM_FLAG} if that is meant, or choose another --runtime-name)")
    elif default in runtimes and runtimes.get(default) != after.get(default):
        reasons.append(f"how the default runtime {default!r} runs would change: every "
                       f"container would be affected (pass {CONFIRM_FLAG} if that is meant)")
    for name, entry in runtimes.items():
        old, new = _engine_kind(entry), _engine_kind(after.get(name))
        if name != default and name in after and old and new and new != old:
            reasons.append(f"runtime {name!r} ({old}) would become {new} (choose another "
                           f"--runtime-name, or pass {CONFIRM_FLAG})")
    return reasons


def _engine_kind(entry: Any) -> str | None:
    """What kind of runtime an engine's entry is: CRI-O's ``runtime_type``; for Docker, which
    has no type, the program it runs, unless that is an NVIDIA runtime (whose path an update
    may move)."""
    if not isinstance(entry, Mapping):
        return None
    if entry.get("runtime_type"):
        return f"type {entry['runtime_type']}"
    path = entry.get("path")
    if isinstance(path, str) and path and not Path(path).name.startswith("nvidia"):
        return f"path {path}"
    return "an NVIDIA runtime" if isinstance(path, str) and path else None


def planned_node(root: Path, texts: Mapping[Path, str | None]):
    """A :class:`~gpuready.node.Node` that reads ``texts`` (None: absent) in place of the files
    they name: the node as a plan will leave it, for readers that take a node."""
    import os

    from gpuready.errors import InputError
    from gpuready.node import Node

    planned = {os.path.abspath(path): text for path, text in texts.items()}

    class Planned(Node):
        """The node with the planned texts in place."""

        def read_text_or_none(self, host_path, *, kind):
            key = os.path.abspath(host_path)
            return planned[key] if key in planned else super().read_text_or_none(
                host_path, kind=kind)

        def exists(self, host_path):
            key = os.path.abspath(host_path)
            return planned[key] is not None if key in planned else super().exists(host_path)

        def is_file(self, host_path):
            key = os.path.abspath(host_path)
            return planned[key] is not None if key in planned else super().is_file(host_path)

        def read_text(self, host_path, *, kind):
            key = os.path.abspath(host_path)
            if key not in planned:
                return super().read_text(host_path, kind=kind)
            if planned[key] is None:
                raise InputError(host_path, "no such file")
            return planned[key]

    return Planned(root)
