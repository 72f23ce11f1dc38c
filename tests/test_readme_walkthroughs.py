"""The documentation's walkthroughs, run as printed.

A walkthrough is the ```sh and ```console blocks under one heading of the README or of a page
of docs/ (tests/userdocs.py finds it), in order. Each ```sh
block runs in bash (``-eu -o pipefail``) and must succeed; each ``$ `` line of a ```console block
runs the same way, and what it prints (stdout and stderr together) must be the lines the page
shows under it. A line ``...`` stands for any lines; blank lines, runs of spaces and the parts
that differ from run to run (a process id, a sandbox id, a duration) are not compared.

The paths a walkthrough names (``/tmp/gr-demo``) are replaced by fresh folders of the test's, in
the commands and back again in what they print, so a run never meets another's files.

Here: the private containerd of ``verify --live`` (docs/verify.md: start, import the pause image,
point, stop),
with Debian's containerd and runc for real. The Ansible walkthrough is
tests/test_ansible_walkthrough.py (it needs ansible-core's controller).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.containerd import short_tempdir
from tests.harness.processes import remove_folder
from tests.helpers import PROBE_IMAGE, REPO, require
from tests.userdocs import page_with

CONTAINERD_WALKTHROUGH = "## Try it: a private containerd, started and stopped by hand"
SHOWN_FOLDER = "/tmp/gr-demo"
SHOWN_RUNC = "/usr/sbin/runc"  # where Debian's runc is, as the page shows it
STEP_TIMEOUT = 120

# What changes from run to run, in the page's lines and in the printed ones alike.
VOLATILE = (
    (re.compile(r"\bpid \d+"), "pid N"),
    (re.compile(r"\bsandbox [0-9a-f]{12}\b"), "sandbox ID"),
    (re.compile(r"\(\d[0-9.e+-]*s\)"), "(Ns)"),
)


@dataclass
class Step:
    """One thing the reader runs: a ```sh block (``kind`` "sh"), or one ``$`` line of a
    ```console block (``kind`` "console") with the lines the page shows under it."""

    kind: str
    script: str
    shown: list[str] = field(default_factory=list)


def walkthrough(heading: str) -> list[Step]:
    """The steps under the heading ``heading`` (a whole line, such as ``## Try it``) of the
    README or a page of docs/, up to the next heading of its level or above."""
    lines = page_with(heading).read_text().splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    steps: list[Step] = []
    fence: str | None = None  # the language of the code block we are in
    block: list[str] = []
    for line in lines[lines.index(heading) + 1:]:
        if fence is None:
            if line.startswith("```"):
                fence, block = line[3:].strip(), []
                continue
            marks = len(line) - len(line.lstrip("#"))
            if 0 < marks <= level and line[marks:marks + 1] == " ":
                break
            continue
        if line.startswith("```"):
            if fence == "sh":
                steps.append(Step("sh", "\n".join(block) + "\n"))
            elif fence == "console":
                steps += console_steps(block)
            fence = None
            continue
        block.append(line)
    return steps


def console_steps(block: list[str]) -> list[Step]:
    """Each ``$`` line of a console block, with the lines shown under it."""
    steps: list[Step] = []
    for line in block:
        if line.startswith("$ "):
            steps.append(Step("console", line[2:]))
        else:
            assert steps, f"console output before any command: {line!r}"
            steps[-1].shown.append(line)
    return steps


def normalized(lines: list[str]) -> list[str]:
    """``lines`` without blank lines, runs of spaces or the parts that vary between runs."""
    found = []
    for line in lines:
        line = " ".join(line.split())
        for pattern, replacement in VOLATILE:
            line = pattern.sub(replacement, line)
        if line:
            found.append(line)
    return found


# A warning an installed library prints about itself (cryptography 51 warns that DSA is
# deprecated whenever ansible-core imports its SSH agent code), and the source line Python shows
# under it: what the reader sees depends on the versions pip chose, not on gpuready, so it is
# not compared. gpuready's own warnings (from its source tree, never site-packages) still are.
LIBRARY_WARNING = re.compile(r"/site-packages/\S+\.py:\d+: \w*Warning: ")


def without_library_warnings(lines: list[str]) -> list[str]:
    """``lines`` without the warnings installed libraries print (:data:`LIBRARY_WARNING`)."""
    kept: list[str] = []
    skip_source = False
    for line in lines:
        if LIBRARY_WARNING.search(line):
            skip_source = True
            continue
        if skip_source and line.startswith(" "):
            skip_source = False
            continue
        skip_source = False
        kept.append(line)
    return kept


def matches(shown: list[str], printed: list[str]) -> bool:
    """True when ``printed`` is what ``shown`` shows, a ``...`` line standing for any lines."""
    shown, printed = normalized(shown), normalized(without_library_warnings(printed))
    # can[i][j]: shown[i:] matches printed[j:]
    can = [[False] * (len(printed) + 1) for _ in range(len(shown) + 1)]
    can[len(shown)][len(printed)] = True
    for i in range(len(shown) - 1, -1, -1):
        for j in range(len(printed), -1, -1):
            if shown[i] == "...":
                can[i][j] = can[i + 1][j] or (j < len(printed) and can[i][j + 1])
            else:
                can[i][j] = j < len(printed) and shown[i] == printed[j] and can[i + 1][j + 1]
    return can[0][0]


def run_steps(steps: list[Step], *, paths: dict[str, str], cwd: Path, env: dict[str, str]
              ) -> list[str]:
    """Run every step as the reader would, ``paths`` (shown: real) swapped in; assert that each
    succeeds and that each console step prints what the page shows. Returns what each step
    printed, the paths shown again."""
    printed_all = []
    for step in steps:
        script = step.script
        for shown, real in paths.items():
            script = script.replace(shown, real)
        result = subprocess.run(
            ["bash", "-eu", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=STEP_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        printed = result.stdout
        for shown, real in paths.items():
            printed = printed.replace(real, shown)
        assert result.returncode == 0, f"{step.script}\nexit {result.returncode}:\n{printed}"
        if step.kind == "console":
            assert matches(step.shown, printed.splitlines()), (
                f"$ {step.script}\nthe page shows:\n" + "\n".join(step.shown)
                + f"\nit printed:\n{printed}")
        printed_all.append(printed)
    return printed_all


def gpuready_on_path(folder: Path) -> dict[str, str]:
    """An environment whose ``gpuready`` on PATH is this checkout's, run by this Python."""
    folder.mkdir(parents=True, exist_ok=True)
    command = folder / "gpuready"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpuready "$@"\n')
    command.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUREADY_DEBUG", None)
    return env


def _stop_leftovers(folder: Path) -> None:
    """What a failed run left: the daemon (by the process id it wrote) and any shim naming its
    socket, then the folder."""
    pids = []
    with contextlib.suppress(OSError, ValueError):
        pids.append(int((folder / "containerd.pid").read_text().split()[0]))
    socket = str(folder / "containerd.sock").encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if socket in (entry / "cmdline").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
    for pid in pids:
        with contextlib.suppress(OSError):
            if str(folder).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
    if folder.exists():
        remove_folder(folder)


def test_private_containerd_walkthrough_runs_as_printed(probe_archive, tmp_path: Path) -> None:
    require(binaries=("containerd", "runc", "ctr"))
    steps = walkthrough(CONTAINERD_WALKTHROUGH)
    # start, register, import with --address, verify with --address, stop: all there, in order
    commands = [step.script for step in steps]
    assert [step.kind for step in steps] == ["sh", "console", "sh", "sh", "console", "sh"]
    assert "SystemdCgroup = false" in commands[0]  # no systemd needed on the machine
    assert f'sandbox_image = "{PROBE_IMAGE}"' in commands[0]  # the archive's image name
    assert commands[3].startswith(f"ctr --address {SHOWN_FOLDER}/containerd.sock -n k8s.io "
                                  "images import pause.tar")
    assert "--address unix:///tmp/gr-demo/containerd.sock" in commands[4]

    folder = short_tempdir()  # short: the socket path must fit in 108 bytes
    work = tmp_path / "work"
    work.mkdir()
    shutil.copyfile(probe_archive, work / "pause.tar")  # the reader's copy of the pause image
    env = gpuready_on_path(tmp_path / "bin")
    runc = shutil.which("runc")
    try:
        printed = run_steps(steps, paths={SHOWN_FOLDER: str(folder), SHOWN_RUNC: runc},
                            cwd=work, env=env)
        assert "Server:" in printed[2]  # ctr reached the private containerd
        assert "probe   ok: sandbox" in printed[4] and printed[4].endswith("status: ok\n")
        # stopped and cleaned up as printed: no daemon, no shim, no folder
        assert not folder.exists()
        assert not [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()
                    and _names(entry, f"{folder}/containerd.sock")]
    finally:
        _stop_leftovers(folder)


def _names(process: Path, text: str) -> bool:
    """True when the command line of ``process`` (a /proc entry) names ``text``."""
    try:
        return text.encode() in process.joinpath("cmdline").read_bytes()
    except OSError:
        return False


def test_the_walkthrough_finds_what_the_readme_shows_and_nothing_else() -> None:
    steps = console_steps(["$ echo a", "a", "...", "z", "$ true"])
    assert [(s.script, s.shown) for s in steps] == [("echo a", ["a", "...", "z"]), ("true", [])]
    assert matches(["a", "...", "z"], ["a", "b", "", "c  d", "z"])
    assert matches(["a", "...", "z"], ["a", "z"])
    assert not matches(["a", "...", "z"], ["a", "b"])
    assert not matches(["a", "z"], ["a", "b", "z"])
    assert matches(["x pid 1, sandbox 0123456789ab (0.2s)"],
                   ["x  pid 99, sandbox ffffffffffff (1s)"])


def test_a_library_warning_is_not_compared_but_gpureadys_own_is() -> None:
    shown = ["PLAY [localhost] ***", "changed: [localhost]"]
    warned = ["/v/lib/python3.13/site-packages/ansible/_ssh_agent.py:18: "
              "CryptographyDeprecationWarning: DSA is deprecated.",
              "  from cryptography.hazmat.primitives.asymmetric.dsa import (", *shown]
    assert matches(shown, warned)
    ours = ["/work/src/gpuready/cli/main.py:9: DeprecationWarning: old option", *shown]
    assert not matches(shown, ours)
