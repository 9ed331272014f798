"""The generic panel: shows any ProbeResult, so a probe without its own panel still shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from inferfit.api import Progress, Sample
from inferfit.tui.fmt import fvalue, table_rows
from inferfit.tui.panels.base import ProbePanel, SummaryLine, kv_table, notes_text, summary_text

MAX_ROWS = 24


class GenericPanel(ProbePanel):
    """Status, summary, a values table, notes; the last live sample and progress if any."""

    probe_name = "*"
    title = "Probe"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._live: Mapping[str, Any] = {}
        self._progress: Progress | None = None

    def compose(self) -> ComposeResult:
        yield SummaryLine(classes="summary")
        yield Static(classes="values")
        yield Static(classes="live")
        yield Static(classes="notes")

    def show_sample(self, sample: Sample) -> None:
        self._live = dict(sample.values)
        self.mark_dirty()

    def show_progress(self, progress: Progress) -> None:
        self._progress = progress if (progress.fraction or 0) < 1 else None
        self.mark_dirty()

    def refresh_view(self) -> None:
        if not self.ready:
            return
        self.put(".summary", self.version, lambda: summary_text(self.result))
        values = self.result.values if self.result else {}
        self.put(".values", self.version, lambda: render_values(values))
        live = Text()
        if self._progress is not None:
            frac = self._progress.fraction
            live.append(f"{self._progress.message}", style="cyan")
            if frac is not None:
                live.append(f" {frac:.0%}")
        if self._live:
            if live:
                live.append("\n")
            live.append("live: ", style="bold")
            live.append(", ".join(f"{k} {fvalue(k, v)}" for k, v in self._live.items()))
        self.query_one(".live", Static).update(live)
        self.put(".notes", self.version, lambda: notes_text(self.result))


def render_values(values: Mapping[str, Any]) -> Table | Text:
    """Scalars as a key/value grid; arrays of tables as small tables below it."""
    if not values:
        return Text("")
    scalars: list[tuple[str, Any]] = []
    tables: list[tuple[str, list[Mapping[str, Any]]]] = []
    for key, value in values.items():
        rows = table_rows(value)
        if rows and len(rows) == len(value):
            tables.append((key, rows))
        else:
            scalars.append((key, Text(fvalue(key, value))))
    outer = Table.grid()
    outer.add_column()
    outer.add_row(kv_table(scalars[:MAX_ROWS], columns=1))
    if len(scalars) > MAX_ROWS:
        outer.add_row(Text(f"… {len(scalars) - MAX_ROWS} more values", style="dim"))
    for key, rows in tables:
        cols: list[str] = []
        for row in rows:
            for k in row:
                if k not in cols and not isinstance(row[k], Mapping | list):
                    cols.append(k)
        t = Table(title=key, title_justify="left", box=None, padding=(0, 1), show_edge=False)
        for c in cols[:8]:
            t.add_column(c, overflow="fold")
        for row in rows[:MAX_ROWS]:
            t.add_row(*(fvalue(c, row.get(c)) for c in cols[:8]))
        outer.add_row(t)
    return outer
