"""LocalHost: commands on the machine inferfit runs on (asyncio subprocesses)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Sequence

from inferfit.hosts.base import (
    EXIT_NOT_FOUND,
    CommandTimeoutError,
    Completed,
    Transport,
    lines_until,
)


class LocalHost:
    transport: Transport = "local"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or socket.gethostname()
        self.address = "localhost"

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
    ) -> Completed:
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            return Completed(
                tuple(argv), EXIT_NOT_FOUND, "", f"{argv[0]}: command not found", 0.0
            )
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(stdin)
        except TimeoutError:
            await _reap(proc)
            raise CommandTimeoutError(
                f"`{argv[0]}` did not finish within {timeout:g} s on {self.name}",
                fix="raise the probe's timeout in the config, or check why the box is slow",
            ) from None
        except asyncio.CancelledError:
            _kill_group(proc)
            raise
        return Completed(
            tuple(argv),
            proc.returncode if proc.returncode is not None else -1,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.monotonic() - started,
        )

    async def stream(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> AsyncIterator[str]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        except FileNotFoundError:
            return
        assert proc.stdout is not None
        if stdin is not None and proc.stdin is not None:
            proc.stdin.write(stdin)
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
        try:
            async for line in lines_until(proc.stdout.readline, timeout):
                yield line
        finally:
            if proc.returncode is None:
                await _reap(proc)

    async def close(self) -> None:
        return None


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's group and collect it.

    Drain its pipes too: a reader paused on a full buffer never sees EOF, and
    asyncio's wait() does not return until every pipe has closed.
    """
    _kill_group(proc)
    with contextlib.suppress(ProcessLookupError, TimeoutError, ConnectionError):
        async with asyncio.timeout(5):
            await proc.communicate()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    # The command may have children (sh -c ...): end the whole group we created.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, 9)
