"""nginx panel: QPS, p95/p99 request time and 5xx over the last minutes, plus the log's totals.

Findings keys (docs/nginx.md): ``qps_mean``, ``qps_peak``, ``status_counts``,
``request_time_ms_p50/p95/p99/max``, ``upstream_time_ms_p95/p99``,
``nginx_time_ms_p95``, ``lines``, ``bad_lines``, ``window_s``,
``bandwidth_mbit_peak``, ``concurrency_littles_law``. Live samples (1 Hz):
``qps``, a 5xx count, and rolling ``request_time_ms_p95/p99``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from inferfit.api import Sample
from inferfit.tui.fmt import DASH, fnum, num, pick
from inferfit.tui.panels.base import (
    History,
    ProbePanel,
    SummaryLine,
    kv_table,
    notes_text,
    summary_text,
)
from inferfit.tui.panels.live import SparkRow

QPS = ("qps", "requests_per_s", "qps_1s", "rps")
P95 = ("request_time_ms_p95", "p95_ms", "request_ms_p95")
P99 = ("request_time_ms_p99", "p99_ms", "request_ms_p99")
FIVEXX = ("status_5xx", "5xx", "errors_5xx", "count_5xx", "http_5xx")


def status_counts(values: Mapping[str, Any]) -> dict[str, Any]:
    """One flat table of counts: by class ("5xx") and by code ("502"), whatever the nesting."""
    counts = pick(values, "status_counts", "status")
    if not isinstance(counts, Mapping):
        return {}
    flat: dict[str, Any] = {}
    for key, value in counts.items():
        if isinstance(value, Mapping):
            flat.update({str(k): v for k, v in value.items()})
        else:
            flat[str(key)] = value
    return flat


def count_5xx(values: Mapping[str, Any]) -> float | None:
    direct = num(pick(values, *FIVEXX))
    if direct is not None:
        return direct
    counts = status_counts(values)
    if counts:
        if num(counts.get("5xx")) is not None:
            return num(counts.get("5xx"))
        codes = [num(v) for k, v in counts.items() if str(k).isdigit() and str(k).startswith("5")]
        known = [c for c in codes if c is not None]
        return sum(known) if known else None
    return None


class NginxPanel(ProbePanel):
    probe_name = "nginx"
    title = "nginx"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.history = History()

    def compose(self) -> ComposeResult:
        yield SummaryLine(classes="summary")
        yield SparkRow("QPS", id="nginx-qps")
        yield SparkRow("p95 ms", id="nginx-p95")
        yield SparkRow("p99 ms", id="nginx-p99")
        yield SparkRow("5xx/s", id="nginx-5xx")
        yield Static(classes="body")
        yield Static(classes="notes")

    def show_sample(self, sample: Sample) -> None:
        v = sample.values
        self.history.add("qps", num(pick(v, *QPS)))
        self.history.add("p95", num(pick(v, *P95)))
        self.history.add("p99", num(pick(v, *P99)))
        self.history.add("5xx", count_5xx(v))
        self.mark_dirty()

    def refresh_view(self) -> None:
        if not self.ready:
            return
        self.put(".summary", self.version, lambda: summary_text(self.result))
        v = self.result.values if self.result else {}
        h = self.history
        live = bool(h.series)

        def row(name: str, fallback: Any, unit: str, digits: int = 1) -> tuple[list[float], str]:
            last = h.last(name)
            if last is not None:
                return h.get(name), fnum(last, digits, unit) + " now"
            f = num(fallback)
            return ([f] if f is not None else []), (fnum(f, digits, unit) if f is not None
                                                    else DASH)

        qps_fallback = v.get("qps_mean")
        self.query_one("#nginx-qps", SparkRow).set(*row("qps", qps_fallback, "/s"))
        self.query_one("#nginx-p95", SparkRow).set(*row("p95", v.get("request_time_ms_p95"), "ms"))
        self.query_one("#nginx-p99", SparkRow).set(*row("p99", v.get("request_time_ms_p99"), "ms"))
        window = num(v.get("window_s"))
        total_5xx = count_5xx(v)
        rate = total_5xx / window if total_5xx is not None and window else None
        if h.last("5xx") is not None:
            self.query_one("#nginx-5xx", SparkRow).set(*row("5xx", None, "", 0))
        else:
            self.query_one("#nginx-5xx", SparkRow).set(*row("5xx", rate, "/s", 2))
        self.put(".body", (self.version, live), lambda: render_nginx(v, live))
        self.put(".notes", self.version, lambda: notes_text(self.result))


def render_nginx(v: Mapping[str, Any], live: bool) -> Any:
    if not v:
        return Text("waiting for live readings…" if live else "", style="dim")
    counts = status_counts(v)
    status_text = Text()
    if counts:
        for key in ("2xx", "3xx", "4xx", "499", "5xx", "500", "502", "503", "504"):
            if key in counts:
                style = "red" if key.startswith("5") else ("yellow" if key in ("4xx", "499")
                                                            else "")
                status_text.append(f"{key} ", style="dim")
                status_text.append(f"{fnum(counts[key], 0)}  ", style=style)
    window = num(v.get("window_s"))
    rows = [
        ("lines", f"{fnum(v.get('lines'), 0)} ({fnum(v.get('bad_lines'), 0)} bad)"),
        ("window", DASH if window is None else (
            f"{window:,.0f} s" if window < 120 else f"{window / 60:,.0f} min")),
        ("QPS", f"{fnum(v.get('qps_mean'), 1)} mean · {fnum(v.get('qps_peak'), 0)} peak"),
        ("request", "p50 {} · p95 {} · p99 {} ms".format(
            *(fnum(v.get(f"request_time_ms_{p}"), 0) for p in ("p50", "p95", "p99")))),
        ("upstream", "p95 {} · p99 {} ms".format(
            *(fnum(v.get(f"upstream_time_ms_{p}"), 0) for p in ("p95", "p99")))),
        ("nginx-side", fnum(v.get("nginx_time_ms_p95"), 0, "ms p95")),
        ("in flight", fnum(v.get("concurrency_littles_law"), 1)),
        ("peak bw", fnum(v.get("bandwidth_mbit_peak"), 1, "Mbit/s")),
        ("status", status_text or Text(DASH)),
    ]
    return kv_table(rows, columns=1)
