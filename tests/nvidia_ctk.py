"""What ``nvidia-ctk runtime configure --runtime=containerd`` (1.20.0) writes, in its default
drop-in mode: another tool's files, for tests that ask gpuready about a node that tool set up.

Built from the seven recorded cases (``tests/data/observed/nvidia-ctk-1.20.0``; a test holds the
helper to them, table for table) and, where no case was recorded, from nvidia-ctk's own source
and ``/work/shared/reference/nvidia-ctk.md``:

- The file's ``version`` picks the CRI plugin: 1 -> ``cri``, 2 -> ``io.containerd.grpc.v1.cri``,
  3 and above -> ``io.containerd.cri.v1.runtime``. An empty file is version 2; a non-empty file
  without ``version`` is version 1.
- Version 2 and above: the drop-in holds ``version`` and a copy of the *whole* CRI plugin table
  of the main file (recorded), with ``runtimes.nvidia`` added; the main file gets the drop-in
  folder appended to ``imports``, even when it is already there (recorded on 2.3.4's default,
  which imports ``/etc/containerd/conf.d/*.toml`` itself: the after-file lists it twice).
- ``runtimes.nvidia`` is a copy of the first of the default runtime (unless its name starts with
  ``nvidia``), ``runc`` and ``crun`` that the main file has (recorded: SystemdCgroup carried over
  from lab-base's runc), else ``runtime_type = "io.containerd.runc.v2"``, ``runtime_root = ""``,
  ``runtime_engine = ""`` and ``privileged_without_host_devices = false`` (recorded on Debian's
  file, which has no runtimes); then ``options.BinaryName`` is set.
- Without ``--set-as-default`` a ``default_runtime_name`` equal to ``nvidia`` is removed
  (reference; not recorded).
- Version 1 (not recorded; nvidia-ctk's source): "Version 1 configs do not support imports /
  drop-in files", so the whole version 1 config, with the runtime added (``BinaryName`` and
  ``Runtime``), is saved to the drop-in's path, and the main file is left as it was: nothing
  imports the drop-in.

The texts are TOML, not nvidia-ctk's bytes (it re-sorts keys and re-indents): what is compared
is the parsed tables, which is what containerd reads.
"""

from __future__ import annotations

import copy
from typing import Any

import tomlkit

from gpuready.compat import tomllib
from gpuready.textfile import without_bom

DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
IMPORT = "/etc/containerd/conf.d/*.toml"
RUNTIME = "nvidia"
BINARY = "/usr/bin/nvidia-container-runtime"
PLUGIN_OF_VERSION = {1: "cri", 2: "io.containerd.grpc.v1.cri"}
LATER_PLUGIN = "io.containerd.cri.v1.runtime"


def config_version(data: dict[str, Any]) -> int:
    """The version nvidia-ctk takes the file to be in."""
    if not data:
        return 2
    return data.get("version", 1)


def drop_in_like_nvidia_ctk(main_text: str) -> tuple[str, str]:
    """``(new_main_text, drop_in_text)``: the main config and ``99-nvidia.toml`` as nvidia-ctk
    1.20.0 ``runtime configure --runtime=containerd`` leaves them for a main file ``main_text``."""
    data = tomllib.loads(without_bom(main_text))
    version = config_version(data)
    plugin = PLUGIN_OF_VERSION.get(version, LATER_PLUGIN)
    if version == 1:
        whole = copy.deepcopy(data)
        whole["version"] = 1
        _add_runtime(whole.setdefault("plugins", {}).setdefault(plugin, {}), legacy=True)
        return main_text, tomlkit.dumps(whole)
    cri = copy.deepcopy(data.get("plugins", {}).get(plugin, {}))
    _add_runtime(cri, legacy=False)
    drop_in = {"version": version, "plugins": {plugin: cri}}
    main = copy.deepcopy(data)
    if not main:
        main["version"] = version
    main["imports"] = [*main.get("imports", []), IMPORT]
    return tomlkit.dumps(main), tomlkit.dumps(drop_in)


def _add_runtime(cri: dict[str, Any], *, legacy: bool) -> None:
    containerd = cri.setdefault("containerd", {})
    runtimes = containerd.setdefault("runtimes", {})
    default = containerd.get("default_runtime_name")
    candidates = ([default] if isinstance(default, str) and default
                  and not default.startswith("nvidia") else []) + ["runc", "crun"]
    source = next((runtimes[name] for name in candidates
                   if isinstance(runtimes.get(name), dict)), None)
    if source is not None:
        runtimes[RUNTIME] = copy.deepcopy(source)
    elif RUNTIME not in runtimes:
        runtimes[RUNTIME] = {"runtime_type": "io.containerd.runc.v2", "runtime_root": "",
                             "runtime_engine": "", "privileged_without_host_devices": False}
    options = runtimes[RUNTIME].setdefault("options", {})
    options["BinaryName"] = BINARY
    if legacy:
        options["Runtime"] = BINARY
    if default == RUNTIME:
        del containerd["default_runtime_name"]
