"""Console test helpers: fixture findings, fake probes, app factories."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from inferfit.api import ProbeContext, Progress, Sample
from inferfit.cli.console import console_registry
from inferfit.config import Config
from inferfit.findings import Findings, ProbeResult
from inferfit.hosts.base import Host
from inferfit.hosts.local import LocalHost
from inferfit.manager import Registry
from inferfit.tui.app import InferfitApp
from inferfit.tui.target_view import TargetSpec

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tui"
A100 = FIXTURES / "a100-box.toml"
T4 = FIXTURES / "t4-box.toml"


def live_samples() -> dict[str, list[dict[str, Any]]]:
    return tomllib.loads((FIXTURES / "live-samples.toml").read_text())


def registry() -> Registry:
    return console_registry()[1]


def replay_app(*paths: Path, keep: Sequence[str] | None = None) -> InferfitApp:
    """`inferfit show` on fixture files; ``keep`` limits the probes shown (one-panel snapshots)."""
    reg = registry()
    specs = []
    for path in paths:
        findings = Findings.load(path)
        if keep is not None:
            findings.probes = {k: v for k, v in findings.probes.items() if k in keep}
            if "sizing" not in keep:
                findings.sections.pop("sizing", None)
        specs.append(TargetSpec(findings.target.name, findings=findings, panels=dict(reg.panels)))
    return InferfitApp(specs, Config.load(include_user=False, include_project=False))


class CountingProbe:
    """Returns ok after an optional wait; counts its runs."""

    def __init__(self, name: str, delay_s: float = 0.0, release: asyncio.Event | None = None):
        self.name = name
        self.title = name.capitalize()
        self.runs = 0
        self.delay_s = delay_s
        self.release = release

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        self.runs += 1
        ctx.progress(Progress(self.name, "working", 0.5, {"read_mib_s": 100.0}))
        if self.release is not None:
            await self.release.wait()
        await asyncio.sleep(self.delay_s)
        return ProbeResult(self.name, "ok", f"run {self.runs}", values={"runs": self.runs})


class RaisingProbe:
    name = "broken"
    title = "Broken"

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        raise RuntimeError("the probe fell over")


class TickingProbe(CountingProbe):
    """A LiveProbe whose watch() yields ``count`` samples, ``period_s`` apart."""

    def __init__(self, name: str = "ticker", count: int = 5, period_s: float = 0.05):
        super().__init__(name)
        self.count = count
        self.period_s = period_s
        self.sent = 0

    async def watch(self, host: Host, ctx: ProbeContext) -> AsyncIterator[Sample]:
        for i in range(self.count):
            await asyncio.sleep(self.period_s)
            self.sent += 1
            yield Sample(self.name, {"tick": i, "value_ms": 10.0 + i})


def live_app(probes: Sequence[Any], **kwargs: Any) -> InferfitApp:
    reg = registry()
    spec = TargetSpec("local", host=LocalHost(), probes=list(probes), panels=dict(reg.panels))
    return InferfitApp([spec], Config.load(include_user=False, include_project=False), **kwargs)


class Kit:
    """What console tests share (conftest modules are not importable under importlib mode)."""

    A100 = A100
    T4 = T4
    FIXTURES = FIXTURES
    CountingProbe = CountingProbe
    RaisingProbe = RaisingProbe
    TickingProbe = TickingProbe
    live_samples = staticmethod(live_samples)
    replay_app = staticmethod(replay_app)
    live_app = staticmethod(live_app)
    registry = staticmethod(registry)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
