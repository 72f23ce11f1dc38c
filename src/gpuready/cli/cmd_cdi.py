"""``gpuready cdi``: validate, generate and list Container Device Interface specs.

``validate`` refuses exactly what the CDI loader refuses (and warns where SPEC.md is stricter);
``generate`` writes an NVIDIA spec, also on a node whose GPUs are not visible yet (``--gpus N``,
``--inventory FILE``); ``refresh`` regenerates it from the same intent when it went stale;
``list`` prints the fully-qualified devices a runtime would see.
"""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests

DESCRIPTION = """\
validate refuses exactly what the CDI loader refuses (and warns where SPEC.md is stricter);
generate writes an NVIDIA spec, also on a node whose GPUs are not visible yet (--gpus N,
--inventory FILE); refresh regenerates it from the same intent when it went stale (a driver
upgrade, removal, GPUs or MIG changed); list prints the fully-qualified devices a runtime would
see.
"""

VALIDATE_EPILOG = """\
Without PATH, reads /etc/cdi then /var/run/cdi under --root, as the CDI cache does: only *.json
and *.yaml files directly inside, a later folder overriding an earlier one, and the same device
in two files of one folder a conflict.

examples:
  gpuready cdi validate
  gpuready cdi validate /etc/cdi/nvidia.yaml --format json
  gpuready cdi validate --root /mnt/node-image
"""

GENERATE_EPILOG = """\
Where the GPUs come from (first match wins):
  --gpus N / --inventory FILE  plan the spec for a node whose GPUs are not visible (no GPU needed)
  NVML                         when nvidia-ml-py is installed and the driver answers
  device nodes                 /dev/nvidia<N> (and /proc/driver/nvidia) under --root

Inventory file (YAML or JSON):
  driverVersion: "550.54.15"              # optional: plan libraries instead of searching them
  libraryDir: /usr/lib/x86_64-linux-gnu   # optional
  libraries: [libcuda.so, libnvidia-ml.so, libnvidia-ptxjitcompiler.so]   # optional
  binaries: [/usr/bin/nvidia-smi]         # optional
  gpus:
    - {index: 0, uuid: GPU-8f6c1a3e-0000-0000-0000-000000000000, minor: 0}

Paths in the spec are the node's paths: --root only says where to look.

examples:
  gpuready cdi generate
  gpuready cdi generate --gpus 8 --dry-run
  gpuready cdi generate --inventory node.yaml --output - --format json
  gpuready cdi generate --root /mnt/node-image --gpus 2 --no-hooks
"""

REFRESH_EPILOG = """\
Regenerates the spec when, and only when, it is stale (a host path it names is gone, its driver
version or GPUs are not the node's, or it was detected from the node's GPUs and the node shows
no driver now) or its intent changed (an option given now that differs from the one recorded,
or the inventory file's content). A fresh spec is not rewritten and keeps its mtime. The intent
(--gpus, --inventory and its SHA-256, the name strategies, hooks, the driver root, what was
detected) is the one 'cdi generate' recorded in <spec>.gpuready.intent; an option given here
replaces it. Exit 1 when the spec stays stale after regenerating it from its intent. A spec
no intent record describes (written by hand or by another tool, or edited since) is not
rewritten: exit 2, unless --force. A missing /dev/nvidia-uvm alone is not a reason to
regenerate: load the module (nvidia-modprobe -u -c=0).

--install-units writes /etc/systemd/system/gpuready-cdi-refresh.service (runs this refresh at
boot before containerd, Docker and CRI-O) and gpuready-cdi-refresh.path (runs it when
/lib/modules/<kernel>/modules.dep or the driver's library folder changes), recorded beside them
for 'gpuready unconfigure' (any engine). Enable them with systemctl. The unit runs the node's
own gpuready: --program PATH (a node path, under --root), else the one on the node
(/usr/local/bin/gpuready, /usr/bin/gpuready); with no --root, the gpuready that runs now.

examples:
  gpuready cdi refresh
  gpuready cdi refresh --dry-run
  gpuready cdi refresh --gpus 8 --format json
  gpuready cdi refresh --install-units
  gpuready cdi refresh --install-units --root /mnt/node-image --program /opt/bin/gpuready
"""

