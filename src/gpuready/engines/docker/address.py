"""Which dockerd to talk to: an explicit option, else ``DOCKER_HOST``, else the default socket.

Every Docker tool reads ``DOCKER_HOST``; gpuready does too, with the same precedence as the
``docker`` command line (an option given on the command line wins over the environment, which
wins over the default). gpuready talks to dockerd over its unix socket only: ``unix:///PATH``
works, and any other scheme (``tcp://``, ``ssh://``, ``npipe://``, ``fd://``) is a usage error
that names where the value came from, since a silent fallback to the default socket would ask
another daemon than the one the operator meant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gpuready.engines.docker.facts import SOCKET_ADDRESS
from gpuready.records import Record
from gpuready.terminal import has_control

ENVIRONMENT = "DOCKER_HOST"
SCHEME = "unix://"


class DockerAddress(Record):
    """dockerd's API socket (``unix:///PATH``) and where gpuready took it from."""

    address: str
    source: str  # "option", "DOCKER_HOST" or "default"

    def shown(self) -> str:
        """The address as output shows it: with its origin when that is not on the command
        line (``unix:///x (from DOCKER_HOST)``)."""
        if self.source == ENVIRONMENT:
            return f"{self.address} (from {ENVIRONMENT})"
        return self.address


def resolve(option: str | None, *, flag: str = "--address",
            environ: Mapping[str, str] | None = None) -> DockerAddress:
    """The address to use: ``option`` (given as ``flag``) when set, else ``DOCKER_HOST`` when
    set and not empty (as the docker command line treats an empty one), else the default.

    Raises :class:`~gpuready.errors.UsageError` for a value that is not ``unix:///PATH`` (an
    option may also be a bare absolute socket path).
    """
    environ = os.environ if environ is None else environ
    if option is not None:
        return DockerAddress(_checked(option, f"{flag} {option}", bare_path=True), "option")
    value = environ.get(ENVIRONMENT, "")
    if value:
        return DockerAddress(_checked(value, f"{ENVIRONMENT}={value}", bare_path=False),
                             ENVIRONMENT)
    return DockerAddress(SOCKET_ADDRESS, "default")


def _checked(value: str, shown: str, *, bare_path: bool) -> str:
    """``value`` as a ``unix://`` address, or a UsageError naming ``shown``."""
    from gpuready.errors import UsageError

    if has_control(value):
        raise UsageError(f"{shown!r}: holds a control character; give unix:///PATH")
    if bare_path and value.startswith("/"):
        return SCHEME + value
    if value.startswith(SCHEME):
        path = value[len(SCHEME):]
        if path.startswith("/") and path.strip("/"):
            return value
        raise UsageError(f"{shown}: the socket path must be absolute (unix:///var/run/docker.sock)")
    scheme = value.split("://", 1)[0] + "://" if "://" in value else None
    what = (f"the {scheme} scheme is not supported" if scheme
            else "not a unix:// address (without a scheme Docker reads it as tcp://)")
    fix = (f"unset {ENVIRONMENT} or pass --address unix:///PATH" if shown.startswith(ENVIRONMENT)
           else "give unix:///PATH")
    raise UsageError(f"{shown}: {what}: gpuready talks to dockerd over its unix socket only; "
                     f"{fix}")
