"""Every ``examples:`` line in the help of lint, doctor, rules and cdi is a valid command line."""

from __future__ import annotations

import shlex

import pytest

from gpuready.cli.main import build_parser

COMMANDS = [
    ["lint"],
    ["doctor"],
    ["rules"],
    ["cdi"],
    ["cdi", "validate"],
    ["cdi", "generate"],
    ["cdi", "refresh"],
    ["cdi", "list"],
]


def help_text(command: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    return capsys.readouterr().out


def examples(text: str) -> list[list[str]]:
    """The command lines of the ``examples:`` section (up to the first blank line)."""
    section = text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0]
    return [shlex.split(line.split(">", 1)[0]) for line in section.splitlines()]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_ends_with_examples_that_parse(command, capsys):
    found = examples(help_text(command, capsys))
    assert found, "no examples"
    for argv in found:
        assert argv[0] == "gpuready" and argv[1 : 1 + len(command)] == command, argv
        args = build_parser().parse_args(argv[1:])
        assert callable(args.handler), argv


def _all_commands() -> list[list[str]]:
    """Every command and sub-command the parser knows."""
    import argparse

    found = []

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("command", _all_commands(), ids=" ".join)
def test_help_shows_no_source_markup(command, capsys):
    text = help_text(command, capsys)
    assert "``" not in text, text
