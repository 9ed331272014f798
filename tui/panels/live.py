"""A labelled sparkline row shared by live panels: `label ▂▃▅▇ value`.

One Static per row (not a label, a Sparkline widget and a value widget): a live
panel redraws every second, and every widget redrawn costs CPU at each level
of the layout above it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color
from rich.table import Table
from rich.text import Text
from textual.events import Resize
from textual.renderables.sparkline import Sparkline
from textual.widgets import Static

from inferfit.tui.fmt import DASH

LOW, HIGH = Color.from_rgb(0, 110, 160), Color.from_rgb(0, 190, 255)


class SparkRow(Static):
    DEFAULT_CSS = "SparkRow { height: 1; }"
    LABEL_W, VALUE_W = 8, 26

    def __init__(self, label: str, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.label = label
        self.series: list[float] = []  # everything given (the panel's history)
        self.data: list[float] = []  # the window shown, newest right
        self.value = DASH
        self._last: tuple[tuple[float, ...], str, int] | None = None

    def set(self, data: Sequence[float], value: str) -> None:
        """Show the last points that fit and the current figure (redraws only on change)."""
        width = max(10, (self.size.width or 80) - self.LABEL_W - self.VALUE_W - 2)
        window = tuple(data[-width:])
        if self._last == (window, value, width):
            return
        self._last = (window, value, width)
        self.series, self.data, self.value = list(data), list(window), value
        self.update(self._row(width), layout=False)

    def on_resize(self, event: Resize) -> None:
        if self._last is not None:
            self._last = None
            self.set(self.series, self.value)

    def _row(self, width: int) -> Table:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=self.LABEL_W, no_wrap=True)
        label = Text(self.label, style="dim")
        value = Text(self.value)
        if len(self.data) < 2:  # a single point is no trend: the figure alone
            grid.add_column(no_wrap=True, overflow="ellipsis")
            grid.add_row(label, value)
            return grid
        grid.add_column(width=width, no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis")
        grid.add_row(label, Sparkline(self.data, width=width, min_color=LOW, max_color=HIGH,
                                      summary_function=max), value)
        return grid