LIST_EPILOG = """\
Without PATH, reads /etc/cdi then /var/run/cdi under --root.

examples:
  gpuready cdi list
  gpuready cdi list /etc/cdi/nvidia.yaml --format json
"""

CDI_EPILOG = """\
examples:
  gpuready cdi validate
  gpuready cdi generate --gpus 8 --dry-run
  gpuready cdi refresh --install-units
  gpuready cdi list --root /mnt/node-image

Run 'gpuready cdi ACTION --help' for each action's options.
"""


def register(subparsers) -> None:
    """Add ``cdi`` with its ``validate``, ``generate``, ``refresh`` and ``list`` sub-commands."""
    parser = common.add_command(
        subparsers, "cdi",
        description=DESCRIPTION, epilog=CDI_EPILOG)
    actions = parser.add_subparsers(dest="cdi_command", metavar="ACTION")
    parser.set_defaults(handler=lambda _request: _usage(parser))
    _register_validate(actions)
    _register_generate(actions)
    _register_refresh(actions)
    _register_list(actions)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _register_validate(actions) -> None:
    parser = common.add_command(
        actions, "validate", help="check CDI specs as the CDI loader does",
        description="Check CDI spec files or folders and report every problem with its file, "
        "field path and line.", epilog=VALIDATE_EPILOG)
    common.add_root(parser)
    common.add_format(parser)
    parser.add_argument("paths", nargs="*", metavar="PATH", help="spec files or folders")
    parser.set_defaults(handler=run_validate)


def _register_generate(actions) -> None:
    parser = common.add_command(
        actions, "generate", help="write an NVIDIA CDI spec, with or without a GPU",
        description="Write an NVIDIA CDI spec that the CDI loader accepts.",
        epilog=GENERATE_EPILOG)
    common.add_root(parser)
    parser.add_argument("--driver-root", default="/", metavar="DIR",
                        help="node folder the driver files live under (default: /)")
    parser.add_argument("--output", "-o", metavar="PATH",
                        help="node path to write, '-' for standard output "
                        "(default: /etc/cdi/nvidia.yaml)")
    _add_intent(parser, recorded=False)
    common.add_format(parser, choices=("yaml", "json"))
    parser.set_defaults(format=None)
    parser.add_argument("--force", action="store_true", help="replace an existing spec file")
    common.add_dry_run(parser)
    parser.set_defaults(handler=run_generate)


def _add_intent(parser: argparse.ArgumentParser, *, recorded: bool) -> None:
    """What a spec is generated from (``generate``; ``refresh``, where each replaces the
    intent recorded beside the spec)."""
    instead = " instead of the recorded intent" if recorded else ""
    default = "as recorded, else " if recorded else ""
    parser.add_argument("--gpus", type=common.gpu_count, metavar="N",
                        help=f"plan the spec for N GPUs (1 to 255){instead}")
    parser.add_argument("--inventory", metavar="FILE",
                        help="plan the spec from a file listing the node's GPUs and driver"
                        + instead)
    parser.add_argument("--device-name-strategy", action="append",
                        choices=("index", "uuid", "type-index"), metavar="STRATEGY",
                        help="index (0), uuid (GPU-...), type-index (gpu0); repeat for several "
                        f"(default: {default}index and uuid)")
    parser.add_argument("--hooks", action=argparse.BooleanOptionalAction, default=None,
                        help=f"add the nvidia-cdi-hook hooks (default: {default}when "
                        "/usr/bin/nvidia-cdi-hook exists under --root)")
    parser.add_argument("--no-nvml", action="store_true", help="do not ask NVML for the GPUs")


