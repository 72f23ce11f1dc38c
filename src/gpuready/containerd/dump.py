"""``containerd config dump``: what the node's own containerd builds from its files.

The files are staged in a temporary folder as a change will leave them
(:func:`gpuready.containerd.effective.staged`), so the dump judges a change before it is
written. The dump is containerd's word on what it loads; it does not say whether the CRI plugin
then starts (1.x dumps a runtimes table without the default runtime and exits 0).
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuready.errors import GpureadyError

DUMP_TIMEOUT_S = 60.0


def config_dump(
    main: Path, *, root: Path, candidates: Mapping[Path, str | None],
    containerd: str = "containerd",
) -> dict[str, Any]:
    """``containerd config dump`` of ``main`` and its imports with ``candidates`` in place,
    parsed, the temporary folder's name taken out so two dumps compare."""
    from gpuready.containerd.effective import staged

    with staged(main, root=root, candidates=candidates) as stage:
        try:
            result = subprocess.run(
                [containerd, "--config", str(stage.path(main)), "config", "dump"],
                capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise GpureadyError(f"containerd config dump could not run: {error}") from None
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise GpureadyError(f"containerd refuses the new files: {first}")
        text = result.stdout.replace(str(stage.folder), "")
    return tomllib.loads(text)
