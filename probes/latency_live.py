"""Live mode of the latency probe: a rolling window per region at 1 Hz.

The box runs latency_agent.py in continuous mode (``samples = 0``) over one SSH
channel; each second the console gets one Sample with, per region, the median
RTT of that second, p50/p95 and loss over the window, and the per-second history
(sparkline data). Closing the iterator closes the channel, which ends the agent
(it also stops by itself after ``live_max_s``). Keys: docs/latency.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from inferfit.probes.latency import LatencySettingsError, Settings, agent_argv, agent_source
from inferfit.probes.latency_stats import (
    RegionConfigError,
    TargetSpec,
    parse_regions,
    percentile,
)

from inferfit.api import ProbeContext, Sample
from inferfit.hosts.base import Host, HostError


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
    targets: list[tuple[int, TargetSpec]] = [
        (n, t) for n, r in enumerate(regions) for t in r.targets if t.port is not None
    ]
    notes = [f"{t.text}: live mode times TCP only" for r in regions for t in r.targets
             if t.port is None]
    if not targets:
        yield Sample("latency", {"regions": [w.sample(clock(), settings.live_window_s)
                                             for w in windows], "notes": notes})
        return
    argv = agent_argv([(t.host, int(t.port or 0)) for _, t in targets], settings, 0,
                      max_s=float(ctx.options.get("live_max_s", 3600.0)))

    async def read() -> None:
        lines = host.stream(argv, stdin=agent_source())
        try:
            async for line in lines:
                with contextlib.suppress(ValueError):
                    ev = json.loads(line)
                    if isinstance(ev, dict) and ev.get("ev") == "s" and 0 <= ev["t"] < len(targets):
                        rtt = ev.get("ms") if ev.get("k") in ("ok", "refused") else None
                        windows[targets[ev["t"]][0]].add(clock(), rtt)
        finally:
            if isinstance(lines, AsyncGenerator):
                await lines.aclose()

    reader = asyncio.create_task(read())
    try:
        next_tick = clock() + period_s
        while True:
            await asyncio.sleep(max(0.0, next_tick - clock()))
            next_tick += period_s
            if reader.done() and reader.exception() is not None:
                raise reader.exception()  # type: ignore[misc]
            values: dict[str, Any] = {
                "regions": [w.sample(clock(), settings.live_window_s) for w in windows],
                "window_s": settings.live_window_s,
            }
            if notes:
                values["notes"] = notes
            yield Sample("latency", values)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, HostError):
            await reader


