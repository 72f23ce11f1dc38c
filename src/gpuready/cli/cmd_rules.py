"""``gpuready rules``: list the rules, explain one, or print the rule reference as Markdown."""

from __future__ import annotations

import argparse

from gpuready.cli import requests
from gpuready.cli.common import add_command

DESCRIPTION = """\
List every rule of 'gpuready lint' and 'gpuready doctor' with its default severity, or explain
one rule: what it finds, why that breaks GPU pods, an example, and the fix.
"""

EPILOG = """\
examples:
  gpuready rules
  gpuready rules bool-as-string
  gpuready rules --markdown > rules.md
"""


def register(subparsers) -> None:
    """Add the ``rules`` sub-command."""
    parser = add_command(
        subparsers,
        "rules",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="the rule to explain")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the whole rule reference as Markdown (this is docs/rules.md)",
    )
    parser.set_defaults(handler=run)


def request_from(args: argparse.Namespace) -> requests.Rules:
    """``rules``'s parsed command line as its typed request: the one place below the entry
    point that reads argparse's namespace."""
    return requests.build(requests.Rules, vars(args))


def run(request: requests.Rules) -> int:
    """Print the list, one rule, or the Markdown reference."""
    from gpuready.rules import docs

    if request.markdown:
        print(docs.markdown(), end="")
    elif request.name:
        print(docs.explain(request.name), end="")
    else:
        print(docs.listing(), end="")
    return 0
