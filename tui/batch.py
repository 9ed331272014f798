"""The console's batch-control seam (the `p` key and the header's batch state).

Until ``[batch] controller`` is set, :class:`NoBatchControl` answers that
batch control is not configured; then :func:`make_batch_control` returns
mixed mode's ``ConsoleBatchControl`` (``inferfit.plugins.batch_session``).
Any object with the same methods can be passed as ``InferfitApp(batch_control=)``.
No textual import here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from inferfit.api import Progress
from inferfit.config import Config
from inferfit.findings import ProbeResult
from inferfit.hosts.base import Host

if TYPE_CHECKING:
    from inferfit.manager import Registry

NOT_CONFIGURED = "batch control is not configured: set [batch] controller (docs/mixed.md)"


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
    """The console's batch control: mixed mode's when ``[batch] controller`` is set.

    Optional extras the console uses when present: ``view(host) -> BatchView | None``
    (header text without I/O, called every second for a lease countdown) and
    ``async close()`` (called on quit: resumes what this console paused).
    """
    try:
        from inferfit.plugins.batch_session import ConsoleBatchControl
    except ImportError:  # mixed mode not installed
        return NoBatchControl()
    control = ConsoleBatchControl.from_config(config, registry)
    # cast: mypy loses the structural match across the import cycle with batch_session.
    return NoBatchControl() if control is None else cast(BatchControl, control)


def can_measure(control: BatchControl) -> bool:
    """True when ``control`` is mixed mode's (it knows the [batch] options and controllers)."""
    return hasattr(control, "options") and hasattr(control, "registry")


async def measure_mixed(
    control: BatchControl, host: Host, progress: Callable[[Progress], None]
) -> ProbeResult:
    """Interference A/B (`m`): batch on / paused / on, realtime latency probed on the box.

    Returns the [mixed] section wrapped as a ProbeResult named "mixed" (an error result
    when mixed mode refuses or the box fails); always leaves batch running.
    """
    from inferfit.hosts.base import HostError
    from inferfit.plugins.batch_common import BatchRefused
    from inferfit.plugins.batch_session import controller_for
    from inferfit.plugins.interference import measure_interference

    options: Any = getattr(control, "options", {})
    registry: Any = getattr(control, "registry", None)
    try:
        section = await measure_interference(
            host, controller_for(options, registry), options, progress=progress)
    except BatchRefused as exc:
        return ProbeResult.error("mixed", exc.message, kind=exc.kind, fix=exc.fix)
    except HostError as exc:
        return ProbeResult.error("mixed", exc.message, kind=exc.kind, fix=exc.fix)
    return mixed_result(section)


def mixed_result(section: dict[str, Any]) -> ProbeResult:
    on, off = section.get("p95_ms_batch_on"), section.get("p95_ms_batch_off")
    if isinstance(on, int | float) and isinstance(off, int | float):
        summary = f"realtime p95 {on:,.0f} ms with batch running, {off:,.0f} ms with it paused"
    else:
        summary = "interference measured (see values)"
    reserved = {"status", "summary", "duration_s", "notes", "error_kind", "fix"}
    values = {k: v for k, v in section.items() if k not in reserved}
    return ProbeResult("mixed", "ok", summary, float(section.get("duration_s", 0.0)),
                       values=values)
