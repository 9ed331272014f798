"""The recommendation panel: mode, actions, reasons and confidence from findings [sizing]."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from inferfit.findings import ProbeResult
from inferfit.tui.fmt import DASH, fvalue, num, table_rows
from inferfit.tui.panels.base import ProbePanel, kv_table

MODE_STYLE = {"realtime": "green", "batch": "cyan", "mixed": "yellow", "split": "magenta"}
FIGURES = (
    ("replicas", "replicas"), ("required_concurrency", "needed concurrency"),
    ("max_concurrency", "max concurrency"), ("model_load_s", "model load"),
    ("weights_bytes", "weights"), ("kv_bytes_per_token", "KV / token"),
    ("bandwidth_mbit_needed", "bandwidth needed"), ("batch_hours_needed", "batch hours"),
    ("batch_unit_cost", "batch unit cost"),
)


def sizing_result(table: Mapping[str, Any]) -> ProbeResult:
    """Wrap a [sizing] table as a ProbeResult so the panel frame treats it like a probe."""
    mode = str(table.get("mode", "") or DASH)
    conf = num(table.get("confidence"))
    summary = f"{mode}" + (f", confidence {conf:.0%}" if conf is not None else "")
    return ProbeResult("sizing", "ok", summary, values=dict(table))


class RecommendationPanel(ProbePanel):
    probe_name = "sizing"
    title = "Recommendation"
    hint = "no recommendation yet"

    def compose(self) -> ComposeResult:
        yield Static(classes="body")

    def refresh_view(self) -> None:
        if self.ready:
            self.put(".body", (self.version, self.hint),
                     lambda: render_sizing(self.result, self.hint))


def _fmt_figure(key: str, value: Any) -> str:
    if key.endswith("_bytes") or key.startswith("weights_bytes"):
        f = num(value)
        if f is not None and f >= 1024**3:
            return f"{f / 1024**3:,.2f} GiB"
    if key == "batch_unit_cost":
        f = num(value)
        return DASH if f is None else f"{f:,.4f}"
    return fvalue(key, value)


def render_sizing(result: ProbeResult | None, hint: str = "") -> Group | Text:
    if result is None:
        return Text(hint or "no recommendation yet", style="dim")
    v = result.values
    head = Text()
    mode = str(v.get("mode") or DASH)
    head.append("mode ", style="dim").append(mode.upper(), style=f"bold {MODE_STYLE.get(mode, '')}")
    conf = num(v.get("confidence"))
    head.append("   confidence ", style="dim")
    head.append(DASH if conf is None else f"{conf:.0%}")
    fits = v.get("fits")
    if isinstance(fits, bool):
        head.append("   model fits ", style="dim")
        head.append("yes" if fits else "no", style="green" if fits else "bold red")
    actions = v.get("actions")
    acts = Text()
    acts.append("actions ", style="dim")
    if isinstance(actions, list) and actions:
        for i, act in enumerate(actions):
            if i:
                acts.append(" · ", style="dim")
            acts.append(str(act), style="bold")
    else:
        acts.append(DASH)
    figures = [(label, _fmt_figure(key, v.get(key))) for key, label in FIGURES if key in v]
    parts: list[Any] = [head, acts]
    if figures:
        parts.append(kv_table(figures, columns=2))
    reasons = table_rows(v.get("reasons"))
    if reasons:
        t = Table(box=None, padding=(0, 1), show_edge=False, expand=True)
        t.add_column("rule", style="cyan", no_wrap=True, ratio=1)
        t.add_column("says", overflow="fold", ratio=3)
        for reason in reasons:
            says = reason.get("says") or reason.get("formula") or DASH
            t.add_row(str(reason.get("rule", DASH)), str(says))
        parts.append(t)
    missing = v.get("missing_inputs", v.get("missing"))
    if isinstance(missing, list) and missing:
        parts.append(Text("could not judge: " + ", ".join(map(str, missing)), style="dim"))
    return Group(*parts)
