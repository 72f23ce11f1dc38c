"""gpuready agent: keep a node configured and verified from a DaemonSet pod (see
:mod:`gpuready.agent.service`)."""
