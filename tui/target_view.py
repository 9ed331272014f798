"""One target: its header, its connection, its panels, its findings."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from inferfit.api import Probe, Progress
from inferfit.config import Config
from inferfit.findings import Findings, ProbeResult
from inferfit.hosts.base import (
    ConnectionLostError,
    ConnectTimeoutError,
    Host,
    HostError,
    UnreachableError,
)
from inferfit.hosts.ssh import SSHHost
from inferfit.runner import TARGET_FACTS, make_target
from inferfit.tui.batch import (
    BatchControl,
    BatchView,
    NoBatchControl,
    measure_mixed,
    mixed_result,
)
from inferfit.tui.fmt import DASH, STATUS_STYLE, duration, num
from inferfit.tui.messages import (
    BatchStateChanged,
    Connected,
    ConnectionFailed,
    LatencyMeasured,
    ProbeFinished,
    ProgressArrived,
)
from inferfit.tui.panels.generic_panel import GenericPanel
from inferfit.tui.panels.recommendation_panel import RecommendationPanel, sizing_result
from inferfit.tui.sizing import ConsoleSizing
from inferfit.tui.slot import ProbeSlot

LATENCY_INTERVAL_S = 10.0
# Panels in the order an SRE reads a box; other probes follow in registration order.
PANEL_ORDER = ("system", "gpu", "disk", "latency", "nginx")


def _order(name: str) -> int:
    return PANEL_ORDER.index(name) if name in PANEL_ORDER else len(PANEL_ORDER)


@dataclass
class TargetSpec:
    """A target to show: live (a host and probes) or replayed (saved findings)."""

    name: str
    host: Host | None = None
    probes: Sequence[Probe] = ()
    findings: Findings | None = None  # replay
    panels: dict[str, type] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.host is not None


class TargetHeader(Static):
    """target · transport · connection state and latency · uptime · batch state."""

    DEFAULT_CSS = "TargetHeader { height: auto; padding: 0 1; background: $boost; }"


class TargetView(Vertical):
    def __init__(
        self,
        spec: TargetSpec,
        config: Config,
        *,
        batch: BatchControl | None = None,
        sizing: ConsoleSizing | None = None,
        view_id: str | None = None,
    ) -> None:
        super().__init__(id=view_id, classes="target-view")
        self.spec = spec
        self.config = config
        self.batch_control: BatchControl = batch or NoBatchControl()
        self.batch_view = BatchView("…")
        self.sizing = sizing
        host = spec.host
        if spec.findings is not None:
            self.findings = spec.findings
        else:
            assert host is not None
            self.findings = Findings(target=make_target(host))
        self.conn_state = "connecting" if spec.live else "replay"
        self.conn_error = ""
        self.latency_ms: float | None = None
        self.uptime_base: tuple[float, float] | None = None  # (uptime_s, monotonic at reading)
        self._header_plain = ""
        self.slots: list[ProbeSlot] = []
        self.sizing_slot: ProbeSlot | None = None
        self.mixed_slot: ProbeSlot | None = None
        self.slots_extra: list[ProbeSlot] = []

    @property
    def name_(self) -> str:
        return self.spec.name

    @property
    def live(self) -> bool:
        return self.spec.live

    def compose(self) -> ComposeResult:
        yield TargetHeader(self._header_text(), classes="target-header")
        with VerticalScroll(classes="panels"):
            yield from self._make_slots()

    def _make_slots(self) -> list[ProbeSlot]:
        spec = self.spec
        recorded = None if spec.live else self.findings.created
        names: list[tuple[str, str, Probe | None]]
        if spec.live:
            names = [(p.name, str(getattr(p, "title", p.name)), p) for p in spec.probes]
        else:
            names = [(n, n.capitalize(), None) for n in self.findings.probes]
        names.sort(key=lambda item: _order(item[0]))
        for name, title, probe in names:
            panel_cls = spec.panels.get(name, GenericPanel)
            title = str(getattr(panel_cls, "title", "") or title) if panel_cls is not GenericPanel \
                else title
            slot = ProbeSlot(
                name, title, panel_cls(), target=spec.name, probe=probe,
                host=spec.host if probe else None, config=self.config if probe else None,
                recorded=recorded,
            )
            self.slots.append(slot)
        if "mixed" in self.findings.sections:
            self.mixed_slot = self._mixed_slot(recorded)
            self.slots_extra.append(self.mixed_slot)
        rec_cls = spec.panels.get("sizing", RecommendationPanel)
        rec_panel = rec_cls()
        if isinstance(rec_panel, RecommendationPanel):
            rec_panel.hint = (
                "waiting for the probes to finish" if self.sizing is not None
                else "no workload: start with --workload FILE to size this box" if spec.live
                else "no [sizing] in this file: `inferfit size --workload FILE` adds it")
        self.sizing_slot = ProbeSlot("sizing", "Recommendation", rec_panel, target=spec.name,
                                     recorded=recorded)
        return [*self.slots, *self.slots_extra, self.sizing_slot]

    def _mixed_slot(self, recorded: dt.datetime | None = None) -> ProbeSlot:
        panel_cls = self.spec.panels.get("mixed", GenericPanel)
        return ProbeSlot("mixed", "Mixed mode: interference", panel_cls(),
                         target=self.spec.name, recorded=recorded)

    def on_mount(self) -> None:
        for slot in self.slots:
            result = self.findings.probes.get(slot.probe_name)
            if result is not None:
                slot.set_result(result, live=False)
        self._show_sizing()
        mixed = self.findings.sections.get("mixed")
        if self.mixed_slot is not None and mixed:
            self.mixed_slot.set_result(mixed_result(dict(mixed)), live=self.live)
        if self.sizing_slot is not None and self.sizing_slot.result is None and (
            self.sizing is None
        ):
            self.sizing_slot.state = "skipped"
            self.sizing_slot.tick()
        self._note_system(self.findings.probes.get("system"))
        if self.live:
            self.connect()
            self.refresh_batch()
            if isinstance(self.spec.host, SSHHost):
                self.set_interval(LATENCY_INTERVAL_S, self.measure_latency)
        self.refresh_header()

    # -- header ------------------------------------------------------------
    def _header_text(self) -> Text:
        t = self.findings.target
        text = Text()
        text.append(t.name, style="bold")
        text.append(f"  {t.transport}", style="dim")
        if t.transport == "ssh":
            text.append(f" {t.address}")
        text.append("  ")
        if self.conn_state == "connected":
            text.append("● connected", style="green")
            if self.latency_ms is not None:
                text.append(f" {self.latency_ms:.0f} ms")
        elif self.conn_state == "failed":
            text.append("✖ not connected", style="red")
            if self.conn_error:
                text.append(f": {self.conn_error}", style="red")
        elif self.conn_state == "replay":
            text.append(f"recorded {self.findings.created:%Y-%m-%d %H:%M}Z", style="cyan")
        else:
            text.append("… connecting", style="yellow")
        text.append("  up ", style="dim")
        text.append(self._uptime())
        if self.live:
            text.append("  batch: ", style="dim")
            style = "yellow" if self.batch_view.paused else ""
            text.append(self.batch_view.text, style=style)
        status = self.findings.status if self.findings.probes else None
        if status:
            text.append("  overall ", style="dim")
            text.append(status, style=f"bold {STATUS_STYLE.get(status, '')}")
        return text

    def _uptime(self) -> str:
        if self.uptime_base is None:
            return DASH
        base, at = self.uptime_base
        return duration(base + (time.monotonic() - at if self.live else 0))

    def refresh_header(self) -> None:
        text = self._header_text()
        if text.plain == self._header_plain:
            return
        self._header_plain = text.plain
        for header in self.query(TargetHeader):
            header.update(text)

    def _note_system(self, result: ProbeResult | None) -> None:
        if result is None:
            return
        up = num(result.values.get("uptime_s"))
        if up is not None:
            self.uptime_base = (up, time.monotonic())

    # -- connection --------------------------------------------------------------
    @work(exclusive=True, exit_on_error=False, group="connect")
    async def connect(self) -> None:
        host = self.spec.host
        started = time.monotonic()
        try:
            if isinstance(host, SSHHost):
                await host.connect()
                latency = (host.connect_s or (time.monotonic() - started)) * 1000
            else:
                latency = None
        except HostError as exc:
            self.post_message(ConnectionFailed(self.spec.name, exc.message, exc.fix))
            return
        if self.sizing is not None and host is not None:
            # Before the probes start, so the first recommendation already has the model.
            await self.sizing.on_host(self.spec.name, host)
        self.post_message(Connected(self.spec.name, latency))

    async def measure_latency(self) -> None:
        if self.conn_state == "connected":
            self._ping()

    @work(exclusive=True, exit_on_error=False, group="latency")
    async def _ping(self) -> None:
        host = self.spec.host
        assert host is not None
        started = time.monotonic()
        try:
            await host.run(["true"], timeout=10)
        except HostError as exc:
            lost = isinstance(exc, ConnectionLostError | UnreachableError | ConnectTimeoutError)
            self.post_message(LatencyMeasured(self.spec.name, None, exc.message, lost))
            return
        self.post_message(LatencyMeasured(self.spec.name, (time.monotonic() - started) * 1000))

    def on_connected(self, message: Connected) -> None:
        self.conn_state = "connected"
        self.conn_error = ""
        self.latency_ms = message.latency_ms
        if self.findings.target.transport == "ssh" and message.latency_ms is not None:
            self.findings.target.facts["ssh_connect_ms"] = round(message.latency_ms, 1)
        self.refresh_header()
        self.run_all()

    def on_connection_failed(self, message: ConnectionFailed) -> None:
        self.conn_state = "failed"
        self.conn_error = message.error
        for slot in self.slots:
            slot.set_result(ProbeResult.error(slot.probe_name, f"not connected: {message.error}",
                                              kind="not_connected", fix=message.fix))
        self.refresh_header()
        fix = f" — {message.fix}" if message.fix else ""
        self.notify(f"{self.spec.name}: {message.error}{fix}", title="could not connect",
                    severity="error", timeout=10)

    def on_latency_measured(self, message: LatencyMeasured) -> None:
        if message.lost:
            self.conn_state = "failed"
            self.conn_error = message.error
        elif message.latency_ms is None:
            self.latency_ms = None  # busy (no free channel, slow shell): connected, RTT unknown
        else:
            self.conn_state = "connected"
            self.latency_ms = message.latency_ms
        self.refresh_header()

    # -- probes ------------------------------------------------------------------
    def run_all(self) -> int:
        """Re-run every probe (reconnecting first when the connection failed)."""
        if not self.live:
            return 0
        if self.conn_state in ("failed", "connecting") and not self._connecting():
            self.conn_state = "connecting"
            self.refresh_header()
            self.connect()
            return len(self.slots)
        if self.conn_state != "connected":
            return 0
        return sum(slot.start_check() for slot in self.slots)

    def _connecting(self) -> bool:
        return any(w.node is self and w.group == "connect" and w.is_running for w in self.workers)

    def on_probe_finished(self, message: ProbeFinished) -> None:
        result = message.result
        if message.section:
            if result.status != "error":  # a findings section, not a probe
                self.findings.sections[message.section] = {
                    **result.values, "duration_s": round(result.duration_s, 1)}
            return
        self.findings.probes[result.name] = result
        if result.name == "system":
            for key in TARGET_FACTS:
                if key in result.values:
                    self.findings.target.facts[key] = result.values[key]
            self._note_system(result)
        self.refresh_header()

    def set_sizing(self, table: dict[str, object]) -> None:
        self.findings.sections["sizing"] = dict(table)
        self._show_sizing()

    def _show_sizing(self) -> None:
        table = self.findings.sections.get("sizing")
        if self.sizing_slot is not None and table:
            self.sizing_slot.set_result(sizing_result(table), live=self.live)

    @property
    def busy(self) -> bool:
        return (any(slot.checking for slot in self.slots) or self._connecting()
                or any(w.node is self and w.group == "measure" and w.is_running
                       for w in self.workers))

    # -- batch ------------------------------------------------------------------
    def start_measure(self) -> ProbeSlot:
        """Mount the mixed-mode panel (if needed) and run the interference A/B in a worker."""
        if self.mixed_slot is None:
            self.mixed_slot = self._mixed_slot()
            self.slots_extra.append(self.mixed_slot)
            self.query_one(".panels", VerticalScroll).mount(self.mixed_slot,
                                                            before=self.sizing_slot)
        self.mixed_slot.state = "running"
        self.mixed_slot.tick()
        self.measure()
        return self.mixed_slot

    @work(exclusive=True, exit_on_error=False, group="measure")
    async def measure(self) -> None:
        slot, host = self.mixed_slot, self.spec.host
        assert slot is not None
        assert host is not None

        def progress(p: Progress) -> None:
            slot.post_message(ProgressArrived(self.spec.name, p))

        result = await measure_mixed(self.batch_control, host, progress)
        slot.post_message(ProbeFinished(self.spec.name, result, section="mixed"))
        self.post_message(BatchStateChanged(self.spec.name, self.batch_view))
        self.refresh_batch()

    # -- batch state ------------------------------------------------------------
    @work(exclusive=True, exit_on_error=False, group="batch")
    async def refresh_batch(self) -> None:
        view = await self.batch_control.status(self.spec.host, self.spec.name)
        self.post_message(BatchStateChanged(self.spec.name, view))

    @work(exclusive=True, exit_on_error=False, group="batch")
    async def toggle_batch(self) -> None:
        view, text = await self.batch_control.toggle(self.spec.host, self.spec.name)
        self.post_message(BatchStateChanged(self.spec.name, view, text))

    def on_batch_state_changed(self, message: BatchStateChanged) -> None:
        self.batch_view = message.view
        self.refresh_header()
        if message.note:
            self.notify(message.note, title=f"batch · {self.spec.name}",
                        severity="information" if message.view.configured else "warning")

    def apply_filter(self, text: str) -> int:
        shown = 0
        for slot in [*self.slots, *self.slots_extra,
                     *([self.sizing_slot] if self.sizing_slot else [])]:
            visible = slot.matches(text)
            slot.set_class(not visible, "-hidden")
            shown += visible
        return shown

    def visible_slots(self) -> list[ProbeSlot]:
        every = [*self.slots, *self.slots_extra, *([self.sizing_slot] if self.sizing_slot else [])]
        return [s for s in every if not s.has_class("-hidden")]

    def tick(self) -> None:
        for slot in [*self.slots, *self.slots_extra]:
            slot.tick()
        if self.sizing_slot is not None:
            self.sizing_slot.tick()
        view = getattr(self.batch_control, "view", None)
        if self.live and view is not None and self.spec.host is not None:
            fresh = view(self.spec.host)  # no I/O: a lease countdown, say
            if fresh is not None:
                self.batch_view = fresh
        if self.live:
            self.refresh_header()
