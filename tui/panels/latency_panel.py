"""Latency panel: one row per region — RTT percentiles, loss, jitter, verdict and a sparkline.

Findings keys (docs/latency.md): ``[[regions]]`` with ``name``, ``method``,
``samples``, ``loss_pct``, ``rtt_ms_p50/p95/p99``, ``jitter_ms``,
``budget_ms_p95``, ``verdict``. Live samples: ``region`` + ``rtt_ms`` (one
region), or ``regions`` as a table name -> ms or an array of tables (the latency
probe's ``watch``: ``name``, ``rtt_ms``, ``history_ms``, rolling ``rtt_ms_p50/p95``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from inferfit.api import Sample
from inferfit.tui.fmt import DASH, STATUS_STYLE, fnum, num, pick, spark, table_rows
from inferfit.tui.panels.base import History, ProbePanel, SummaryLine, notes_text, summary_text

RTT_KEYS = ("rtt_ms", "rtt_ms_last", "rtt_ms_p50", "latency_ms", "value_ms")
SPARK_WIDTH = 16


def sample_points(values: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    """(region, rtt ms or None for a lost probe) from any of the live sample shapes."""
    regions = values.get("regions")
    out: list[tuple[str, float | None]] = []
    if isinstance(regions, Mapping):
        for name, value in regions.items():
            out.append((str(name), num(pick(value, *RTT_KEYS)) if isinstance(value, Mapping)
                        else num(value)))
        return out
    for row in table_rows(regions):
        name = pick(row, "name", "region")
        if name is not None:
            out.append((str(name), num(pick(row, *RTT_KEYS))))
    if out:
        return out
    name = pick(values, "region", "name")
    if name is not None:
        out.append((str(name), num(pick(values, *RTT_KEYS))))
    return out


class LatencyPanel(ProbePanel):
    probe_name = "latency"
    title = "Latency"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.history = History()
        self.live_names: list[str] = []

    def compose(self) -> ComposeResult:
        yield SummaryLine(classes="summary")
        yield Static(classes="regions")
        yield Static(classes="notes")

    def show_sample(self, sample: Sample) -> None:
        histories = {str(pick(r, "name", "region")): r["history_ms"]
                     for r in table_rows(sample.values.get("regions"))
                     if isinstance(r.get("history_ms"), list)}
        for name, rtt in sample_points(sample.values):
            if name not in self.live_names:
                self.live_names.append(name)
            if name in histories:  # the probe keeps the window itself: take it whole
                self.history.series[name] = deque(
                    (v for v in (num(x) for x in histories[name]) if v is not None),
                    maxlen=self.history.size)
            else:
                self.history.add(name, rtt)
        self.mark_dirty()

    def refresh_view(self) -> None:
        if not self.ready:
            return
        self.put(".summary", self.version, lambda: summary_text(self.result))
        regions = table_rows(self.result.values.get("regions") if self.result else None)
        key = (self.version, tuple(self.live_names),
               tuple(tuple(self.history.get(n)[-16:]) for n in self.live_names))
        rows = len(regions) + len([n for n in self.live_names
                                   if n not in {str(r.get("name")) for r in regions}])
        self.put(".regions", key, lambda: region_table(regions, self.history, self.live_names),
                 layout=self._shown.get("#rows") != rows)  # no_wrap columns: height = rows
        self._shown["#rows"] = rows
        self.put(".notes", self.version, lambda: notes_text(self.result))


def region_table(regions: list[Mapping[str, Any]], history: History,
                 live_names: list[str]) -> Table | Text:
    names = [str(r.get("name", DASH)) for r in regions]
    extra = [n for n in live_names if n not in names]
    if not regions and not extra:
        return Text("no regions measured", style="dim")
    t = Table(box=None, padding=(0, 1), show_edge=False)
    t.add_column("region", no_wrap=True, overflow="ellipsis", max_width=14)
    t.add_column("p50", justify="right", no_wrap=True)
    t.add_column("p95", justify="right", no_wrap=True)
    t.add_column("p99", justify="right", no_wrap=True)
    t.add_column("loss", justify="right", no_wrap=True)
    t.add_column("jitter", justify="right", no_wrap=True)
    t.add_column("budget", justify="right", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    t.add_column("live ms", no_wrap=True)
    for r in [*regions, *({"name": n} for n in extra)]:
        name = str(r.get("name", DASH))
        verdict = str(pick(r, "verdict", "status") or DASH)
        p95, budget = num(r.get("rtt_ms_p95")), num(r.get("budget_ms_p95"))
        p95_style = "red" if p95 is not None and budget is not None and p95 > budget else ""
        data = history.get(name)
        last = history.last(name)
        live = Text(spark(data, SPARK_WIDTH), style="cyan")
        if last is not None:
            live.append(f" {last:,.0f}")
        t.add_row(
            name, fnum(r.get("rtt_ms_p50"), 1), Text(fnum(p95, 1), style=p95_style),
            fnum(r.get("rtt_ms_p99"), 1), fnum(r.get("loss_pct"), 1, "%"),
            fnum(r.get("jitter_ms"), 1), fnum(budget, 0),
            Text(verdict, style=STATUS_STYLE.get(verdict, "")), live,
        )
    return t
