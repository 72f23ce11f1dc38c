"""Placeholder generator until the full CDI generator lands."""

from __future__ import annotations

from pathlib import Path


def node_spec_text(root: Path, *, gpus: int) -> str:
    """A minimal valid CDI spec for ``gpus`` GPUs."""
    import yaml

    devices = [
        {"name": str(i), "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{i}"}]}}
        for i in range(gpus)
    ]
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": devices,
        "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}]},
    }
    return "---\n" + yaml.safe_dump(spec, sort_keys=False)
