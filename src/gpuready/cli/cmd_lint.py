"""``gpuready lint``: check containerd config files on their own, and repair what is certain."""

from __future__ import annotations

import argparse

from gpuready.cli import common, requests
from gpuready.cli.common import (
    add_command,
    add_default_confirmation,
    add_dry_run,
    add_root,
    add_runtime_name,
)

DESCRIPTION = """\
Check containerd config files for every way a GPU runtime registration silently fails: wrong
version paths, unquoted plugin IDs, booleans written as strings, options outside their table,
unknown runc options, and more.

Without FILE, the node's config is checked as containerd reads it: the main file and every file
it imports, merged on the node's containerd line (--containerd-version; else this machine's
'containerd --version', or under --root the root's package database; else the config's
version), so lint, doctor, check and setup give one verdict on one node (SystemdCgroup = true
too, on a node where systemd does not run). Each FILE named is checked on its own, the node
around it not judged: its imports are not read, and lint says so.

With --fix, repairs what can be repaired without guessing (bool-as-string, option-outside-options,
unquoted-plugin-key, wrong-version-path, runtime-type-missing), keeping every comment, shows the
diff, and lints the result again.
"""

EPILOG = """\
Run 'gpuready rules' for the rule list and 'gpuready rules NAME' for one rule's explanation.

examples:
  gpuready lint
  gpuready lint /etc/containerd/config.toml /etc/containerd/conf.d/nvidia.toml
  gpuready lint --fix --dry-run
  gpuready lint --ignore binary-missing --format sarif config.toml
  gpuready lint --engine docker /etc/docker/daemon.json
  gpuready lint --engine crio                 # crio.conf and crio.conf.d/*, read together
"""


def add_rule_selection(
    parser: argparse.ArgumentParser, *, formats: tuple[str, ...] = ("text", "json", "sarif")
) -> None:
    """``--select``/``--ignore``, ``--format`` and ``--containerd-version``, shared with doctor
    and audit."""
    parser.add_argument(
        "--select",
        action="append",
        metavar="RULES",
        help="run only these rules (comma-separated, repeatable)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        metavar="RULES",
        help="do not run these rules (comma-separated, repeatable)",
    )
    parser.add_argument(
        "--format",
        choices=formats,
        default="text",
        help="output format (default: text)",
    )
    parser.add_argument(
        "--containerd-version",
        metavar="X.Y[.Z]",
        help="read the config as this containerd release does (default: the node's line "
        "without FILE, the config version with FILE; doctor's NRI, DRA and cdiVersion checks "
        "ask for the patch, as in 1.7.30)",
    )


def register(subparsers) -> None:
    """Add the ``lint`` sub-command."""
    parser = add_command(
        subparsers,
        "lint",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="config files (default: /etc/containerd/config.toml under --root)",
    )
    add_root(parser)
    add_runtime_name(parser)
    add_rule_selection(parser)
    parser.add_argument(
        "--fix", action="store_true", help="repair what can be repaired without guessing"
    )
    add_default_confirmation(parser, what="a --fix that changes how the default runtime runs")
    add_dry_run(parser)
    from gpuready.cli.common import add_docker_version, add_engine

    add_engine(parser)
    add_docker_version(parser)
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Lint:
    """``lint``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Lint, vars(args))


def run(request: requests.Lint) -> int:
    """Lint (and with --fix repair) the files; return the exit code."""
    from pathlib import Path

    from gpuready.errors import ExitCode, UsageError
    from gpuready.paths import CONTAINERD_CONFIG
    from gpuready.reporting import render
    from gpuready.rules import selection
    from gpuready.rules.context import Options
    from gpuready.rules.engine import lint_paths

    engine = common.engine_name(request, config=request.files[0] if request.files else None)
    if engine != "containerd":
        from gpuready.cli import engine_cli

        return engine_cli.lint(request, engine, doctor=False)
    selected = selection(select=request.select, ignore=request.ignore)
    options = Options(runtime_name=request.runtime_name, root=Path(request.root))
    paths = [Path(f) for f in request.files] or [options.node.path(CONTAINERD_CONFIG)]
    if request.dry_run and not request.fix:
        raise UsageError("--dry-run goes with --fix")
    if request.fix:
        from gpuready.rules.fix import fix_paths

        print(fix_paths(paths, options=options, dry_run=request.dry_run,
                        default_confirmed=request.confirm_every_pod_uses_it,
                        containerd_version=request.containerd_version), end="")
    if request.files:
        report = lint_paths(paths, options=options, selected=selected,
                            containerd_version=request.containerd_version)
    else:  # the node's config as containerd reads it: imports followed, the node's line
        report = lint_node(options=options, selected=selected - NOT_CONFIG_RULES,
                           containerd_version=request.containerd_version)
    print(render(request.format, report.problems, files=report.files, command="lint"), end="")
    if request.files and request.format == "text":
        _note_imports_not_read(report)
    return ExitCode.CHECK_FAILED if report.failed else ExitCode.OK


# doctor's checks of the node around the config: RuntimeClass manifests and CDI specs
NOT_CONFIG_RULES = frozenset({"handler-mismatch", "handler-invalid", "cdi-spec-missing",
                              "cdi-spec-invalid"})


def lint_node(*, options, selected, containerd_version):
    """``lint`` without FILE: the node's main config and everything it imports, merged and read
    on the node's containerd line, as ``doctor`` reads it (one verdict for one node)."""
    from gpuready.rules.engine import doctor

    return doctor(options=options, selected=selected, containerd_version=containerd_version,
                  config_only=True)


def _note_imports_not_read(report) -> None:
    """Say, for a FILE that imports others, that only the file itself was checked."""
    for display in report.importing:
        print(f"note: {display} was checked on its own; the files it imports were not read "
              "(run 'gpuready lint' without FILE, or 'gpuready doctor', for the config "
              "containerd builds from them)")
