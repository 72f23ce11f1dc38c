"""Allow ``python -m gpuready``."""

from gpuready.cli.main import entrypoint

entrypoint()
