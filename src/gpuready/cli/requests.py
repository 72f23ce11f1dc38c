"""What each command was asked, as one typed, immutable request.

The command line parses ``argv`` with argparse and hands each command's ``request_from(args)``
the namespace; everything below that edge takes one of these requests, so no function past the
entry point reads an ``argparse.Namespace`` (``tests/test_requests.py`` keeps it so). Field
names are the options' own (``--dry-run`` is ``dry_run``), their values as the parser checked
them.

Each is a :class:`Fields` class: its annotated names are its fields, immutable once made. Not a
dataclass nor a ``typing.NamedTuple``: every command defines all of them at start-up, and those
make a class through ``exec`` and ``inspect`` (about 5 ms for these fifteen, measured with
``-X importtime``), where :class:`Fields` makes one in microseconds (``bench_startup.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing import Union


class Fields:
    """An immutable record whose fields are its class's annotations (in order), each with the
    class attribute of the same name as its default: ``NamedTuple``'s interface (``_fields``,
    ``_replace``, equality by value) without its cost."""

    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        cls._fields = tuple(cls.__dict__.get("__annotations__", {}))

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__}: no field {', '.join(sorted(unknown))}")
        missing = [name for name in self._fields
                   if name not in values and not hasattr(type(self), name)]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing {', '.join(missing)}")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: use _replace")

    def _replace(self, **changes: Any):
        """A copy with ``changes``."""
        return type(self)(**{**self._asdict(), **changes})

    def _asdict(self) -> dict[str, Any]:
        """The fields and their values."""
        return {name: getattr(self, name) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._asdict() == self._asdict()

    def __hash__(self) -> int:
        return hash((type(self), tuple(map(repr, self._asdict().values()))))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self._asdict().items())
        return f"{type(self).__name__}({shown})"


Request = TypeVar("Request", bound=Fields)


def build(kind: type[Request], values: Mapping[str, object]) -> Request:
    """A ``kind`` from the parsed ``values`` (``vars(args)``): each field from the value of the
    same name, a field the command line did not set keeps its default (an address option that
    was never given sets no ``engine_address``). A field with no value and no default is a
    programming error, raised as such.

    Under ``--root`` every field that names a file of the node (:data:`NODE_FILES`) becomes that
    file inside the root (:meth:`gpuready.node.Node.named`): ``--config
    /etc/containerd/config.toml`` is the root's, never this machine's."""
    given = {name: values[name] for name in kind._fields if name in values}
    request = kind(**given)
    root = given.get("root")
    if root in (None, "/") or kind not in NODE_FILES:
        return request
    from gpuready.node import Node

    node = Node(root)
    fields, as_node_paths = NODE_FILES[kind]
    confined = {}
    for name in fields:
        value, option = getattr(request, name), "--" + name.replace("_", "-")
        if isinstance(value, list):
            confined[name] = [_named(node, item, option, as_node_paths) for item in value]
        elif value is not None:
            confined[name] = _named(node, value, option, as_node_paths)
    return request._replace(**confined)


def _named(node, value: str, option: str, as_node_path: bool) -> str:
    """``value`` as the node's file inside its root: its host path, or with ``as_node_path``
    its node path (for the commands that look node paths up themselves); ``-`` (standard
    output) as given."""
    if value == "-":
        return value
    host = node.named(value, option=option)
    return str(node.node_path(host)) if as_node_path else host


class Setup(Fields):
    """``gpuready setup``: the whole workflow on one node."""

    root: str
    containerd_version: str | None
    distribution: str
    base: str | None
    runtime_name: str
    binary: str
    systemd_cgroup: str | None  # None: not given, the node decides
    enable_cri: bool
    confirm_every_pod_uses_it: bool
    toolkit_dir: str
    gpus: int | None
    dry_run: bool
    format: str
    engine: str


class Configure(Fields):
    """``gpuready configure``: register the runtime in an existing config."""

    root: str
    distribution: str
    config: str | None
    force: bool
    runtime_name: str
    binary: str
    systemd_cgroup: str
    enable_cri: bool
    enable_cdi: bool
    set_as_default: bool
    confirm_every_pod_uses_it: bool
    reload: bool
    drop_in: str | None  # None: not asked; "": the default drop-in
    containerd_version: str | None
    engine: str | None
    docker_address: str | None
    dry_run: bool
    restart: bool
    address: str
    restart_command: str | None
    restart_timeout: float
    probe: bool
    probe_image: str
    probe_binary: str
    format: str
    engine_address: str | None = None  # --address or --docker-address, when given
    engine_address_flag: str | None = None  # which of the two gave it


class Unconfigure(Fields):
    """``gpuready unconfigure``: take back what gpuready added."""

    root: str
    config: str | None
    distribution: str
    runtime_name: str | None  # None: every runtime the record names
    engine: str | None
    docker_address: str | None
    reload: bool
    containerd_version: str | None
    dry_run: bool
    restart: bool
    address: str
    restart_command: str | None
    restart_timeout: float
    probe: bool
    probe_image: str
    probe_binary: str
    format: str
    engine_address: str | None = None
    engine_address_flag: str | None = None


class ShowConfig(Fields):
    """``gpuready show-config``: the effective config."""

    root: str
    config: str | None
    containerd_version: str | None
    format: str


class Migrate(Fields):
    """``gpuready migrate``: upgrade a config and its imports to version 3 or 4."""

    to: int
    root: str
    config: str | None
    containerd_version: str | None
    dry_run: bool
    restart: bool
    address: str
    restart_command: str | None
    restart_timeout: float
    probe: bool
    probe_image: str
    probe_binary: str
    format: str
    engine_address: str | None = None
    engine_address_flag: str | None = None


class Check(Fields):
    """``gpuready check``: the files setup produced against the contract."""

    root: str
    containerd_version: str | None
    distribution: str
    runtime_name: str
    toolkit_dir: str
    format: str
    engine: str


class Lint(Fields):
    """``gpuready lint``: config files on their own, or the node's config."""

    files: list  # of str; empty: the node's config
    root: str
    runtime_name: str
    select: list | None  # of comma-separated rule lists
    ignore: list | None
    format: str
    containerd_version: str | None
    fix: bool
    confirm_every_pod_uses_it: bool
    dry_run: bool
    engine: str | None
    docker_version: str | None


