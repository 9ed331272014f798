"""Where commands run: the local machine or a box over SSH."""

from __future__ import annotations

from inferfit.hosts.base import (
    AuthError,
    CommandTimeoutError,
    Completed,
    ConnectionLostError,
    ConnectTimeoutError,
    DNSError,
    Host,
    HostError,
    HostKeyChangedError,
    HostKeyUnknownError,
    UnreachableError,
    sh,
)
from inferfit.hosts.local import LocalHost
from inferfit.hosts.ssh import SSHHost, SSHOptions, SSHTarget

__all__ = [
    "AuthError",
    "CommandTimeoutError",
    "Completed",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "DNSError",
    "Host",
    "HostError",
    "HostKeyChangedError",
    "HostKeyUnknownError",
    "LocalHost",
    "SSHHost",
    "SSHOptions",
    "SSHTarget",
    "UnreachableError",
    "make_host",
    "sh",
]


def make_host(target: str | None, options: SSHOptions | None = None) -> Host:
    """The local machine when ``target`` is empty, else an SSH host."""
    if not target:
        return LocalHost()
    return SSHHost(SSHTarget.parse(target), options)
