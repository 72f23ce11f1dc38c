"""gpuready: register the NVIDIA container runtime with containerd and prove it correct."""

__version__ = "0.1.0"
