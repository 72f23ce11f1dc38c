"""Talking to a running containerd through the Kubernetes CRI (``runtime.v1``) over gRPC.

:mod:`gpuready.cri.client` is the client, :mod:`gpuready.cri.live` compares what containerd
loaded with the config on disk, :mod:`gpuready.cri.probe` starts a throw-away pod sandbox through
a runtime handler, and :mod:`gpuready.cri.probe_image` builds a tiny offline pause image.
"""
