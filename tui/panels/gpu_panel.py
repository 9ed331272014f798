"""GPU panel: util / memory / power sparklines at 1 Hz and a per-device table with health.

Findings keys (docs/gpu.md): box-level ``driver_version``, ``cuda_version``,
``gpu_count``; ``[[devices]]`` with ``index``, ``name``, ``memory_total_mib``,
``memory_used_mib``, ``util_gpu_pct``, ``temperature_c``, ``power_draw_w``,
``pcie_*``, ``mig_enabled`` and a health verdict. Live samples may carry one
device (flat keys with ``index``) or all of them (``gpus = [...]``, as the gpu
probe's ``watch`` yields, or ``devices = [...]``).
Missing keys show as a dash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from inferfit.api import Sample
from inferfit.tui.fmt import DASH, STATUS_STYLE, fnum, num, pick, table_rows
from inferfit.tui.panels.base import History, ProbePanel, SummaryLine, notes_text, summary_text
from inferfit.tui.panels.live import SparkRow

UTIL = ("util_gpu_pct", "utilization_gpu_pct", "gpu_util_pct", "util_pct", "utilization_pct")
MEM_USED = ("memory_used_mib", "mem_used_mib", "fb_used_mib")
MEM_TOTAL = ("memory_total_mib", "mem_total_mib", "fb_total_mib")
MEM_PCT = ("memory_used_pct", "mem_used_pct", "util_memory_pct")
POWER = ("power_draw_w", "power_w", "power_usage_w")
TEMP = ("temperature_c", "temp_c", "gpu_temp_c")
HEALTH = ("health", "verdict", "status")


def device_key(d: Mapping[str, Any], fallback: int) -> str:
    key = pick(d, "index", "uuid", "bus_id", "minor_number")
    return str(fallback if key is None else key)


class GpuPanel(ProbePanel):
    probe_name = "gpu"
    title = "GPU"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.history = History()
        self.latest: dict[str, dict[str, Any]] = {}  # live values per device

    def compose(self) -> ComposeResult:
        yield SummaryLine(classes="summary")
        yield Static(classes="box")
        yield SparkRow("util", id="gpu-util")
        yield SparkRow("memory", id="gpu-mem")
        yield SparkRow("power", id="gpu-power")
        yield Static(classes="devices")
        yield Static(classes="notes")

    # -- live ------------------------------------------------------------------
    def show_sample(self, sample: Sample) -> None:
        values = sample.values
        rows = table_rows(values.get("gpus", values.get("devices")))
        if rows:
            for i, row in enumerate(rows):
                self.latest.setdefault(device_key(row, i), {}).update(row)
            self._push()
        else:
            key = device_key(values, 0)
            self.latest.setdefault(key, {}).update(values)
            # One point per round: the lowest device closes a round of per-device samples.
            if key == min(self.latest, key=_sort_key):
                self._push()
        self.mark_dirty()

    def _push(self) -> None:
        util, mem_pct, power = aggregate(self._devices())
        self.history.add("util", util)
        self.history.add("mem", mem_pct)
        self.history.add("power", power)

    def _devices(self) -> list[dict[str, Any]]:
        base = {device_key(d, i): dict(d)
                for i, d in enumerate(table_rows(self.result.values.get("devices")
                                                 if self.result else None))}
        for key, live in self.latest.items():
            base.setdefault(key, {}).update(live)
        return [base[k] for k in sorted(base, key=_sort_key)]

    # -- render ------------------------------------------------------------------
    def refresh_view(self) -> None:
        if not self.ready:
            return
        self.put(".summary", self.version, lambda: summary_text(self.result))
        v = self.result.values if self.result else {}
        devices = self._devices()
        box = Text()
        box.append("driver ", style="dim").append(str(v.get("driver_version", DASH)))
        box.append("  CUDA ", style="dim").append(str(v.get("cuda_version", DASH)))
        count = v.get("gpu_count", len(devices) if devices else None)
        box.append("  GPUs ", style="dim").append(fnum(count, 0))
        self.put(".box", box.plain, lambda: box)
        util, mem_pct, power = aggregate(devices)
        used = sum(x for d in devices if (x := num(pick(d, *MEM_USED))) is not None)
        total = sum(x for d in devices if (x := num(pick(d, *MEM_TOTAL))) is not None)
        mem_text = fnum(mem_pct, 0, "%")
        if total:
            mem_text += f" {used / 1024:,.1f}/{total / 1024:,.0f} GiB"
        self.query_one("#gpu-util", SparkRow).set(
            self.history.get("util") or _one(util), fnum(util, 0, "% mean"))
        self.query_one("#gpu-mem", SparkRow).set(self.history.get("mem") or _one(mem_pct), mem_text)
        self.query_one("#gpu-power", SparkRow).set(
            self.history.get("power") or _one(power), fnum(power, 0, "W total"))
        # Every column is no_wrap: the table's height is its row count, so a new layout
        # is only needed when devices appear (re-laying-out each second costs CPU).
        self.put(".devices", repr(devices), lambda: device_table(devices),
                 layout=self._shown.get("#rows") != len(devices))
        self._shown["#rows"] = len(devices)
        self.put(".notes", self.version, lambda: notes_text(self.result))


def _sort_key(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 30, key)


def _one(value: float | None) -> list[float]:
    return [] if value is None else [value]


def aggregate(devices: list[dict[str, Any]]) -> tuple[float | None, float | None, float | None]:
    """(mean util %, memory used % over all devices, total power W); None when unknown."""
    utils = [x for d in devices if (x := num(pick(d, *UTIL))) is not None]
    util = sum(utils) / len(utils) if utils else None
    used = [num(pick(d, *MEM_USED)) for d in devices]
    total = [num(pick(d, *MEM_TOTAL)) for d in devices]
    pairs = [(u, t) for u, t in zip(used, total, strict=True) if u is not None and t]
    if pairs:
        mem_pct: float | None = 100 * sum(u for u, _ in pairs) / sum(t for _, t in pairs if t)
    else:
        pcts = [x for d in devices if (x := num(pick(d, *MEM_PCT))) is not None]
        mem_pct = sum(pcts) / len(pcts) if pcts else None
    powers = [x for d in devices if (x := num(pick(d, *POWER))) is not None]
    power = sum(powers) if powers else None
    return util, mem_pct, power


def _pcie(d: Mapping[str, Any]) -> Text:
    gen, gen_max = pick(d, "pcie_gen_current"), pick(d, "pcie_gen_max")
    width, width_max = pick(d, "pcie_width_current"), pick(d, "pcie_width_max")
    if gen is None and width is None:
        return Text(DASH)
    text = Text(f"G{gen if gen is not None else '?'} x{width if width is not None else '?'}")
    low = (num(gen) or 0) < (num(gen_max) or 0) or (num(width) or 0) < (num(width_max) or 0)
    if low:
        text.stylize("yellow")
        text.append(f"/G{gen_max}x{width_max}", style="dim")
    return text


def device_table(devices: list[dict[str, Any]]) -> Table | Text:
    if not devices:
        return Text("no devices in the findings", style="dim")
    t = Table(box=None, padding=(0, 1), show_edge=False, expand=False)
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("name", overflow="ellipsis", no_wrap=True, max_width=18)
    t.add_column("util", justify="right", no_wrap=True)
    t.add_column("mem MiB", justify="right", no_wrap=True)
    t.add_column("temp", justify="right", no_wrap=True)
    t.add_column("power", justify="right", no_wrap=True)
    t.add_column("pcie", no_wrap=True)
    t.add_column("health", no_wrap=True, min_width=6, overflow="ellipsis")
    for i, d in enumerate(devices):
        used, total = pick(d, *MEM_USED), pick(d, *MEM_TOTAL)
        mem = f"{fnum(used, 0)}/{fnum(total, 0)}" if total is not None else fnum(used, 0)
        health = pick(d, *HEALTH)
        health_text = Text(str(health) if health is not None else DASH,
                           style=STATUS_STYLE.get(str(health), ""))
        if d.get("mig_enabled") is True:
            health_text.append(" MIG", style="cyan")
        t.add_row(
            str(pick(d, "index") if pick(d, "index") is not None else i),
            str(d.get("name", DASH)), fnum(pick(d, *UTIL), 0, "%"), mem,
            fnum(pick(d, *TEMP), 0, "°C"), fnum(pick(d, *POWER), 0, "W"), _pcie(d), health_text,
        )
    return t
