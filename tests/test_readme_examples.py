"""The documentation's console examples (the README's and docs/'s) are what the tool prints today.

Each example below is run as its page shows it, on a fresh folder standing in for the path it
names, and its output must equal the page's lines (the folder's path put back). An example
that drifts from the tool fails here instead of misleading the operator who reads it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.userdocs import pages


def console_examples() -> dict[str, list[str]]:
    """``{command line: printed lines}`` for every ``$ `` line of the console blocks of the
    README and of every page of docs/."""
    examples: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_console = False
    for line in (line for page in pages() for line in page.read_text().splitlines()):
        if line.startswith("```"):
            in_console = line == "```console"
            current = None
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            current = examples.setdefault(line[2:], [])
        elif current is not None:
            current.append(line)
    return examples


def _run_as_shown(command: str, *, shown_root: str, root: Path) -> list[str]:
    """Run ``gpuready ...`` (or ``cat FILE``) with ``shown_root`` replaced by ``root``; the
    printed lines with ``root`` shown as ``shown_root`` again."""
    words = [word.replace(shown_root, str(root)) for word in command.split()]
    if words[0] == "cat":
        text = Path(words[1]).read_text()
    else:
        assert words[0] == "gpuready"
        result = run_cli(*words[1:])
        text = result.out + result.err
    return text.replace(str(root), shown_root).splitlines()


@pytest.fixture(scope="module")
def examples() -> dict[str, list[str]]:
    return console_examples()


def test_setup_then_check_print_what_the_readme_shows(tmp_path: Path, examples) -> None:
    shown = "/tmp/gpuready-demo"  # the base: the recorded `config default` of 1.6.20
    for command in (f"gpuready setup --root {shown} --containerd-version 1.6",
                    f"cat {shown}/root/toolkit/report.txt",
                    f"gpuready check --root {shown} --containerd-version 1.6"):
        assert _run_as_shown(command, shown_root=shown, root=tmp_path) == examples[command], (
            command)


def test_docker_setup_prints_what_the_readme_shows(tmp_path: Path, examples) -> None:
    shown = "/tmp/workstation"
    (tmp_path / "etc" / "docker").mkdir(parents=True)
    (tmp_path / "etc" / "docker" / "daemon.json").write_text("{}\n")  # the page's is kept
    for command in (f"gpuready setup --engine docker --root {shown}",
                    f"cat {shown}/root/toolkit/report.txt"):
        assert _run_as_shown(command, shown_root=shown, root=tmp_path) == examples[command], (
            command)


def test_the_rule_list_is_the_one_the_readme_shows(examples) -> None:
    printed = run_cli("rules").out.splitlines()
    assert printed == examples["gpuready rules"]
