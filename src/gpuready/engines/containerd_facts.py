"""Where containerd keeps things on a node, and how to recognise it: its engine facts table.

Docker's and CRI-O's tables are in :mod:`gpuready.engines.docker.facts` and
:mod:`gpuready.engines.crio.facts`; detection (:mod:`gpuready.engines.detection`) reads the
three tables alone.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuready.engines.facts import EngineFacts
from gpuready.paths import CONTAINERD_CONFIG, CONTAINERD_SOCKET

FACTS = EngineFacts(
    name="containerd",
    title="containerd",
    config=CONTAINERD_CONFIG,
    sockets=(CONTAINERD_SOCKET,),
    marks=(PurePosixPath("/etc/containerd"),),
    live=True,
    source="gpuready.containerd.versions (config versions); containerd's docs/cri/config.md",
)