class Doctor(Fields):
    """``gpuready doctor``: the whole node."""

    root: str
    distribution: str
    runtime_name: str
    config: str | None
    runtimeclass: list  # of str
    select: list | None
    ignore: list | None
    format: str
    containerd_version: str | None
    engine: str | None
    docker_version: str | None


class Audit(Fields):
    """``gpuready audit``: many nodes' fetched files."""

    paths: list  # of str
    runtime_name: str
    select: list | None
    ignore: list | None
    format: str
    containerd_version: str | None
    jobs: int | None
    worst: int


class Rules(Fields):
    """``gpuready rules``: the list, one rule, or the Markdown reference."""

    name: str | None
    markdown: bool


class CdiScan(Fields):
    """``gpuready cdi validate`` and ``cdi list``: spec files or the node's CDI folders."""

    root: str
    format: str
    paths: list  # of str; empty: the node's CDI folders


class CdiGenerate(Fields):
    """``gpuready cdi generate``: build the spec, print or write it."""

    root: str
    driver_root: str
    output: str | None
    gpus: int | None
    inventory: str | None
    device_name_strategy: list | None
    hooks: bool | None
    no_nvml: bool
    format: str | None
    force: bool
    dry_run: bool


class CdiRefresh(Fields):
    """``gpuready cdi refresh``: regenerate a stale spec, install the units."""

    root: str
    output: str | None
    driver_root: str | None
    gpus: int | None
    inventory: str | None
    device_name_strategy: list | None
    hooks: bool | None
    no_nvml: bool
    force: bool
    install_units: bool
    program: str | None  # the node path the units run (None: the gpuready found in the node)
    format: str
    dry_run: bool


class Verify(Fields):
    """``gpuready verify``: what the running engine serves."""

    live: bool
    address: str | None
    config: str | None
    root: str
    distribution: str
    runtime_name: str
    containerd_version: str | None
    runtime_handler: str | None
    runtimeclass: list
    probe: bool
    probe_image: str
    probe_binary: str
    timeout: float
    probe_timeout: float
    format: str
    engine: str | None
    docker_address: str | None
    engine_address: str | None = None
    engine_address_flag: str | None = None


class Agent(Fields):
    """``gpuready agent``: the node agent of the DaemonSet."""

    root: str
    settings: str  # this run's own file, outside the root: never a node path
    listen: str


# What the helpers several commands share take: the requests with ``--restart``'s options, and
# any request (a helper reads only the fields every request it is given has, or asks with
# ``getattr`` and a default for one that some commands lack).
if TYPE_CHECKING:
    Restartable = Union[Configure, Unconfigure, Migrate]
    AnyRequest = Union[Setup, Configure, Unconfigure, ShowConfig, Migrate, Check, Lint, Doctor,
                       Audit, Rules, CdiScan, CdiGenerate, CdiRefresh, Verify, Agent]


# The fields that name a file of the node, and whether the command wants them as node paths
# (it looks them up under the root itself) rather than host paths: under --root each names the
# file inside the root. Options naming this run's own inputs (--restart-command, --inventory,
# --probe-binary) are not node files; --drop-in and --toolkit-dir are node paths by their types.
NODE_FILES: dict[type, tuple[tuple[str, ...], bool]] = {
    Setup: (("base",), False),
    Configure: (("config",), False),
    Unconfigure: (("config",), False),
    ShowConfig: (("config",), False),
    Migrate: (("config",), False),
    Lint: (("files",), False),
    Doctor: (("config", "runtimeclass"), False),
    Verify: (("config", "runtimeclass"), False),
    CdiScan: (("paths",), True),
    CdiGenerate: (("output",), True),
    CdiRefresh: (("output",), True),
}
