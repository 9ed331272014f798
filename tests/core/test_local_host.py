"""LocalHost: the same contract as SSHHost, on this machine."""

from __future__ import annotations

import subprocess
import time

import pytest

from inferfit.hosts import CommandTimeoutError, LocalHost, sh


async def test_run_quoting_stdin_and_missing_binary() -> None:
    host = LocalHost()
    done = await host.run(["printf", "%s|", "a b", "$(id)"], timeout=10)
    assert done.stdout == "a b|$(id)|"
    assert (await host.run(["cat"], timeout=10, stdin=b"x\n")).stdout == "x\n"
    missing = await host.run(["inferfit-no-such-binary"], timeout=10)
    assert missing.not_found
    assert "command not found" in missing.describe()
    assert (await host.run(sh('printf "%s" "$1"', "a;b"), timeout=10)).stdout == "a;b"


async def test_timeout_kills_the_process_group() -> None:
    host = LocalHost()
    quiet = f"20.{time.monotonic_ns() % 10**9}"  # findable in ps
    started = time.monotonic()
    with pytest.raises(CommandTimeoutError, match=r"within 0\.3 s"):
        await host.run(["sh", "-c", 'sleep "$1" & sleep "$1"', "sh", quiet], timeout=0.3)
    assert time.monotonic() - started < 5
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"sleep {quiet}" not in ps, "a child of the timed-out command survived"


async def test_stream_lines_timeout_and_early_close() -> None:
    host = LocalHost()
    assert [x async for x in host.stream(["printf", "a\\r\\nb\\n\\377\\n"])] == ["a", "b", "\ufffd"]
    started = time.monotonic()
    got = [x async for x in host.stream(["sh", "-c", "echo one; sleep 20"], timeout=0.5)]
    assert got == ["one"]
    assert time.monotonic() - started < 5
    stream = host.stream(["yes"])
    assert await stream.__anext__() == "y"
    await stream.aclose()
