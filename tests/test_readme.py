"""What the README promises a new user: the Quick start, the test command, the exit codes.

Each fact is read from the page that holds it (tests/userdocs.py); the Quick start and the test
command are the README's own."""

from __future__ import annotations

import re

from gpuready.errors import ExitCode
from tests.helpers import REPO
from tests.userdocs import README as README_PAGE
from tests.userdocs import page_with, section, sh_blocks

README = README_PAGE.read_text()
CI_RUN = (REPO / ".ci" / "run").read_text()


def test_quick_start_installs_into_a_virtual_environment_in_two_commands():
    assert page_with("## Quick start") == README_PAGE
    install = sh_blocks(section("## Quick start"))[0].strip().splitlines()
    assert len(install) == 2
    assert install[0].startswith("python3 -m venv .venv && .venv/bin/pip install -e .")
    assert install[1].startswith(".venv/bin/gpuready setup ")
    # a bare pip install fails on Debian 12 and Ubuntu 24.04 (PEP 668)
    assert not re.search(r"(^|&& )pip install", "\n".join(install), flags=re.M)


def test_ci_installs_into_the_venvs_and_runs_the_readme_test_command():
    commands = [line for line in CI_RUN.splitlines() if line and not line.startswith(("#", "echo"))]
    # the newest Python into .venv, the oldest (3.9) into .venv-oldest: every pip runs in one
    assert 'fresh_venv "$newest_python" .venv' in commands
    assert 'fresh_venv "$oldest_python" .venv-oldest' in commands
    assert "python3-venv" in CI_RUN
    pips = [line for line in commands if " -m pip " in line]
    assert pips and all(line.startswith((".venv/bin/python", ".venv-oldest/bin/python"))
                        for line in pips)
    test_command = ".venv/bin/python -m pytest"
    assert any(line.startswith(test_command + " ||") for line in commands)  # its status counts
    assert commands[-1] == 'exit "$status"'
    assert f"test command itself, `{test_command}`" in " ".join(README.split())


def test_ci_makes_a_venv_another_python_made_again(tmp_path):
    """The quick start's .venv, made with the machine's python3, is made again with the Python
    CI names (its fresh_venv, run as CI runs it); one of the right Python is kept."""
    import subprocess
    import sys

    start = CI_RUN.index("fresh_venv() {")
    function = CI_RUN[start:CI_RUN.index("\n}\n", start) + 3]
    folder = tmp_path / "venv"
    other = "/usr/bin/python3"  # Debian's 3.11: never the Python the tests run on here
    subprocess.run([other, "-m", "venv", "--without-pip", str(folder)], check=True)

    def fresh() -> str:
        return subprocess.run(["bash", "-c", f'{function}\nfresh_venv "$1" "$2"', "-",
                               sys.executable, str(folder)], capture_output=True, text=True,
                              check=True).stdout

    said = fresh()
    made = subprocess.run([str(folder / "bin" / "python"), "-c",
                           "import sys; print(sys.version.split()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert made == sys.version.split()[0]
    assert "making it again" in said, said
    assert fresh() == ""  # the right Python's venv is kept as it is


def test_exit_code_table_is_one_table_of_every_code():
    lines = section("### Exit codes").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| code"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(int(line.split("|")[1]))
    assert rows == [code.value for code in ExitCode]
