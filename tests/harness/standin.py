"""A stand-in for the NVIDIA runtime: records how containerd's shim called it, then runs runc.

containerd's runc shim calls ``BinaryName`` exactly as it would call runc; the NVIDIA runtime
would add the GPU hook and hand over to runc. No GPU exists here, so this script only records
each call (one JSON line: the arguments and, for ``create``, the spec's cgroupsPath) and hands
over to the real runc. Without systemd on a test machine it drops ``--systemd-cgroup`` and the
systemd-style cgroupsPath (``slice:prefix:name``) that goes with it; the record keeps both, which
is the proof that ``SystemdCgroup = true`` reached the runtime.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

_TEMPLATE = """#!{python}
import json, os, sys

LOG = {log!r}
RUNC = {runc!r}
CREATE_DELAY = {create_delay!r}

args = sys.argv[1:]
record = {{"argv": args}}
systemd = "--systemd-cgroup" in args
if "--bundle" in args:
    spec_path = os.path.join(args[args.index("--bundle") + 1], "config.json")
    with open(spec_path) as handle:
        spec = json.load(handle)
    record["cgroupsPath"] = spec.get("linux", {{}}).get("cgroupsPath")
    if systemd:
        spec.get("linux", {{}}).pop("cgroupsPath", None)
        with open(spec_path, "w") as handle:
            json.dump(spec, handle)
with open(LOG, "a") as handle:
    handle.write(json.dumps(record) + "\\n")
if CREATE_DELAY and "create" in args:
    import time
    time.sleep(CREATE_DELAY)
os.execv(RUNC, [RUNC] + [arg for arg in args if arg != "--systemd-cgroup"])
"""


def write_standin(
    path: Path, *, log: Path, runc: str | None = None, create_delay: float = 0.0
) -> Path:
    """Write the stand-in runtime at ``path`` (executable); its calls go to ``log``.

    ``create_delay`` makes ``create`` wait that many seconds after recording (a slow runtime).
    """
    runc = runc or shutil.which("runc") or "/usr/sbin/runc"
    text = _TEMPLATE.format(
        python=sys.executable, log=str(log), runc=runc, create_delay=create_delay
    )
    path.write_text(text)
    path.chmod(0o755)
    return path


def recorded_calls(log: Path) -> list[dict]:
    """The calls the stand-in recorded, oldest first."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def subcommand(call: dict) -> str | None:
    """The runc subcommand of a recorded call (``create``, ``start``, ``kill``, ``delete``...)."""
    for name in ("create", "start", "state", "kill", "delete", "features"):
        if name in call["argv"]:
            return name
    return None
