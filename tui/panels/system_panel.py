"""System panel: OS, CPU, memory, swap, load, uptime, filesystems, tools."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from inferfit.findings import ProbeResult
from inferfit.tui.fmt import DASH, duration, fnum, num, table_rows
from inferfit.tui.panels.base import ProbePanel, SummaryLine, kv_table, notes_text, summary_text


class SystemPanel(ProbePanel):
    probe_name = "system"
    title = "System"

    def compose(self) -> ComposeResult:
        yield SummaryLine(classes="summary")
        yield Static(classes="body")
        yield Static(classes="notes")

    def refresh_view(self) -> None:
        if not self.ready:
            return
        self.put(".summary", self.version, lambda: summary_text(self.result))
        self.put(".body", self.version, lambda: render_system(self.result))
        self.put(".notes", self.version, lambda: notes_text(self.result))


def render_system(result: ProbeResult | None) -> Group | Text:
    if result is None:
        return Text("")
    v: dict[str, Any] = result.values
    mem, avail = num(v.get("memory_gib")), num(v.get("memory_available_gib"))
    mem_text = DASH if mem is None else f"{mem:,.1f} GiB"
    if mem is not None and avail is not None:
        mem_text += f" ({avail:,.1f} free)"
    swap = num(v.get("swap_gib"))
    swap_text = DASH if swap is None else f"{swap:g} GiB"
    if v.get("swap_used_mib") is not None:
        swap_text += f", {fnum(v.get('swap_used_mib'), 0)} MiB used"
    load = [fnum(v.get(k), 2) for k in ("load_1m", "load_5m", "load_15m")]
    rows = [
        ("host", str(v.get("hostname", DASH))),
        ("os", str(v.get("os", DASH))),
        ("kernel", f"{v.get('kernel', DASH)} {v.get('arch', '')}".strip()),
        ("cpu", f"{v.get('cpu_model', DASH)} · {fnum(v.get('cpu_cores'), 0)} cores"),
        ("memory", mem_text),
        ("swap", swap_text),
        ("load", " / ".join(load)),
        ("uptime", duration(v.get("uptime_s"))),
    ]
    parts: list[Any] = [kv_table(rows, columns=1)]
    filesystems = table_rows(v.get("filesystems"))
    if filesystems:
        t = Table(box=None, padding=(0, 1), show_edge=False)
        t.add_column("mount", no_wrap=True)
        t.add_column("free", justify="right")
        t.add_column("size", justify="right")
        t.add_column("used", justify="right")
        t.add_column("device", overflow="ellipsis", no_wrap=True, max_width=28)
        for fs in filesystems:
            used = num(fs.get("used_pct"))
            style = "red" if used is not None and used >= 90 else ""
            t.add_row(str(fs.get("mount", DASH)), fnum(fs.get("free_gib"), 1, "GiB"),
                      fnum(fs.get("size_gib"), 1, "GiB"),
                      Text(fnum(used, 0, "%"), style=style), str(fs.get("device", DASH)))
        parts.append(t)
    tools = v.get("tools")
    if isinstance(tools, dict) and tools:
        line = Text("tools ", style="dim")
        for name, present in tools.items():
            line.append(f"{'✔' if present else '✖'} {name}  ",
                        style="green" if present else "dim red")
        parts.append(line)
    return Group(*parts)
