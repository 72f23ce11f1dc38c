"""The Container Device Interface: validate specs the way the CDI loader does, and write them.

- :mod:`gpuready.cdi.validate`: problems in one spec, one file, or the CDI directories of a node.
- :mod:`gpuready.cdi.generate`: an NVIDIA spec from the node's device nodes, from NVML, or from a
  description of the GPUs the node will have (no GPU needed).
"""
