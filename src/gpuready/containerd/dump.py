"""``containerd config dump``: what the node's own containerd builds from its files.

The files are staged in a temporary folder as a change will leave them
(:func:`gpuready.containerd.effective.staged`), so the dump judges a change before it is
written. The dump is containerd's word on what it loads; it does not say whether the CRI plugin
then starts (1.x dumps a runtimes table without the default runtime and exits 0).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuready.compat import tomllib
from gpuready.errors import GpureadyError

DUMP_TIMEOUT_S = 60.0


def config_dump(
    main: Path, *, root: Path, candidates: Mapping[Path, str | None],
    containerd: str = "containerd",
) -> dict[str, Any]:
    """``containerd config dump`` of ``main`` and its imports with ``candidates`` in place,
    parsed, the temporary folder's name taken out so two dumps compare."""
    [found] = config_dumps(main, root=root, candidate_sets=[candidates], containerd=containerd)
    if isinstance(found, GpureadyError):
        raise found
    return found


def config_dumps(
    main: Path, *, root: Path, candidate_sets: Sequence[Mapping[Path, str | None]],
    containerd: str = "containerd",
) -> list[dict[str, Any] | GpureadyError]:
    """:func:`config_dump` of each set of candidates, the processes run side by side; each
    answer is the parsed dump, or the error that says why there is none."""
    from gpuready.containerd.effective import staged

    with contextlib.ExitStack() as stack:
        stages = [stack.enter_context(staged(main, root=root, candidates=candidates))
                  for candidates in candidate_sets]
        running = [_start(containerd, stage.path(main)) for stage in stages]
        return [_finish(running[index], stage.folder) for index, stage in enumerate(stages)]


def _start(containerd: str, config: Path) -> subprocess.Popen | GpureadyError:
    try:
        return subprocess.Popen([containerd, "--config", str(config), "config", "dump"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as error:
        return GpureadyError(f"containerd config dump could not run: {error}")


def _finish(process: subprocess.Popen | GpureadyError, folder: Path):
    if isinstance(process, GpureadyError):
        return process
    try:
        out, err = process.communicate(timeout=DUMP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return GpureadyError(f"containerd config dump did not answer in {DUMP_TIMEOUT_S:g}s")
    if process.returncode != 0:
        first = (err.strip().splitlines() or ["no output"])[-1]
        return GpureadyError(f"containerd refuses the new files: {first}")
    return tomllib.loads(out.replace(str(folder), ""))
