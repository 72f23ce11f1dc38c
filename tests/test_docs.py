"""The documentation as a reader meets it.

The README is the overview: its first screen shows the three ways to use gpuready (one node, a
fleet through Ansible, a cluster through the DaemonSet), each with commands that work as
written; its command table names every command. The reference lives in docs/, one page per
task: every page is linked from the README, every relative link of the README and of docs/
resolves (the file, and the heading an anchor names), and every file of this repository a page
names is there.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import yaml

from gpuready.cli.commands import COMMANDS
from gpuready.cli.main import build_parser
from gpuready.compat import tomllib
from tests.helpers import REPO
from tests.test_image import image_commands
from tests.userdocs import DOCS, README, heading_level, outside_code, pages, section, sh_blocks

FIRST_SCREEN = 60  # lines: what a reader sees before scrolling
OVERVIEW_LINES = 450  # the README stays an overview; the reference goes to docs/
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
KUBERNETES = REPO / "deploy" / "kubernetes"
COLLECTION = REPO / "ansible_collections" / "gpuready" / "node"
# Folders of this repository whose files the pages name (`src/gpuready/...` is also written
# `gpuready/...`; `docs/...` is also an upstream project's folder, and the links are checked).
REPO_FOLDERS = ("tests/", "src/", "scripts/", "deploy/", "benchmarks/", "ansible_collections/",
                "gpuready/")


def relative_links(page: Path) -> list[str]:
    """The targets of the page's Markdown links that point inside this repository."""
    found = []
    for _, line in outside_code(page.read_text()):
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                found.append(target)
    return found


def slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of the page's headings (a repeated one numbered, as GitHub does)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in outside_code(page.read_text()):
        level = heading_level(line)
        if level:
            base = slug(CODE_SPAN.sub(lambda span: span[0][1:-1], line[level + 1:]))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), f"{page.name}: {target} leaves the repository"
        assert resolved.exists(), f"{page.name}: {target}: no such file"
        if anchor:
            assert resolved.suffix == ".md", f"{page.name}: {target}: an anchor into a non-page"
            assert anchor in anchors(resolved), (
                f"{page.name}: {target}: {resolved.name} has no heading #{anchor}")


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve()
              for target in relative_links(README)}
    unlinked = [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_every_file_a_page_names_is_there(page: Path) -> None:
    """`tests/test_gate.py`, `gpuready/node.py`, `deploy/kubernetes/`: what the Safety table and
    the other pages cite as proof or as the place of a fact exists."""
    missing = []
    for span in CODE_SPAN.findall(page.read_text()):
        name = span.strip("`")
        if not name.startswith(REPO_FOLDERS) or re.search(r"[\s{}<>]|\.\.\.|…", name):
            continue
        if name.startswith("gpuready/"):
            name = "src/" + name
        if not any(REPO.glob(name.rstrip("/"))):
            missing.append(name)
    assert not missing, f"{page.name} names files this repository lacks: {missing}"


def first_screen() -> str:
    """The README's "Three ways to use it", which must start on its first screen."""
    heading = "## Three ways to use it"
    assert heading in README.read_text().splitlines()[:FIRST_SCREEN // 4]
    text = section(heading)
    assert len(text.splitlines()) < FIRST_SCREEN
    return text


def commands_of(block: str) -> list[list[str]]:
    """The command lines of a sh block, comments dropped, continued lines joined."""
    return [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()
            if line.strip()]


def test_the_first_screen_shows_the_three_ways() -> None:
    text = first_screen()
    for lead in ("One node", "A fleet, through Ansible", "A cluster, through a DaemonSet"):
        assert f"**{lead}**" in text
    node, fleet, cluster = sh_blocks(text)
    assert all(2 <= len(commands_of(block)) <= 3 for block in (node, fleet, cluster))


def test_one_node_commands_are_gpuready_command_lines() -> None:
    node = sh_blocks(first_screen())[0]
    install, *runs = commands_of(node)
    assert " ".join(install) == sh_blocks(section("## Quick start"))[0].splitlines()[0]
    for argv in runs:
        assert argv[:2] == ["sudo", ".venv/bin/gpuready"], argv
        build_parser().parse_args(argv[2:])  # exits 2 on a line that does not parse


def documented_options(module: str) -> set[str]:
    """The options a module of the collection documents (its DOCUMENTATION's ``options``)."""
    source = (COLLECTION / "plugins" / "modules" / f"{module}.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "DOCUMENTATION":
            return set(yaml.safe_load(node.value.value)["options"])
    raise AssertionError(f"{module} has no DOCUMENTATION")


def test_the_fleet_playbook_uses_the_collection_as_documented() -> None:
    text = first_screen()
    playbook = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, flags=re.S)[1])
    for task in playbook[0]["tasks"]:
        (name, args), = ((key, value) for key, value in task.items() if key.startswith("gpuready."))
        assert set(args) <= documented_options(name.rsplit(".", 1)[1]), task
    install, *runs = commands_of(sh_blocks(text)[1])
    assert install == [".venv/bin/pip", "install", "-e", ".[ansible]"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "ansible" in project["optional-dependencies"]
    for argv in runs:
        assert argv[:2] == ["ANSIBLE_COLLECTIONS_PATH=.", ".venv/bin/ansible-playbook"], argv
        assert "gpu.yml" in argv and "`gpu.yml`" in text


def test_the_cluster_commands_build_load_apply_and_label() -> None:
    image, apply, label = commands_of(sh_blocks(first_screen())[2])
    build, load = image_commands()
    assert image == [*build, "&&", *load]  # the tested build and import commands
    applied = [Path(arg).name for arg in apply[apply.index("apply") + 1:] if arg != "-f"]
    assert applied[0] == "namespace.yaml" and applied[-1] == "daemonset.yaml"
    # every manifest but the undo Job, which takes gpuready back from one node
    assert sorted(applied) == sorted(path.name for path in KUBERNETES.glob("*.yaml")
                                     if path.name != "undo-job.yaml")
    daemonset = yaml.safe_load((KUBERNETES / "daemonset.yaml").read_text())
    (key, value), = daemonset["spec"]["template"]["spec"]["nodeSelector"].items()
    assert label[:3] == ["kubectl", "label", "node"] and label[-1] == f"{key}={value}"


def test_the_command_table_names_every_command() -> None:
    table = section("## Commands")
    named = set(re.findall(r"^\| `gpuready ([a-z-]+)", table, flags=re.M))
    assert named == {command.name for command in COMMANDS}


def test_the_readme_stays_an_overview() -> None:
    assert len(README.read_text().splitlines()) <= OVERVIEW_LINES