def _register_refresh(actions) -> None:
    parser = common.add_command(
        actions, "refresh", help="regenerate the NVIDIA CDI spec when it went stale",
        description="Regenerate the NVIDIA CDI spec from the intent it was generated with, when "
        "it no longer describes the node.", epilog=REFRESH_EPILOG)
    common.add_root(parser)
    parser.add_argument("--output", "-o", metavar="PATH",
                        help="node path of the spec (default: /etc/cdi/nvidia.yaml)")
    parser.add_argument("--driver-root", metavar="DIR",
                        help="node folder the driver files live under (default: as recorded, "
                        "else /)")
    _add_intent(parser, recorded=True)
    parser.add_argument("--force", action="store_true",
                        help="regenerate a spec no intent record of gpuready's describes "
                        "(written by hand, by another tool, or edited since)")
    parser.add_argument("--install-units", action="store_true",
                        help="also write the systemd .path and .service units that run this "
                        "refresh when the driver changes and at boot")
    parser.add_argument("--program", metavar="PATH",
                        help="with --install-units: the node path of the gpuready the unit runs "
                        "(default: the node's /usr/local/bin/gpuready or /usr/bin/gpuready; "
                        "with no --root, this gpuready)")
    common.add_format(parser)
    common.add_dry_run(parser)
    parser.set_defaults(handler=run_refresh)


def _register_list(actions) -> None:
    parser = common.add_command(
        actions, "list", help="print the fully-qualified CDI devices and their files",
        description="Print the devices a runtime would find (nvidia.com/gpu=0), with the file "
        "each comes from.", epilog=LIST_EPILOG)
    common.add_root(parser)
    common.add_format(parser)
    parser.add_argument("paths", nargs="*", metavar="PATH", help="spec files or folders")
    parser.set_defaults(handler=run_list)


# each action's typed request (``cdi`` alone, with no action, has none: it prints its usage)
ACTION_REQUESTS = {"validate": requests.CdiScan, "list": requests.CdiScan,
                   "generate": requests.CdiGenerate, "refresh": requests.CdiRefresh}


def request_from(args: argparse.Namespace) -> requests.CdiScan | requests.CdiGenerate | (
        requests.CdiRefresh | None):
    """``cdi ACTION``'s parsed command line as the action's typed request (None for ``cdi``
    alone): the one place below the entry point that reads argparse's namespace."""
    kind = ACTION_REQUESTS.get(args.cdi_command)
    return None if kind is None else requests.build(kind, vars(args))


def run_validate(request: requests.CdiScan) -> int:
    """Validate the given paths (or the node's CDI folders) and report."""
    from gpuready.cdi import report

    found = report.scan_for(request.root, request.paths)
    print(report.render_validation(found, fmt=request.format), end="")
    return report.validation_exit_code(found)


def run_list(request: requests.CdiScan) -> int:
    """List the devices the given paths (or the node's CDI folders) resolve to."""
    import sys

    from gpuready.cdi import report

    found = report.scan_for(request.root, request.paths)
    for line in report.scan_notes(found):
        print(f"gpuready: {line}", file=sys.stderr)
    code = report.list_exit_code(found)
    print(report.render_devices(found, fmt=request.format, code=code), end="")
    return code


