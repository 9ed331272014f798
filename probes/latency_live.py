"""Live mode of the latency probe: a rolling window per region at 1 Hz.

The box runs latency_agent.py in continuous mode (``samples = 0``) over one SSH
channel, and ``ping`` for ICMP targets; each second the console gets one Sample
with, per region, the median RTT of that second, p50/p95 and loss over the window,
and the per-second history (sparkline data). Closing the iterator closes the
channels, which ends the commands on the box (the agent also stops by itself
after ``live_max_s``). Keys: docs/latency.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import statistics
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from inferfit.api import ProbeContext, Sample
from inferfit.hosts.base import Host, HostError
from inferfit.probes.latency import LatencySettingsError, Settings, agent_argv, agent_source
from inferfit.probes.latency_stats import (
    RegionConfigError,
    TargetSpec,
    parse_regions,
    percentile,
)
from inferfit.probes.ping_parse import PING_REPLY


@dataclass
class _Window:
    name: str
    points: deque[tuple[float, float | None]] = field(default_factory=deque)  # (time, rtt|lost)
    history: deque[float | None] = field(default_factory=deque)  # one value per tick
    tick: list[float] = field(default_factory=list)

    def add(self, at: float, rtt: float | None) -> None:
        self.points.append((at, rtt))
        if rtt is not None:
            self.tick.append(rtt)

    def sample(self, now: float, window_s: float) -> dict[str, Any]:
        while self.points and self.points[0][0] < now - window_s:
            self.points.popleft()
        rtts = sorted(v for _, v in self.points if v is not None)
        current = statistics.median(self.tick) if self.tick else None
        self.tick = []
        self.history.append(round(current, 3) if current is not None else None)
        while len(self.history) > window_s:
            self.history.popleft()
        row: dict[str, Any] = {"name": self.name, "samples": len(self.points),
                               "history_ms": list(self.history)}
        if current is not None:
            row["rtt_ms"] = round(current, 3)
        if self.points:
            row["loss_pct"] = round(100 * sum(v is None for _, v in self.points)
                                    / len(self.points), 2)
        if rtts:
            row["rtt_ms_p50"] = round(percentile(rtts, 50), 3)
            row["rtt_ms_p95"] = round(percentile(rtts, 95), 3)
        return row


async def _consume(lines: AsyncIterator[str], handle: Callable[[str], None]) -> None:
    try:
        async for line in lines:
            handle(line)
    finally:
        if isinstance(lines, AsyncGenerator):
            await lines.aclose()  # ends the command on the box


def _agent_handler(windows: list[_Window], regions_of: list[int], seen: dict[str, int],
                   clock: Callable[[], float]) -> Callable[[str], None]:
    def handle(line: str) -> None:
        with contextlib.suppress(ValueError):
            ev = json.loads(line)
            t = ev.get("t") if isinstance(ev, dict) else None
            if ev.get("ev") == "s" and isinstance(t, int) and 0 <= t < len(regions_of):
                seen["tcp"] = seen.get("tcp", 0) + 1
                rtt = ev.get("ms") if ev.get("k") in ("ok", "refused") else None
                windows[regions_of[t]].add(clock(), rtt)
    return handle


def _ping_handler(window: _Window, seen: dict[str, int],
                  clock: Callable[[], float]) -> Callable[[str], None]:
    last: list[int] = []

    def handle(line: str) -> None:
        m = PING_REPLY.search(line)
        if not m or "(DUP!)" in line:
            return
        seq = int(m.group(1))
        seen["icmp"] = seen.get("icmp", 0) + 1
        if last and seq > last[0] + 1:  # the gap in icmp_seq: lost echoes
            for _ in range(min(seq - last[0] - 1, 1000)):
                window.add(clock(), None)
        if not last or seq > last[0]:
            last[:] = [seq]
        window.add(clock(), float(m.group(2)))
    return handle


async def watch_regions(
    host: Host, ctx: ProbeContext, *, clock: Callable[[], float] = time.monotonic,
    period_s: float = 1.0,
) -> AsyncIterator[Sample]:
    try:
        settings = Settings.from_options(ctx.options)
        regions = parse_regions(ctx.config.get("regions"))
    except (RegionConfigError, LatencySettingsError) as exc:
        yield Sample("latency", {"regions": [], "error": f"config: {exc}"})
        return
    windows = [_Window(r.name) for r in regions]
    tcp: list[tuple[int, TargetSpec]] = [
        (n, t) for n, r in enumerate(regions) for t in r.targets if t.port is not None
    ]
    icmp = [(n, t) for n, r in enumerate(regions) for t in r.targets if t.port is None]
    seen: dict[str, int] = {}
    readers: list[asyncio.Task[None]] = []
    if tcp:
        argv = agent_argv([(t.host, int(t.port or 0)) for _, t in tcp], settings, 0,
                          max_s=float(ctx.options.get("live_max_s", 3600.0)))
        handle = _agent_handler(windows, [n for n, _ in tcp], seen, clock)
        readers.append(asyncio.create_task(
            _consume(host.stream(argv, stdin=agent_source()), handle)))
    gap = f"{max(settings.interval_ms / 1000, 0.2):g}"  # iputils: 0.2 s at least
    wait = str(max(1, math.ceil(settings.timeout_ms / 1000)))
    for n, spec in icmp:
        argv = ["ping", "-i", gap, "-W", wait, spec.host]
        readers.append(asyncio.create_task(
            _consume(host.stream(argv), _ping_handler(windows[n], seen, clock))))
    try:
        next_tick = clock() + period_s
        while True:
            await asyncio.sleep(max(0.0, next_tick - clock()))
            next_tick += period_s
            for reader in readers:
                if reader.done() and reader.exception() is not None:
                    raise reader.exception()  # type: ignore[misc]
            values: dict[str, Any] = {
                "regions": [w.sample(clock(), settings.live_window_s) for w in windows],
                "window_s": settings.live_window_s,
            }
            stopped = [r for r in readers if r.done()]
            if stopped:
                values["notes"] = [
                    f"{len(stopped)} live timer(s) on the box stopped "
                    f"(TCP needs python3, ICMP needs ping; seen: {seen or 'nothing'})"
                ]
            yield Sample("latency", values)
    finally:
        for reader in readers:
            reader.cancel()
        for reader in readers:
            with contextlib.suppress(asyncio.CancelledError, HostError):
                await reader
