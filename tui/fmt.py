"""Pure formatting helpers for panels (no textual import; unit-tested directly).

Panels read findings written by probes other people build, so every lookup
is defensive: a missing or oddly typed value renders as an em dash.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DASH = "—"
SPARK_CHARS = "▁▂▃▄▅▆▇█"
STATUS_STYLE = {
    "ok": "green", "warn": "yellow", "fail": "red", "error": "magenta", "skipped": "dim",
    "running": "cyan", "pending": "dim", "failed": "magenta",
}
STATUS_ICON = {
    "ok": "✔", "warn": "▲", "fail": "✖", "error": "!", "skipped": "·", "running": "…",
    "pending": "·", "failed": "!",
}
# Key suffix -> unit shown after the number.
_UNITS: tuple[tuple[str, str], ...] = (
    ("_mib_s", "MiB/s"), ("_gb_s", "GB/s"), ("_mbit_s", "Mbit/s"), ("_mbit_peak", "Mbit/s"),
    ("_mbit_needed", "Mbit/s"), ("_bytes_per_token", "B"),
    ("_mbit", "Mbit"), ("_mib", "MiB"), ("_gib", "GiB"), ("_bytes", "B"), ("_pct", "%"),
    ("_ms", "ms"), ("_us", "µs"), ("_ns", "ns"), ("_s", "s"), ("_w", "W"), ("_c", "°C"),
    ("_mhz", "MHz"), ("_iops", "IOPS"),
)
_UNIT_IN_MIDDLE = re.compile(r"_(ms|us|ns|mib|gib|pct|w)_(?:p\d+(?:\.\d+)?|min|max|mean|avg)$")


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and (
        not isinstance(value, float) or math.isfinite(value)
    )


def num(value: Any) -> float | None:
    """A finite float, or None for anything else (bools, text, NaN)."""
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def pick(table: Mapping[str, Any] | None, *names: str) -> Any:
    """The first present key among ``names`` (probes name things differently)."""
    if not isinstance(table, Mapping):
        return None
    for name in names:
        if name in table and table[name] is not None:
            return table[name]
    return None


def fnum(value: Any, digits: int = 1, unit: str = "") -> str:
    """A number for reading: thousands separators, trailing unit, DASH when unknown."""
    f = num(value)
    if f is None:
        return DASH
    whole = isinstance(value, int) and not isinstance(value, bool)
    if whole or (f.is_integer() and abs(f) >= 100):
        text = f"{int(f):,}"
    elif abs(f) >= 100:
        text = f"{f:,.0f}"
    else:
        text = f"{f:,.{digits}f}"
    return f"{text} {unit}".rstrip() if unit else text


def unit_for(key: str) -> str:
    m = _UNIT_IN_MIDDLE.search(key)
    if m:
        return dict(_UNITS).get(f"_{m.group(1)}", "")
    for suffix, unit in _UNITS:
        if key.endswith(suffix):
            return unit
    return ""


def fvalue(key: str, value: Any) -> str:
    """Render any findings value: numbers with the unit from the key name."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if is_number(value):
        return fnum(value, 2 if abs(float(value)) < 10 else 1, unit_for(key))
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        if not value:
            return DASH
        return ", ".join(f"{k}={fvalue(str(k), v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        if not value:
            return DASH
        if all(isinstance(v, Mapping) for v in value):
            return f"{len(value)} entries"
        return ", ".join(fvalue(key, v) for v in value)
    text = str(value)
    return text if text else DASH


def flatten(values: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, leaf) pairs; arrays of tables stay whole (rendered as a count)."""
    out: list[tuple[str, Any]] = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and len(value) > 6:
            out.extend(flatten(value, f"{name}."))
        else:
            out.append((name, value))
    return out


def ago(seconds: float | None) -> str:
    """'updated 3s ago'-style age: 3s, 2m 5s, 1h 4m."""
    if seconds is None or not math.isfinite(seconds):
        return DASH
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


def age(seconds: float | None) -> str:
    """A coarse 'updated ... ago' for panel frames: it changes every 5 s, not every second.

    A per-second counter on every panel would repaint every frame once a second
    for no reader's benefit; live panels (1 Hz) stay at "just now".
    """
    if seconds is None or not math.isfinite(seconds):
        return DASH
    s = max(0, int(seconds))
    if s < 5:
        return "just now"
    if s < 60:
        return f"{s - s % 5}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    return f"{s // 3600}h {s % 3600 // 60}m ago"


def duration(seconds: Any) -> str:
    """A box uptime: 3d 4h, 5h 2m, 7m."""
    f = num(seconds)
    if f is None:
        return DASH
    s = int(f)
    days, rem = divmod(s, 86400)
    hours, rem = divmod(rem, 3600)
    minutes = rem // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m"


def spark(values: Iterable[Any], width: int = 20) -> str:
    """A unicode sparkline of the last ``width`` numeric values ('' when none)."""
    data = [f for f in (num(v) for v in values) if f is not None][-width:]
    if not data:
        return ""
    lo, hi = min(data), max(data)
    span = hi - lo
    if span <= 0:
        return SPARK_CHARS[0 if hi == 0 else 3] * len(data)
    top = len(SPARK_CHARS) - 1
    return "".join(SPARK_CHARS[round((v - lo) / span * top)] for v in data)


def export_name(host: str, when: dt.datetime | dt.date | None = None) -> str:
    """The export prompt's default: findings-<host>-<YYYY-MM-DD>.toml, safe as a file name."""
    day = (when or dt.datetime.now()).strftime("%Y-%m-%d")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", host).strip("._") or "host"
    return f"findings-{safe}-{day}.toml"


def table_rows(value: Any) -> list[Mapping[str, Any]]:
    """An array of tables (e.g. devices, regions) or []."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [v for v in value if isinstance(v, Mapping)]
    return []