def run_generate(request: requests.CdiGenerate) -> int:
    """Build the spec and print it, show its diff, or write it."""
    import sys

    from gpuready.cdi import generate
    from gpuready.cdi.refresh import intent_path, intent_plan_for_generate
    from gpuready.changeset import apply_all, locked_all
    from gpuready.node import Node

    options = generate.GenerateOptions(
        strategies=tuple(request.device_name_strategy or generate.DEFAULT_STRATEGIES),
        hooks=request.hooks, driver_root=request.driver_root)
    spec = generate.SpecRequest(request.root, output=request.output, fmt=request.format,
                                   gpus=request.gpus, inventory_path=request.inventory,
                                   options=options, use_nvml=not request.no_nvml)
    result = generate.prepare(spec)
    for line in result.notes:
        print(f"gpuready: {line}", file=sys.stderr)
    if result.plan is None:
        print(result.text, end="")
        return 0
    if request.dry_run:
        from gpuready.terminal import shown_lines

        print(shown_lines(result.plan.diff() or f"{result.plan.path}: {result.plan.summary}\n"),
              end="")
        return 0
    generate.check_replace(result.plan, force=request.force)
    node = Node(request.root)
    intent = intent_path(result.plan.path)
    with locked_all([result.plan.path, intent], node=node):
        # the spec, and beside it the intent it was generated from (for 'cdi refresh')
        plans = [result.plan, intent_plan_for_generate(node, result, spec)]
        written = apply_all([plan for plan in plans if plan is not None], node=node,
                            own=[intent])
    changed = result.plan in written
    from gpuready.terminal import shown

    # standard output is left exact for the spec (OUTPUT_FORMATS): this line escapes itself
    print(shown(f"{'wrote' if changed else 'unchanged'} {result.plan.path}: {result.plan.summary}"))
    return 0


def run_refresh(request: requests.CdiRefresh) -> int:
    """Regenerate the spec when it is stale or its intent changed; install the units."""
    from gpuready.cdi import refresh, units
    from gpuready.errors import UsageError
    from gpuready.node import Node

    if request.program is not None and not request.install_units:
        raise UsageError("--program names what the units run: give it with --install-units")
    wanted = refresh.RefreshRequest(
        request.root, output=request.output, gpus=request.gpus, inventory_path=request.inventory,
        strategies=tuple(request.device_name_strategy) if request.device_name_strategy else None,
        hooks=request.hooks, driver_root=request.driver_root,
        use_nvml=False if request.no_nvml else None, force=request.force)
    node = Node(request.root)
    program = units.unit_program(node, request.program) if request.install_units else []
    found = refresh.plan_refresh(wanted)
    # everything is planned before anything is written, and written as one change
    unit_plans = units.plan_units(found, node, program=program) if request.install_units else []
    written = []
    if not request.dry_run:
        written = refresh.write_refresh(found, node=node, units=unit_plans,
                                        own=[units.record_file(node)] if unit_plans else [])
    outcome = refresh.report(found, written, dry_run=request.dry_run, units=unit_plans, node=node)
    if request.format == "json":
        import json

        print(json.dumps(outcome, indent=2))
    else:
        _print_refresh(outcome, dry_run=request.dry_run)
    return outcome["exit_code"]


def _print_refresh(outcome: dict, *, dry_run: bool) -> None:
    """The refresh's outcome as text: the diff in a dry run, one line per file, the reasons."""
    import sys

    from gpuready.cdi.units import enable_hint

    action, file = outcome["action"], outcome["file"]
    if dry_run:
        sys.stdout.write(outcome["diff"] + "".join(unit["diff"] for unit in outcome["units"]))
    if action == "none":
        later = "" if outcome["verifiable"] else (
            " (not yet verifiable: the node shows no NVIDIA driver)")
        print(f"{file}: fresh, nothing to do{later}")
    else:
        done = {"rewritten": "rewrote", "would-rewrite": "would rewrite",
                "unchanged": "unchanged"}[action]
        print(f"{done} {file}: {outcome['summary']}")
        for reason in outcome["reasons"]:
            print(f"  because {reason}")
    for unit in outcome["units"]:
        state = ("would " if dry_run else "") + unit["summary"] if unit["changed"] else (
            "unit unchanged")
        print(f"{unit['file']}: {state}")
    if outcome["units"] and not dry_run and any(unit["written"] for unit in outcome["units"]):
        print(enable_hint())
    for note in outcome["notes"]:
        print(f"gpuready: {note}", file=sys.stderr)
    if outcome["still_stale"]:
        print(f"gpuready: error: {file} stays stale: " + "; ".join(outcome["still_stale"])
              + " (give the intent that fits the node: --gpus N, --inventory FILE, or install "
              "the driver)", file=sys.stderr)
