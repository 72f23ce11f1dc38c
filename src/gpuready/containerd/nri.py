"""containerd's NRI plugin as a node's files set it up: on or off, its socket, its plugin folders.

Recorded facts (each line's ``containerd config default``, in ``gpuready/data``):

| line | ``[plugins."io.containerd.nri.v1.nri"]`` | ``disable`` by default |
|---|---|---|
| 1.6 (1.6.20) | not there: no NRI plugin | - |
| 1.7 (1.7.34) | there | ``true``: NRI is off until a file sets ``disable = false`` |
| 2.1 (2.1.9), 2.3 (2.3.4) | there | ``false``: NRI is on |

Every line that has it names the same socket (``/var/run/nri/nri.sock``), plugin folder
(``/opt/nri/plugins``) and plugin configuration folder (``/etc/nri/conf.d``) by default.
Config versions 2 to 4 all keep the table under the plugin ID ``io.containerd.nri.v1.nri``.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from gpuready.containerd.facts import lookup
from gpuready.containerd.versions import KeyPath
from gpuready.records import Record

NRI_PLUGIN = "io.containerd.nri.v1.nri"
NRI_PATH: KeyPath = ("plugins", NRI_PLUGIN)
DISABLE_PATH: KeyPath = (*NRI_PATH, "disable")
# The defaults every recorded line with NRI prints (1.7.34, 2.1.9, 2.3.4): used for the folders
# of a line without NRI, where a plugin installed for a later containerd would be.
DEFAULT_SOCKET = PurePosixPath("/var/run/nri/nri.sock")
DEFAULT_PLUGIN_PATH = PurePosixPath("/opt/nri/plugins")
DEFAULT_PLUGIN_CONFIG_PATH = PurePosixPath("/etc/nri/conf.d")


class Nri(Record):
    """What a containerd line runs of NRI with a node's files.

    ``available``: the line has an NRI plugin at all; ``enabled``: it runs (``disable`` is not
    true after the files are decoded over the line's defaults); ``written``: the ``disable`` the
    files set (None when none sets it); ``default_disable``: the line's own default (None on a
    line without NRI).
    """

    available: bool
    enabled: bool
    written: bool | None
    default_disable: bool | None
    socket: PurePosixPath
    plugin_path: PurePosixPath
    plugin_config_path: PurePosixPath

    @property
    def switched_on(self) -> bool:
        """A file sets ``disable = false`` where the line's default is not already false: someone
        turned NRI on deliberately (1.7's default is off)."""
        return self.written is False and self.default_disable is not False


def nri_of(loaded: Any, written: Any) -> Nri:
    """NRI as ``loaded`` (a :class:`gpuready.containerd.model.Loaded`) runs it; ``written`` is
    the files' merged data before the line's defaults (to tell what a file set)."""
    defaults = lookup(loaded.line.line.shared_defaults(), NRI_PATH)
    table = lookup(loaded.data, NRI_PATH)
    table = table if isinstance(table, dict) else {}
    set_here = lookup(written, DISABLE_PATH) if isinstance(written, dict) else None
    default = defaults.get("disable") if isinstance(defaults, dict) else None
    return Nri(
        available=isinstance(defaults, dict),
        enabled=isinstance(defaults, dict) and table.get("disable") is not True,
        written=set_here if isinstance(set_here, bool) else None,
        default_disable=default if isinstance(default, bool) else None,
        socket=_path(table.get("socket_path"), DEFAULT_SOCKET),
        plugin_path=_path(table.get("plugin_path"), DEFAULT_PLUGIN_PATH),
        plugin_config_path=_path(table.get("plugin_config_path"), DEFAULT_PLUGIN_CONFIG_PATH),
    )


def _path(value: object, default: PurePosixPath) -> PurePosixPath:
    return PurePosixPath(value) if isinstance(value, str) and value.startswith("/") else default
