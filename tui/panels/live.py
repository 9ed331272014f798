"""A labelled sparkline row shared by live panels: `label ▂▃▅▇ value`."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, Sparkline


class SparkRow(Horizontal):
    DEFAULT_CSS = """
    SparkRow { height: 1; }
    SparkRow > .spark-label { width: 8; color: $text-muted; }
    SparkRow > Sparkline { width: 1fr; min-width: 10; }
    SparkRow > Sparkline.-empty { display: none; }
    SparkRow > .spark-value { width: 26; padding-left: 1; }
    SparkRow.-static > .spark-value { width: 1fr; padding-left: 0; }
    """

    def __init__(self, label: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.label = label
        self._last: tuple[tuple[float, ...], str, int] | None = None

    def compose(self) -> ComposeResult:
        yield Label(self.label, classes="spark-label")
        yield Sparkline([], summary_function=max)
        yield Label("—", classes="spark-value")

    def set(self, data: Sequence[float], value: str) -> None:
        spark = self.query_one(Sparkline)
        # Only as many points as there are cells: a rolling window, newest right.
        width = max(1, spark.size.width or 60)
        window = tuple(data[-width:])
        if self._last == (window, value, width):
            return
        self._last = (window, value, width)
        spark.data = list(window)
        # A single point is no trend: show the figure alone (replay, first reading).
        empty = len(data) < 2
        spark.set_class(empty, "-empty")
        self.set_class(empty, "-static")
        self.query_one(".spark-value", Label).update(value, layout=False)
