"""Modules generated from src/gpuready/cri/proto; do not edit."""
