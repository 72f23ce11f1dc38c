"""What gpuready knows about CRI-O's configuration, as data with its sources.

Sources (written out in docs/engines.md):
- crio.conf(5) (cri-o/cri-o docs/crio.conf.5.md), "CRIO.RUNTIME.RUNTIMES TABLE": each runtime
  handler is a table ``[crio.runtime.runtimes.NAME]`` with ``runtime_path``, ``runtime_type``
  (``"oci"`` the default, or ``"vm"``), ``runtime_root``, ``runtime_config_path`` (VM runtimes
  only), ``privileged_without_host_devices``, ``allowed_annotations``, ``platform_runtime_paths``;
  ``crio.runtime.default_runtime`` names the handler used when none is asked for.
- The crio.conf template CRI-O ships (``crio config``): ``runtime_type = "pod"`` (conmon-rs), the
  ``monitor_path``, ``monitor_cgroup``, ``monitor_env`` and ``monitor_exec_cgroup`` keys of a
  handler, and ``container_min_memory``, ``no_sync_log``, ``default_annotations``,
  ``stream_websockets``, ``seccomp_profile``, ``inherit_default_runtime``, ``exec_cpu_affinity``.
- crio.conf.d(5): after ``/etc/crio/crio.conf``, every file in ``/etc/crio/crio.conf.d`` is read in
  lexical order, and a later file's value wins key by key.
- crio(8): the CRI socket is ``/var/run/crio/crio.sock``.
No CRI-O runs on the machines gpuready is tested on: these facts are checked against files only.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuready.engines.facts import EngineFacts

MAIN_CONFIG = PurePosixPath("/etc/crio/crio.conf")
DROPIN_DIR = PurePosixPath("/etc/crio/crio.conf.d")
DROPIN = DROPIN_DIR / "99-nvidia.toml"
SOCKET = PurePosixPath("/var/run/crio/crio.sock")

RUNTIMES_PATH = ("crio", "runtime", "runtimes")
DEFAULT_RUNTIME_PATH = ("crio", "runtime", "default_runtime")
DEFAULT_RUNTIME = "crun"  # CRI-O 1.31 and later; earlier releases default to runc

RUNTIME_TYPES = ("oci", "vm", "pod")

RUNTIME_KEYS = frozenset({
    "runtime_path", "runtime_type", "runtime_root", "runtime_config_path",
    "privileged_without_host_devices", "allowed_annotations", "platform_runtime_paths",
    "monitor_path", "monitor_cgroup", "monitor_env", "monitor_exec_cgroup",
    "container_min_memory", "no_sync_log", "default_annotations", "stream_websockets",
    "seccomp_profile", "inherit_default_runtime", "exec_cpu_affinity",
})

# The keys a new runtime takes over from the runtime it is built from (as nvidia-ctk does):
# the monitor (conmon) settings and the type; runtime_path and runtime_root stay its own.
INHERITED_KEYS = ("runtime_type", "monitor_path", "monitor_cgroup", "monitor_env",
                  "monitor_exec_cgroup", "privileged_without_host_devices")

# What gpuready.engines.detect looks for, and the engine interface's facts.
FACTS = EngineFacts(
    name="crio",
    title="CRI-O",
    config=DROPIN,
    sockets=(SOCKET,),
    marks=(MAIN_CONFIG, DROPIN_DIR),
    live=False,
    source="gpuready.engines.crio.facts",
)

