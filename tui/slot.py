"""The frame around one panel: owns the probe's workers, status and age line.

Workers run ``inferfit.runner.run_probe`` (every probe failure becomes an
error result) and ``LiveProbe.watch``; they only post messages, and the
handlers here feed the panel on the UI thread.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from inferfit.api import LiveProbe, Probe, ProbeContext, Progress
from inferfit.config import Config
from inferfit.findings import ProbeResult
from inferfit.hosts.base import Host, HostError
from inferfit.runner import run_probe
from inferfit.tui.fmt import STATUS_ICON, STATUS_STYLE, age
from inferfit.tui.messages import (
    LiveStopped,
    ProbeCrashed,
    ProbeFinished,
    ProbeStarted,
    ProgressArrived,
    SampleArrived,
)


class ProbeSlot(Vertical, can_focus=True):
    """One probe on one target: a bordered frame holding the probe's panel widget."""

    DEFAULT_CSS = """
    ProbeSlot { height: auto; border: round $panel-lighten-2; padding: 0 1; }
    ProbeSlot:focus-within, ProbeSlot:focus { border: round $accent; }
    ProbeSlot.-hidden { display: none; }
    ProbeSlot.-error { border: round $error; }
    ProbeSlot.-error:focus { border: double $error; }
    """

    def __init__(
        self,
        name: str,
        title: str,
        panel: Widget,
        *,
        target: str,
        probe: Probe | None = None,
        host: Host | None = None,
        config: Config | None = None,
        recorded: dt.datetime | None = None,
    ) -> None:
        super().__init__(classes="slot")
        self.probe_name = name
        self.title = title
        self.panel = panel
        self.target = target
        self.probe = probe
        self.host = host
        self.config = config
        self.recorded = recorded
        self.state = "pending"  # pending | running | ok | warn | fail | error | skipped | failed
        self.result: ProbeResult | None = None
        self.updated_at: float | None = None  # monotonic time of the last result/sample
        self.live_error = ""
        self._subtitle = ""
        self.border_title = title

    @property
    def read_only(self) -> bool:
        return self.probe is None or self.host is None or self.config is None

    @property
    def live_capable(self) -> bool:
        return not self.read_only and isinstance(self.probe, LiveProbe)

    def compose(self) -> ComposeResult:
        yield self.panel

    def on_mount(self) -> None:
        self.tick()

    # -- feeding ---------------------------------------------------------
    def set_result(self, result: ProbeResult, *, live: bool = True) -> None:
        self.result = result
        self.state = result.status
        self.updated_at = time.monotonic() if live else None
        self.set_class(result.status == "error", "-error")
        _call(self.panel, "show_result", result)
        self.tick()

    def matches(self, text: str) -> bool:
        text = text.strip().lower()
        return not text or text in self.probe_name.lower() or text in self.title.lower()

    def tick(self) -> None:
        """Draw pending live data, refresh the subtitle: state and 'updated … ago'."""
        flush = getattr(self.panel, "flush", None)
        if flush is not None:
            try:
                flush()
            except Exception as exc:  # a broken plugin panel must not kill the console
                self.panel.app.log.error(f"panel {type(self.panel).__name__} flush: {exc!r}")
        icon = STATUS_ICON.get(self.state, "")
        style = STATUS_STYLE.get(self.state, "")
        parts = [f"[{style}]{icon} {self.state}[/]"]
        if self.updated_at is not None:
            parts.append(f"updated {age(time.monotonic() - self.updated_at)}")
        elif self.recorded is not None and self.result is not None:
            parts.append(f"recorded {self.recorded:%Y-%m-%d %H:%M}Z")
        if self.live_error:
            parts.append("[magenta]live stopped[/]")
        subtitle = " · ".join(parts)
        if subtitle != self._subtitle:  # (border_subtitle reads back as markup Content)
            self._subtitle = subtitle
            self.border_subtitle = subtitle

    # -- running ---------------------------------------------------------
    @property
    def checking(self) -> bool:
        return self._group_running("check")

    def _group_running(self, group: str) -> bool:
        return any(w.node is self and w.group == group and w.is_running for w in self.workers)

    def start_check(self) -> bool:
        if self.read_only:
            return False
        self.run_check()
        return True

    @work(exclusive=True, exit_on_error=False, group="check")
    async def run_check(self) -> None:
        assert self.probe is not None
        assert self.host is not None
        assert self.config is not None
        self.post_message(ProbeStarted(self.target, self.probe_name))

        def progress(p: Progress) -> None:
            self.post_message(ProgressArrived(self.target, p))

        result = await run_probe(self.probe, self.host, self.config, progress)
        self.post_message(ProbeFinished(self.target, result))

    @work(exclusive=True, exit_on_error=False, group="live")
    async def watch_live(self) -> None:
        probe = self.probe
        assert isinstance(probe, LiveProbe)
        assert self.host is not None
        assert self.config is not None
        ctx = ProbeContext(options=self.config.probe_options(probe.name), config=self.config)
        try:
            samples = probe.watch(self.host, ctx)
            try:
                async for sample in samples:
                    self.post_message(SampleArrived(self.target, sample))
            finally:
                close = getattr(samples, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
        except HostError as exc:
            self.post_message(LiveStopped(self.target, self.probe_name, exc.message))
            return
        self.post_message(LiveStopped(self.target, self.probe_name))

    def start_live(self) -> None:
        if self.live_capable and not self._group_running("live"):
            self.live_error = ""
            self.watch_live()

    # -- message handlers (messages then bubble to the target view) -----------
    def on_probe_started(self, message: ProbeStarted) -> None:
        self.state = "running"
        self.remove_class("-error")
        self.tick()

    def on_probe_finished(self, message: ProbeFinished) -> None:
        self.set_result(message.result)
        if message.result.status == "error":
            self.notify(f"{self.target}: {self.title}: {message.result.summary}",
                        title="probe could not check", severity="error", timeout=6)
        elif message.result.status not in ("skipped",):
            self.start_live()

    def on_progress_arrived(self, message: ProgressArrived) -> None:
        _call(self.panel, "show_progress", message.progress)

    def on_sample_arrived(self, message: SampleArrived) -> None:
        self.updated_at = time.monotonic()
        _call(self.panel, "show_sample", message.sample)

    def on_live_stopped(self, message: LiveStopped) -> None:
        if message.error:
            self.live_error = message.error
            self.notify(f"{self.target}: {self.title}: live readings stopped: {message.error}",
                        severity="warning", timeout=6)
        self.tick()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        text = f"{type(error).__name__}: {error}" if error else "unknown error"
        if worker.group == "check":
            self.state = "failed"
            self.add_class("-error")
            result = ProbeResult.error(self.probe_name, f"console worker crashed: {text}",
                                       kind="worker_crashed")
            self.set_result(result)
            self.post_message(ProbeCrashed(self.target, self.probe_name, text))
            self.notify(f"{self.target}: {self.title}: {text}", title="probe failed",
                        severity="error", timeout=6)
        elif worker.group == "live":
            self.post_message(LiveStopped(self.target, self.probe_name, text))


def _call(panel: Widget, method: str, arg: Any) -> None:
    """Feed a panel; a panel that raises is marked, the console goes on."""
    fn = getattr(panel, method, None)
    if fn is None:
        return
    try:
        fn(arg)
    except Exception as exc:  # a broken plugin panel must not kill the console
        panel.app.log.error(f"panel {type(panel).__name__}.{method} failed: {exc!r}")
        panel.app.notify(f"panel {type(panel).__name__} failed: {exc}", severity="error")
