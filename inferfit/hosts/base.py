"""The Host interface shared by local and SSH transports, and its errors."""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Transport = Literal["local", "ssh"]

# Exit status a POSIX shell uses for "command not found".
EXIT_NOT_FOUND = 127


@dataclass(frozen=True)
class Completed:
    """The outcome of one command that ran to completion (any exit status)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def not_found(self) -> bool:
        return self.returncode == EXIT_NOT_FOUND

    def describe(self) -> str:
        """One line for error messages: the command, its status and the first stderr line."""
        first = (self.stderr.strip() or self.stdout.strip()).splitlines()[:1]
        tail = f": {first[0][:200]}" if first else ""
        return f"`{shlex.join(self.argv)}` exited {self.returncode}{tail}"


class HostError(Exception):
    """A failure of the transport itself, not of the command it ran.

    ``kind`` is a stable machine-readable name (it lands in findings as
    ``error_kind``); ``fix`` says in one sentence what the user can do.
    """

    kind: str = "host_error"

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} — {self.fix}" if self.fix else self.message


class UnreachableError(HostError):
    kind = "unreachable"


class DNSError(HostError):
    kind = "dns"


class AuthError(HostError):
    kind = "auth_denied"


class HostKeyUnknownError(HostError):
    kind = "host_key_unknown"


class HostKeyChangedError(HostError):
    kind = "host_key_changed"


class ConnectTimeoutError(HostError):
    kind = "connect_timeout"


class ConnectionLostError(HostError):
    kind = "connection_lost"


class CommandTimeoutError(HostError):
    kind = "command_timeout"


@runtime_checkable
class Host(Protocol):
    """Where commands run. Knows nothing about probes.

    Commands are argv lists, never shell strings: the SSH transport quotes
    them with ``shlex.join`` so no value is ever interpreted by the remote shell.
    """

    name: str
    address: str
    transport: Transport

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
    ) -> Completed:
        """Run to completion; raise CommandTimeoutError past ``timeout`` seconds."""
        ...

    def stream(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> AsyncIterator[str]:
        """Yield stdout line by line (without the newline) until EOF or timeout.

        Closing the iterator early (``aclose``/``break``) ends the remote process.
        """
        ...

    async def close(self) -> None: ...


async def lines_until(
    readline: Callable[[], Awaitable[bytes | str]], timeout: float | None
) -> AsyncIterator[str]:
    """Yield lines from ``readline`` (without line ends) until EOF or ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        try:
            async with asyncio.timeout(left):
                raw = await readline()
        except TimeoutError:
            return
        if not raw:  # b'' or '' at EOF
            return
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        yield text.rstrip("\r\n")


def sh(script: str, *args: str) -> list[str]:
    """argv that runs a fixed shell ``script`` with ``args`` as ``$1``, ``$2``...

    The script is a constant written in our code; every variable value travels
    as a positional parameter, so config text never becomes shell syntax.
    """
    return ["sh", "-c", script, "inferfit", *args]
