"""What gpuready knows about Docker's daemon, as data with its sources.

Sources:
- dockerd reference, "Daemon configuration file" (docker/cli docs/reference/commandline/
  dockerd.md, 20.10 branch): the full list of Linux keys, the runtime entry (``path``,
  ``runtimeArgs``), and the options a SIGHUP reloads (``runtimes``, ``default-runtime``).
- Measured against Debian's docker.io 20.10.24 (tests/test_docker_facts.py replays each row):
  every key of :data:`KEYS_20_10` is accepted on reload; an unknown top-level key makes dockerd
  refuse the whole file ("the following directives don't match any configuration option"); a
  runtime named ``runc`` is refused ("runtime name 'runc' is reserved"); a ``default-runtime``
  naming no runtime is refused ("specified default runtime ... does not exist"); a refused reload
  is only logged and the old runtimes stay, and only an accepted one leaves a ``reload`` event
  on the Engine API's ``/events`` (tests/test_docker_reload.py); ``features.cdi`` is accepted
  and ignored.
- Docker Engine 25.0 release notes and "Enable CDI devices" (docs.docker.com/reference/cli/
  dockerd/#enable-cdi-devices): ``features.cdi`` and ``cdi-spec-dirs`` need 25.0 or later.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuready.engines.facts import EngineFacts

DAEMON_JSON = PurePosixPath("/etc/docker/daemon.json")
SOCKET = PurePosixPath("/run/docker.sock")
SOCKET_ADDRESS = "unix:///var/run/docker.sock"
DAEMON_BINARY = "dockerd"
PIDFILE = PurePosixPath("/var/run/docker.pid")

# The built-in runtime's name: dockerd refuses a configured runtime with this name.
RESERVED_RUNTIMES = frozenset({"runc"})

# The top-level keys dockerd 20.10 reads on Linux (the documented full example, plus the keys of
# flags the example leaves out). Any other top-level key makes dockerd refuse the file.
KEYS_20_10 = frozenset({
    "allow-nondistributable-artifacts", "api-cors-header", "authorization-plugins", "bip",
    "bridge", "cgroup-parent", "cluster-advertise", "cluster-store", "cluster-store-opts",
    "containerd", "containerd-namespace", "containerd-plugins-namespace", "cpu-rt-period",
    "cpu-rt-runtime", "cri-containerd", "data-root", "debug", "default-address-pools",
    "default-cgroupns-mode", "default-gateway", "default-gateway-v6", "default-ipc-mode",
    "default-runtime", "default-shm-size", "default-ulimits", "dns", "dns-opts", "dns-search",
    "exec-opts", "exec-root", "experimental", "features", "fixed-cidr", "fixed-cidr-v6", "group",
    "host-gateway-ip", "hosts", "icc", "init", "init-path", "insecure-registries", "ip",
    "ip-forward", "ip-masq", "ip6tables", "iptables", "ipv6", "labels", "live-restore",
    "log-driver", "log-level", "log-opts", "max-concurrent-downloads", "max-concurrent-uploads",
    "max-download-attempts", "metrics-addr", "mtu", "network-control-plane-mtu",
    "no-new-privileges", "node-generic-resources", "oom-score-adjust", "pidfile", "raw-logs",
    "registry-mirrors", "rootless", "runtimes", "seccomp-profile", "selinux-enabled",
    "shutdown-timeout", "storage-driver", "storage-opts", "swarm-default-advertise-addr", "tls",
    "tlscacert", "tlscert", "tlskey", "tlsverify", "userland-proxy", "userland-proxy-path",
    "userns-remap",
    # not in the documented list, but read (20.10 keeps its trust key there; later releases
    # dropped the key file and the option with it)
    "deprecated-key-path",
    # not in the documented list either, measured as accepted by 20.10: hidden flags ("graph",
    # the old name of data-root, "network-diagnostic-port") and a key read without a flag
    # ("builder", which dockerd leaves out of its unknown-key check)
    "builder", "graph", "network-diagnostic-port",
})

# dockerd judges a key by looking it up among its command-line flags: these flag names are
# accepted in daemon.json too, though dockerd reads the setting only under the key in
# KEYS_20_10 ("label" is accepted, and ignored; "labels" is read). Measured against 20.10: a
# reload with each is not refused for an unknown key ("config-file" is refused only where dockerd
# was started with --config-file, as a key given both as a flag and in the file).
FLAG_NAMES_20_10 = frozenset({
    "add-runtime", "authorization-plugin", "config-file", "default-address-pool",
    "default-ulimit", "dns-opt", "exec-opt", "help", "host", "insecure-registry", "label",
    "log-opt", "node-generic-resource", "registry-mirror", "restart", "storage-opt", "version",
})

# Keys later releases added: (major, minor) of the first release that reads them. The proxy
# keys: docs.docker.com, "Configure the daemon to use a proxy" ("In Docker Engine version 23.0
# and later versions, you may also configure proxy behavior for the daemon in the daemon.json
# file"); dockerd checks the members of "proxies" as keys of their own.
KEYS_ADDED = {
    "cdi-spec-dirs": (25, 0),
    "default-network-opts": (24, 0),
    "proxies": (23, 0), "http-proxy": (23, 0), "https-proxy": (23, 0), "no-proxy": (23, 0),
}

# Keys of 20.10 that later releases no longer know: the first release without them. Source:
# docker/cli pull request 5723 ("deprecated in docker v24.0, and no longer functional since
# v25.0; fully removed in v26.0").
KEYS_REMOVED = {
    "oom-score-adjust": (26, 0),
}

# The releases the key tables describe completely: 20.10 is measured key by key, and no 21 or 22
# was released. From 23.0 on dockerd has --validate, which gpuready asks instead where it can;
# for those releases the tables are what gpuready knows, not all there is.
KEYS_COMPLETE_BEFORE = (23, 0)

# The keys of one entry under "runtimes"; dockerd ignores any other without a word.
RUNTIME_KEYS = {
    "path": (1, 12),
    "runtimeArgs": (1, 12),
    "runtimeType": (23, 0),
    "options": (23, 0),
}

# features.cdi: the first Docker release whose daemon reads it.
CDI_FEATURE_SINCE = (25, 0)


def known_key(key: str, release: tuple[int, int] | None) -> bool:
    """True when dockerd ``release`` (any release when None) accepts top-level ``key``."""
    if key in KEYS_20_10 or key in FLAG_NAMES_20_10:
        removed = KEYS_REMOVED.get(key)
        return removed is None or release is None or release < removed
    since = KEYS_ADDED.get(key)
    return since is not None and (release is None or release >= since)


def keys_complete(release: tuple[int, int] | None) -> bool:
    """True when the key tables describe every key dockerd ``release`` accepts (a key outside
    them is one it refuses); False for an unknown or a later release."""
    return release is not None and release < KEYS_COMPLETE_BEFORE


def supports_cdi(release: tuple[int, int] | None) -> bool | None:
    """Whether dockerd ``release`` reads ``features.cdi`` (None when the release is unknown)."""
    return None if release is None else release >= CDI_FEATURE_SINCE


def render_release(release: tuple[int, int]) -> str:
    """``(20, 10)`` as ``20.10``."""
    return f"{release[0]}.{release[1]}"

# What gpuready.engines.detect looks for, and the engine interface's facts.
FACTS = EngineFacts(
    name="docker",
    title="Docker",
    config=DAEMON_JSON,
    sockets=(SOCKET, PurePosixPath("/var/run/docker.sock")),
    marks=(PurePosixPath("/usr/bin/dockerd"), PurePosixPath("/usr/sbin/dockerd")),
    live=True,
    source="gpuready.engines.docker.facts",
)

