"""The command line's edge: argparse's namespace is read by the entry point and by one
``request_from(args)`` per command; everything below takes that command's typed request.

Read from the source (every function of ``src/gpuready``) and from the parser itself (every
option of every command has a field in its request, so a new option cannot be dropped on the
way down).
"""

from __future__ import annotations

import argparse
import ast
import importlib

import pytest

from gpuready.cli import requests
from gpuready.cli.commands import COMMANDS
from gpuready.cli.main import build_parser
from tests.helpers import REPO, run_cli

PACKAGE = REPO / "src" / "gpuready"
ENTRY = ("gpuready.cli.main", "run")  # parses argv: the namespace is born there
EDGE = "request_from"  # one per command module


def _module_name(path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _functions():
    """(module, function name, node) for every function in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if "generated" in path.parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                name = getattr(node, "name", "<lambda>")
                yield _module_name(path), name, node


def _takes_namespace(module: str, node) -> list[str]:
    """The parameters of ``node`` that are argparse's namespace: annotated so, or (in the
    command line's package, where argparse lives) named ``args``."""
    arguments = node.args
    found = []
    for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if "Namespace" in annotation or (module.startswith("gpuready.cli.")
                                          and arg.arg == "args"):
            found.append(arg.arg)
    return found


def test_only_the_entry_and_each_commands_request_from_take_the_namespace():
    offenders = []
    for module, name, node in _functions():
        allowed = (module, name) == ENTRY or (
            name == EDGE and module.startswith("gpuready.cli.cmd_"))
        if _takes_namespace(module, node) and not allowed:
            offenders.append(f"{module}.{name}({', '.join(_takes_namespace(module, node))})")
    assert offenders == [], "these take argparse's namespace below the edge: " + ", ".join(
        offenders)


def test_no_namespace_is_built_or_read_below_the_edge():
    """No ``argparse.Namespace(...)`` nor ``vars(args)`` outside the edge: a helper cannot
    rebuild a namespace to pass a changed option down (``_replace`` on the request does it)."""
    offenders = []
    for module, name, node in _functions():
        if (module, name) == ENTRY or name == EDGE:
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                called = ast.unparse(inner.func)
                if called.endswith("Namespace") or (
                        called == "vars" and ast.unparse(inner).startswith("vars(args")):
                    offenders.append(f"{module}.{name}: {ast.unparse(inner)[:60]}")
    assert offenders == []


def test_the_failing_check_sees_a_helper_that_takes_the_namespace(tmp_path, monkeypatch):
    """The check above fails where it should: a helper taking ``args`` is named."""
    helper = PACKAGE / "cli" / "zz_helper_for_test.py"
    monkeypatch.setattr("tests.test_requests.PACKAGE", tmp_path / "gpuready")
    (tmp_path / "gpuready" / "cli").mkdir(parents=True)
    (tmp_path / "gpuready" / "cli" / helper.name).write_text(
        "import argparse\n\ndef engine(args):\n    return args.engine\n\n"
        "def typed(value: argparse.Namespace):\n    return value\n")
    with pytest.raises(AssertionError, match=r"zz_helper_for_test.engine\(args\).*typed\(value"):
        test_only_the_entry_and_each_commands_request_from_take_the_namespace()


def _parsers():
    """(command words, parser) for every command and ``cdi`` action that runs something."""
    top = build_parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if actions:
            for action_name, action_parser in actions[0].choices.items():
                yield [name, action_name], action_parser
        else:
            yield [name], parser


def _dests(parser) -> set[str]:
    return {action.dest for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
            and action.dest is not argparse.SUPPRESS}


@pytest.mark.parametrize("words,parser", list(_parsers()), ids=lambda v: " ".join(v)
                         if isinstance(v, list) else "")
def test_every_option_reaches_the_commands_request(words, parser):
    """Each option the parser takes is a field of the request its command runs with: an option
    added without one fails here, not on a node."""
    module = importlib.import_module(next(c.module for c in COMMANDS if c.name == words[0]))
    required = {"audit": ["somewhere"], "migrate": ["--to", "3"],
                "agent": ["--root", "/host", "--settings", "settings.yaml"]}.get(words[0], [])
    args = build_parser().parse_args([*words, *required])
    request = module.request_from(args)
    assert isinstance(request, requests.Fields) and request._fields
    missing = _dests(parser) - set(request._fields)
    assert missing == set(), f"{' '.join(words)}: options with no request field: {missing}"
    for field in _dests(parser):  # the parsed value, untouched
        assert getattr(request, field) == getattr(args, field)


def test_a_request_is_immutable_and_a_missing_field_is_a_programming_error():
    request = requests.build(requests.Rules, {"name": None, "markdown": True, "extra": 1})
    assert request == requests.Rules(name=None, markdown=True)
    with pytest.raises(AttributeError):
        request.markdown = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        requests.build(requests.Rules, {"name": None})


def test_address_given_on_the_command_line_travels_in_the_request(tmp_path):
    """--docker-address sets the engine address the request carries: a bad one is refused
    naming the option that gave it (the value crossed the edge with its source)."""
    root = tmp_path / "node"
    (root / "etc" / "docker").mkdir(parents=True)
    (root / "etc" / "docker" / "daemon.json").write_text("{}\n")
    result = run_cli("configure", "--engine", "docker", "--root", str(root), "--reload",
                     "--docker-address", "tcp://10.0.0.1:2375")
    assert result.code == 2
    assert "--docker-address" in result.err and "tcp://10.0.0.1:2375" in result.err
    assert (root / "etc" / "docker" / "daemon.json").read_text() == "{}\n"
