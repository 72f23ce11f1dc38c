"""The user documentation as the tests read it: the README and the pages of docs/.

The README is the overview; the reference lives in docs/, one page per task. A test that checks
a documented fact finds the page that holds it by its heading (``section``, ``page_with``), so a
fact may move between pages without its test going blind.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"


def pages() -> list[Path]:
    """The README, then every page of docs/ in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def outside_code(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of each line of ``text`` outside fenced code blocks (the fence
    lines themselves left out), numbered from 0."""
    found, fence = [], False
    for number, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            found.append((number, line))
    return found


def heading_level(line: str) -> int:
    """The level of a Markdown heading line (``## x`` is 2), 0 for any other line."""
    marks = len(line) - len(line.lstrip("#"))
    return marks if 0 < marks <= 6 and line[marks:marks + 1] == " " else 0


def page_with(heading: str) -> Path:
    """The one page that has the heading line ``heading`` (such as ``## Container image``)."""
    holders = [page for page in pages()
               if any(line == heading for _, line in outside_code(page.read_text()))]
    assert len(holders) == 1, f"{heading!r} is a heading of {len(holders)} pages: {holders}"
    return holders[0]


def section(heading: str) -> str:
    """The text under ``heading`` on its page, up to the next heading of its level or above."""
    lines = page_with(heading).read_text().splitlines()
    level = heading_level(heading)
    body = dict(outside_code("\n".join(lines)))
    start = next(number for number, line in body.items() if line == heading)
    end = next((number for number, line in body.items()
                if number > start and 0 < heading_level(line) <= level), len(lines))
    return "\n".join(lines[start + 1:end]) + "\n"


def sh_blocks(text: str) -> list[str]:
    """The ```sh blocks of ``text``."""
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)
