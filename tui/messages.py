"""Messages workers post to the UI (workers never touch widgets themselves)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from inferfit.api import Progress, Sample
from inferfit.findings import ProbeResult
from inferfit.tui.batch import BatchView

# Keys that tell one live series from another inside a probe (device, region, ...).
_SERIES_KEYS = ("index", "device", "uuid", "region", "name", "target")


@dataclass
class ProbeStarted(Message):
    target: str
    probe: str


@dataclass
class ProbeFinished(Message):
    """A probe's check() came back (any status, error included)."""

    target: str
    result: ProbeResult
    section: str = ""  # set when the result is a findings section (e.g. "mixed"), not a probe


@dataclass
class ProbeCrashed(Message):
    """The worker itself died (run_probe maps probe exceptions; this is the rest)."""

    target: str
    probe: str
    error: str


@dataclass
class ProgressArrived(Message):
    target: str
    progress: Progress

    def can_replace(self, message: Message) -> bool:
        # Progress is a level, not an event: only the newest matters.
        return (
            isinstance(message, ProgressArrived)
            and message.target == self.target
            and message.progress.probe == self.progress.probe
            and message.progress.fraction is not None
            and self.progress.fraction is not None
            and self.progress.fraction < 1.0
        )


@dataclass
class SampleArrived(Message):
    target: str
    sample: Sample

    def can_replace(self, message: Message) -> bool:
        # Coalesce a backlog of the same series (toolong-style); never mix series.
        if not isinstance(message, SampleArrived) or message.target != self.target:
            return False
        mine, theirs = self.sample, message.sample
        if mine.probe != theirs.probe or set(mine.values) != set(theirs.values):
            return False
        return all(mine.values.get(k) == theirs.values.get(k) for k in _SERIES_KEYS)


@dataclass
class LiveStopped(Message):
    target: str
    probe: str
    error: str = ""


@dataclass
class Connected(Message):
    target: str
    latency_ms: float | None


@dataclass
class ConnectionFailed(Message):
    target: str
    error: str
    fix: str = ""


@dataclass
class LatencyMeasured(Message):
    target: str
    latency_ms: float | None
    error: str = ""
    lost: bool = False  # the connection itself is gone (not just a busy or slow box)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LatencyMeasured) and message.target == self.target


@dataclass
class BatchStateChanged(Message):
    target: str
    view: BatchView
    note: str = ""  # a message for the user (e.g. "batch control is not configured")
