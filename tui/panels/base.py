"""The panel contract: a Textual widget class with ``probe_name`` and three feeds.

A plugin panel subclasses :class:`ProbePanel` (or any Widget with the same
methods) and is registered through ``inferfit_register_panels``. The console
wraps it in a frame that owns the worker, the status and the "updated Ns ago"
line; the panel only turns data into pixels:

- ``show_result(result)``: the probe's ProbeResult (live run or saved findings)
- ``show_sample(sample)``: a live reading from ``LiveProbe.watch`` (about 1 Hz)
- ``show_progress(progress)``: a Progress report while ``check()`` runs

Each is called on the UI thread and must not do I/O. ``show_sample`` should
only record the reading and call ``mark_dirty()``: the frame calls ``flush()``
once per console tick, so all live panels redraw together about once a second.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from inferfit.api import Progress, Sample
from inferfit.findings import ProbeResult
from inferfit.tui.fmt import DASH, STATUS_STYLE, fvalue

HISTORY = 300  # live points kept per series: 5 minutes at 1 Hz


class ProbePanel(Widget):
    """Base class for panels; the defaults ignore what a panel does not show."""

    probe_name: ClassVar[str] = ""
    title: ClassVar[str] = ""

    DEFAULT_CSS = """
    ProbePanel { height: auto; }
    ProbePanel > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.result: ProbeResult | None = None
        self.ready = False  # set once mounted: children exist and can be updated
        self._shown: dict[str, object] = {}
        self.dirty = False
        self.version = 0  # bumped on every new result (what `put` keys result-driven parts on)

    def on_mount(self) -> None:
        self.ready = True
        self.refresh_view()

    def show_result(self, result: ProbeResult) -> None:
        self.result = result
        self.version += 1
        self.dirty = False
        self.refresh_view()

    def show_sample(self, sample: Sample) -> None:
        return None

    def show_progress(self, progress: Progress) -> None:
        return None

    def refresh_view(self) -> None:
        """Re-render from ``self.result`` and any live state."""
        return None

    def mark_dirty(self) -> None:
        """Live data changed: re-render at the next console tick (about 1 Hz).

        Samples from several probes arrive at different moments of a second;
        drawing them together is one frame a second instead of one per sample.
        """
        self.dirty = True

    def flush(self) -> None:
        """Re-render now if live data changed since the last render."""
        if self.dirty and self.ready:
            self.dirty = False
            self.refresh_view()

    def put(self, selector: str, key: object, build: Callable[[], Any], *,
            layout: bool = True) -> None:
        """Update the Static at ``selector`` only when ``key`` (what it shows) changed.

        Live panels re-render at 1 Hz; rebuilding and re-laying-out parts that did
        not change (the result, notes) is most of a console's idle CPU.
        """
        if selector in self._shown and self._shown[selector] == key:
            return
        self._shown[selector] = key
        self.query_one(selector, Static).update(build(), layout=layout)


class History:
    """Rolling per-series numbers for sparklines (bounded)."""

    def __init__(self, size: int = HISTORY) -> None:
        self.size = size
        self.series: dict[str, deque[float]] = {}

    def add(self, name: str, value: float | None) -> None:
        if value is None:
            return
        self.series.setdefault(name, deque(maxlen=self.size)).append(value)

    def get(self, name: str) -> list[float]:
        return list(self.series.get(name, ()))

    def last(self, name: str) -> float | None:
        data = self.series.get(name)
        return data[-1] if data else None


def kv_table(rows: Sequence[tuple[str, Any]], *, columns: int = 2) -> Table:
    """A borderless key/value grid, ``columns`` pairs per line."""
    grid = Table.grid(padding=(0, 2), expand=False)
    for _ in range(columns):
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
    cells: list[RenderableType] = []
    for key, value in rows:
        cells.append(key)
        cells.append(value if isinstance(value, Text) else Text(str(value)))
    while len(cells) % (2 * columns):
        cells.append("")
    for i in range(0, len(cells), 2 * columns):
        grid.add_row(*cells[i:i + 2 * columns])
    return grid


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def notes_text(result: ProbeResult | None) -> Text:
    """Notes and fix, one per line (empty Text when there are none)."""
    text = Text()
    if result is None:
        return text
    for note in result.notes:
        text.append("• ", style="dim").append(note + "\n")
    if result.fix:
        text.append("fix: ", style="bold").append(result.fix + "\n")
    text.rstrip()
    return text


class SummaryLine(Static):
    """The probe's one-line summary, coloured by status."""

    DEFAULT_CSS = "SummaryLine { height: auto; }"

    def set_result(self, result: ProbeResult | None) -> None:
        self.update(summary_text(result))


def summary_text(result: ProbeResult | None, waiting: str = "waiting for first result") -> Text:
    if result is None:
        return Text(waiting, style="dim")
    line = Text()
    line.append(f"{result.status} ", style=f"bold {STATUS_STYLE.get(result.status, '')}")
    line.append(result.summary or DASH)
    if result.error_kind:
        line.append(f"  [{result.error_kind}]", style="dim")
    return line


def values_rows(
    values: Mapping[str, Any], keys: Sequence[tuple[str, str]]
) -> list[tuple[str, Text]]:
    """(label, rendered value) for the listed (key, label) pairs; DASH when absent."""
    return [(label, Text(fvalue(key, values.get(key)))) for key, label in keys]
