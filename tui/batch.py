"""The console's batch-control seam (the `p` key and the header's batch state).

Until mixed mode is configured, :class:`NoBatchControl` answers that batch
control is not configured. The mixed-mode plugin wires the real thing by
returning its own :class:`BatchControl` from :func:`make_batch_control`
(or by passing ``batch_control=`` to ``InferfitApp``). No textual import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from inferfit.config import Config
from inferfit.hosts.base import Host

if TYPE_CHECKING:
    from inferfit.manager import Registry

NOT_CONFIGURED = "batch control is not configured (mixed mode: see docs/console.md)"


@dataclass(frozen=True)
class BatchView:
    """What the header shows and whether quitting should ask first."""

    text: str  # e.g. "running", "paused (3 pids)", "not configured"
    paused: bool = False
    configured: bool = False


class BatchControl(Protocol):
    """Reads and toggles batch load on one target; every call may do I/O (runs in a worker)."""

    async def status(self, host: Host | None, target: str) -> BatchView: ...

    async def toggle(self, host: Host | None, target: str) -> tuple[BatchView, str]:
        """Pause when running, resume when paused; returns the new view and a message."""
        ...


class NoBatchControl:
    """The default: nothing to pause; `p` says so."""

    async def status(self, host: Host | None, target: str) -> BatchView:
        return BatchView("not configured")

    async def toggle(self, host: Host | None, target: str) -> tuple[BatchView, str]:
        return BatchView("not configured"), NOT_CONFIGURED


def make_batch_control(config: Config, registry: Registry) -> BatchControl:
    """The console's batch control for ``config`` (the mixed-mode plugin hooks in here)."""
    return NoBatchControl()
