"""Disk panel: a progress bar and live MiB/s while fio runs, then the results.

Findings keys (docs/disk.md): ``seq_read_mib_s``, ``rand_read_iops``,
``rand_read_clat_p99_us``, ``direct_io``, ``target_path``, ``filesystem``,
``model_bytes``, ``model_load_s``. Progress events carry ``fraction`` and
a bandwidth value in ``values`` (any key ending in ``_mib_s``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Label, ProgressBar, Static

from inferfit.api import Progress
from inferfit.tui.fmt import DASH, fnum, fvalue, num, pick
from inferfit.tui.panels.base import (
    History,
    ProbePanel,
    SummaryLine,
    kv_table,
    notes_text,
    summary_text,
)
from inferfit.tui.panels.live import SparkRow

BW_KEYS = ("bw_mib_s", "read_mib_s", "mib_s", "seq_read_mib_s", "bandwidth_mib_s")
IOPS_KEYS = ("iops", "read_iops", "rand_read_iops")


def live_bandwidth(values: Mapping[str, Any]) -> float | None:
    found = num(pick(values, *BW_KEYS))
    if found is not None:
        return found
    for key, value in values.items():
        if key.endswith("_mib_s") and num(value) is not None:
            return num(value)
    kib = num(pick(values, "bw_kib_s", "read_kib_s"))
    return None if kib is None else kib / 1024


class DiskPanel(ProbePanel):
    probe_name = "disk"
    title = "Disk (fio)"

    DEFAULT_CSS = """
    DiskPanel .run { height: 1; }
    DiskPanel .run.-idle { display: none; }
    DiskPanel ProgressBar { width: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.history = History()
        self.progress: Progress | None = None

    def compose(self) -> ComposeResult:
        yield SummaryLine(classes="summary")
        yield Label("", classes="run -idle")
        yield ProgressBar(total=100, show_eta=False, classes="run -idle")
        yield SparkRow("MiB/s", id="disk-bw")
        yield Static(classes="body")
        yield Static(classes="notes")

    def show_progress(self, progress: Progress) -> None:
        self.progress = progress
        bw = live_bandwidth(progress.values)
        self.history.add("bw", bw)
        running = progress.fraction is None or progress.fraction < 1.0
        for widget in self.query(".run"):
            widget.set_class(not running, "-idle")
        bar = self.query_one(ProgressBar)
        if progress.fraction is not None:
            bar.update(total=100, progress=100 * max(0.0, min(1.0, progress.fraction)))
        elif bar.progress == 0:
            bar.update(total=None)  # indeterminate until fio reports how far it is
        self.query_one(".run", Label).update(Text(progress.message[:70], style="cyan"))
        self.refresh_view()

    def refresh_view(self) -> None:
        if not self.ready:
            return
        self.put(".summary", self.version, lambda: summary_text(self.result))
        v = self.result.values if self.result else {}
        live = self.history.last("bw")
        seq = num(v.get("seq_read_mib_s"))
        shown: float | None
        if live is not None and self._fio_running():
            shown, label = live, "now"
        else:
            shown, label = (seq, "seq read") if seq is not None else (live, "last")
        self.query_one("#disk-bw", SparkRow).set(
            self.history.get("bw") or ([seq] if seq is not None else []),
            f"{fnum(shown, 0, 'MiB/s')} {label}" if shown is not None else DASH)
        self.put(".body", self.version, lambda: render_disk(v))
        self.put(".notes", self.version, lambda: notes_text(self.result))

    def _fio_running(self) -> bool:
        p = self.progress
        return p is not None and (p.fraction is None or p.fraction < 1.0)


def _seq(mib_s: Any) -> str:
    f = num(mib_s)
    return DASH if f is None else f"{f:,.0f} MiB/s ({f * 1.048576 / 1000:,.2f} GB/s)"


def render_disk(v: Mapping[str, Any]) -> Any:
    if not v:
        return Text("")
    model_bytes = num(v.get("model_bytes"))
    rows = [
        ("seq read", _seq(v.get("seq_read_mib_s"))),
        ("rand 4k", fnum(pick(v, *IOPS_KEYS), 0, "IOPS")),
        ("p99 clat", fnum(v.get("rand_read_clat_p99_us"), 0, "µs")),
        ("O_DIRECT", fvalue("direct_io", v.get("direct_io"))),
        ("path", str(v.get("target_path", DASH))),
        ("filesystem", fvalue("filesystem", v.get("filesystem"))),
        ("model", DASH if model_bytes is None else f"{model_bytes / 1024**3:,.1f} GiB"),
        ("cold load", fnum(v.get("model_load_s"), 1, "s")),
    ]
    return kv_table(rows, columns=2)
