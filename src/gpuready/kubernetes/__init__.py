"""Kubernetes objects gpuready writes and reads: the RuntimeClass."""
