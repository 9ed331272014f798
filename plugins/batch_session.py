"""A pause that lives as long as its owner: the API the console (and `pause --hold`) use.

``BatchSession`` pauses through a controller (which starts the lease watchdog on
the box), renews the lease every ``renew_every_s`` while the session lives, and
resumes on :meth:`close`. If the owner dies, the network drops or the laptop
sleeps, renewals stop and the watchdog on the box resumes the batch after
``lease_s``. State is always what the box last said (:attr:`state`), with the
countdown computed from the last lease read (:meth:`countdown_s`).

``ConsoleBatchControl`` adapts sessions to the console's seam
(``inferfit.tui.batch.BatchControl``: ``status`` / ``toggle``), one session per host.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inferfit.api import BatchController, BatchState
from inferfit.hosts.base import Host, HostError
from inferfit.plugins import batch_lease
from inferfit.plugins.batch_common import (
    BatchOptions,
    BatchRefused,
    ControllerState,
    describe_state,
)

if TYPE_CHECKING:
    from inferfit.config import Config
    from inferfit.manager import Registry
    from inferfit.tui.batch import BatchView

PAUSED_STATES = ("paused", "partly_paused")


class BatchSession:
    """One controller on one host; pause = with a lease this session keeps renewing."""

    def __init__(self, host: Host, controller: BatchController, options: Mapping[str, Any], *,
                 renew_every_s: float | None = None) -> None:
        self.host = host
        self.controller = controller
        self.options = dict(options)
        self.opts = BatchOptions.from_mapping(options, expect=controller.name)
        self.renew_every_s = renew_every_s or max(1.0, self.opts.lease_s / 3)
        self.state: BatchState | None = None
        self.paused_by_us = False
        self.renew_error: str | None = None
        self.renewals = 0
        self._task: asyncio.Task[None] | None = None

    # -- reading -----------------------------------------------------------
    @property
    def lease(self) -> batch_lease.Lease | None:
        return self.state.lease if isinstance(self.state, ControllerState) else None

    @property
    def paused(self) -> bool:
        return self.state is not None and self.state.state in PAUSED_STATES

    def countdown_s(self) -> float | None:
        """Seconds until the box resumes by itself (None when not paused with a lease)."""
        lease = self.lease
        if lease is None or not self.paused:
            return None
        return lease.remaining_s()

    def header(self) -> str:
        """A short line for the console header: state, lease countdown, renewal trouble."""
        if self.state is None:
            return "batch: unknown"
        text = f"batch: {describe_state(self.state)}"
        if self.renew_error and self.paused:
            text += f" · renew failed: {self.renew_error}"
        return text

    async def refresh(self) -> BatchState:
        self.state = await self.controller.status(self.host, self.options)
        return self.state

    # -- acting --------------------------------------------------------------
    async def pause(self, fraction: float = 1.0) -> BatchState:
        self.state = await self.controller.pause(self.host, self.options, fraction=fraction)
        self.paused_by_us = True
        self.renew_error = None
        if isinstance(self.state, ControllerState) and self.state.lease_name:
            self._start_renewing()  # a third-party controller without a lease: nothing to renew
        return self.state

    async def throttle(self) -> BatchState:
        return await self.pause(self.opts.throttle_fraction)

    async def resume(self) -> BatchState:
        await self._stop_renewing()
        self.state = await self.controller.resume(self.host, self.options)
        self.paused_by_us = False
        return self.state

    async def toggle(self) -> BatchState:
        state = self.state or await self.refresh()
        if state.state in PAUSED_STATES:
            return await self.resume()
        return await self.pause()

    async def close(self, *, resume: bool = True) -> None:
        """Stop renewing; resume if this session paused (errors land in renew_error)."""
        await self._stop_renewing()
        if resume and self.paused_by_us:
            try:
                await self.resume()
            except (HostError, BatchRefused) as exc:
                self.renew_error = f"resume on close failed: {exc}"

    async def __aenter__(self) -> BatchSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the renew loop ------------------------------------------------------
    def _start_renewing(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._renew_loop())

    async def _stop_renewing(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def renew_once(self) -> batch_lease.Lease | None:
        """Renew now; None when the lease is gone (someone resumed, or it expired)."""
        state = self.state
        if not isinstance(state, ControllerState) or not state.lease_name:
            return None
        lease = await batch_lease.renew(self.host, self.opts.lease_dir, state.lease_name,
                                        self.opts.lease_s)
        if lease is not None:
            self.renewals += 1
            self.state = _with_lease(state, lease)
        return lease

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_every_s)
            try:
                lease = await self.renew_once()
            except HostError as exc:
                self.renew_error = exc.message  # the box resumes by itself after lease_s
                continue
            if lease is None:
                self.renew_error = "the lease is gone on the box (resumed elsewhere or expired)"
                self.paused_by_us = False
                with contextlib.suppress(HostError, BatchRefused):
                    await self.refresh()
                return
            self.renew_error = None


def _with_lease(state: ControllerState, lease: batch_lease.Lease) -> ControllerState:
    return ControllerState(
        controller=state.controller, state=state.state, targets=state.targets,
        detail=state.detail, paused_targets=state.paused_targets, lease=lease,
        lease_name=state.lease_name, notes=state.notes,
    )


def controller_for(options: Mapping[str, Any], registry: Registry) -> BatchController:
    """The registered controller named by [batch] controller (refuses when unset/unknown)."""
    opts = BatchOptions.from_mapping(options, expect=str(options.get("controller", "")) or None)
    found = registry.batch_controllers.get(opts.controller)
    if found is None:
        known = ", ".join(sorted(registry.batch_controllers)) or "none"
        raise BatchRefused(f"no batch controller named {opts.controller!r} (registered: {known})",
                           kind="config")
    return found


class ConsoleBatchControl:
    """The console seam (``p`` toggles, the header shows state + countdown)."""

    def __init__(self, options: Mapping[str, Any], registry: Registry) -> None:
        self.options = dict(options)
        self.registry = registry
        self.sessions: dict[str, BatchSession] = {}

    @classmethod
    def from_config(cls, config: Config, registry: Registry) -> ConsoleBatchControl | None:
        table = config.get("batch", {})
        if not isinstance(table, Mapping) or not table.get("controller"):
            return None
        return cls(table, registry)

    def session(self, host: Host) -> BatchSession:
        key = f"{host.transport}:{host.address}"
        if key not in self.sessions:
            self.sessions[key] = BatchSession(host, controller_for(self.options, self.registry),
                                              self.options)
        return self.sessions[key]

    def view(self, host: Host) -> BatchView | None:
        """The header line without any I/O (countdown recomputed locally); None if unknown."""
        key = f"{host.transport}:{host.address}"
        session = self.sessions.get(key)
        if session is None or session.state is None:
            return None
        return self._view(session)

    def _view(self, session: BatchSession) -> BatchView:
        from inferfit.tui.batch import BatchView

        text = session.header().removeprefix("batch: ")
        return BatchView(text, paused=session.paused, configured=True)

    async def status(self, host: Host | None, target: str) -> BatchView:
        from inferfit.tui.batch import BatchView

        if host is None:
            return BatchView("no host", configured=True)
        session = self.session(host)
        try:
            await session.refresh()
        except (HostError, BatchRefused) as exc:
            return BatchView(f"unknown: {exc}", configured=True)
        return self._view(session)

    async def toggle(self, host: Host | None, target: str) -> tuple[BatchView, str]:
        from inferfit.tui.batch import BatchView

        if host is None:
            return BatchView("no host", configured=True), "no host to pause batch on"
        session = self.session(host)
        try:
            state = await session.toggle()
        except (HostError, BatchRefused) as exc:
            return self._view(session), f"batch: {exc}"
        verb = "paused" if state.state in PAUSED_STATES else "resumed"
        return self._view(session), f"batch {verb} on {host.name}: {describe_state(state)}"

    async def close(self) -> None:
        """Resume everything this console paused (call on quit)."""
        for session in self.sessions.values():
            await session.close()
