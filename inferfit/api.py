"""The shapes plugins implement: probes, exporters, batch controllers, recommendations.

This module never imports textual: probes and the headless CLI use it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from inferfit.findings import Findings, ProbeResult
from inferfit.hosts.base import Host

if TYPE_CHECKING:
    from inferfit.config import Config


@dataclass(frozen=True)
class Progress:
    """A progress report from a running probe (stderr in the CLI, a bar in the console)."""

    probe: str
    message: str
    fraction: float | None = None  # 0..1 when known
    values: Mapping[str, float] = field(default_factory=dict)  # live figures, e.g. MiB/s


@dataclass(frozen=True)
class Sample:
    """One live reading for a panel (GPU util, QPS, RTT...)."""

    probe: str
    values: Mapping[str, Any]
    at: float = field(default_factory=time.time)


def _ignore_progress(_: Progress) -> None:
    return None


@dataclass
class ProbeContext:
    """What a probe gets besides the host: its options and a way to report progress."""

    options: Mapping[str, Any]  # the effective [probes.NAME] table
    config: Config  # the whole effective config (regions, batch, ...)
    progress: Callable[[Progress], None] = _ignore_progress
    selected: bool = False  # True when the user named this probe explicitly


@runtime_checkable
class Probe(Protocol):
    """One module under probes/. Runs commands on a Host and returns findings.

    ``check`` never raises for expected failures (tool missing, driver broken,
    permission denied): it returns a ProbeResult with status and error_kind.
    HostError (transport failures) may propagate; the runner maps it.
    """

    name: str
    title: str

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult: ...


@runtime_checkable
class LiveProbe(Probe, Protocol):
    """A probe that can also stream live samples for a console panel."""

    def watch(self, host: Host, ctx: ProbeContext) -> AsyncIterator[Sample]: ...


@runtime_checkable
class Exporter(Protocol):
    """Renders findings of one or more hosts into a text format (JSON, JUnit, ...)."""

    name: str
    suffix: str  # file name suffix, e.g. ".xml"

    def render(self, findings: Sequence[Findings]) -> str: ...


@dataclass(frozen=True)
class BatchState:
    """What a batch controller reads back from the box (never remembered state)."""

    controller: str
    state: str  # "running" | "paused" | "partly_paused" | "absent"
    targets: tuple[str, ...] = ()  # pids, units, containers it controls
    detail: str = ""


@runtime_checkable
class BatchController(Protocol):
    """Pauses and resumes batch work on a box (signal, cgroup, systemd, docker)."""

    name: str

    async def status(self, host: Host, options: Mapping[str, Any]) -> BatchState: ...

    async def pause(
        self, host: Host, options: Mapping[str, Any], *, fraction: float = 1.0
    ) -> BatchState: ...

    async def resume(self, host: Host, options: Mapping[str, Any]) -> BatchState: ...


@dataclass
class Recommendation:
    """The sizing verdict. ``table`` is the complete [sizing] findings table."""

    mode: str  # realtime | batch | mixed | split
    actions: list[str]
    confidence: float
    table: dict[str, Any]


class PanelClass(Protocol):
    """What the panel hook registers: a Textual widget class for one probe.

    Declared here without importing textual; the console checks the class.
    """

    probe_name: ClassVar[str]
