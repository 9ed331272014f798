"""Side-by-side comparison of findings: which box is the odd one out?

Pure functions over ``Findings``; the CLI (`inferfit compare`) and the
console's compare screen render the same ``Comparison``.

Every findings document is flattened to dotted keys
(``probes.disk.seq_read_mib_s``, ``probes.gpu.devices[0].name``,
``probes.system.filesystems[/].free_gib``). For each key the row gets a
reference value — the golden box's when there is one, else the value most
boxes share — and each cell says whether it is the *same* as the reference:
numbers within the key's tolerance (percent of the reference value), any
other value exactly equal, and both missing counts as the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfit.findings import Findings

# Keys that change run to run or host to host by nature (globs, * and ?).
DEFAULT_IGNORE: tuple[str, ...] = (
    "created", "tool", "schema_version", "target.name", "target.address",
    "target.hostname", "target.ssh_connect_ms", "*.duration_s", "*.summary", "*.notes",
    "*.fix", "probes.system.hostname", "probes.system.uptime_s", "probes.system.load_*",
    "probes.system.memory_available_gib", "probes.system.swap_used_mib",
    "probes.system.tool_paths.*", "*.uuid", "*.serial", "*.pci_bus_id", "*.bus_id",
)
# (key glob, tolerance %) — first match wins; other numbers use the default tolerance.
DEFAULT_RULES: tuple[tuple[str, float], ...] = (
    ("probes.disk.*", 10.0),
    ("probes.latency.*", 20.0),
    ("probes.nginx.*", 20.0),
    ("*free_gib", 10.0),
    ("*used_pct", 10.0),
    ("*memory_gib", 2.0),
    ("*memory_used_mib", 50.0),
    ("*util_pct", 100.0),
    ("*temp_c", 15.0),
    ("*power_w", 30.0),
)
# List items are labelled by the first of these keys whose values are unique in the list.
LABEL_KEYS = ("name", "mount", "index", "id", "device")


def glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern), re.DOTALL)


@dataclass(frozen=True)
class Thresholds:
    """What counts as the same: per-key tolerance rules and keys to leave out."""

    default_pct: float = 0.0
    rules: tuple[tuple[str, float], ...] = DEFAULT_RULES
    ignore: tuple[str, ...] = DEFAULT_IGNORE
    _compiled: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False,
                                                  repr=False)

    def _re(self, pattern: str) -> re.Pattern[str]:
        rx = self._compiled.get(pattern)
        if rx is None:
            rx = self._compiled[pattern] = glob_regex(pattern)
        return rx

    def ignored(self, key: str) -> bool:
        return any(self._re(p).fullmatch(key) for p in self.ignore)

    def tolerance_pct(self, key: str) -> float:
        for pattern, pct in self.rules:
            if self._re(pattern).fullmatch(key):
                return pct
        return self.default_pct

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None,
                    default_pct: float | None = None) -> Thresholds:
        """From the ``[compare]`` config table (see configs/defaults.toml)."""
        table = table or {}
        rules = tuple(
            (str(r["keys"]), float(r["tolerance_pct"]))
            for r in table.get("rules", [dict(keys=k, tolerance_pct=v) for k, v in DEFAULT_RULES])
            if isinstance(r, Mapping) and "keys" in r and "tolerance_pct" in r
        )
        ignore = tuple(str(p) for p in table.get("ignore", DEFAULT_IGNORE))
        pct = default_pct if default_pct is not None else float(table.get("tolerance_pct", 0.0))
        return cls(default_pct=pct, rules=rules, ignore=ignore)


def _label(items: list[Mapping[str, Any]]) -> list[str]:
    for key in LABEL_KEYS:
        values = [item.get(key) for item in items]
        if all(v is not None and not isinstance(v, Mapping | list) for v in values) \
                and len({str(v) for v in values}) == len(values):
            return [str(v) for v in values]
    return [str(i) for i in range(len(items))]


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys to leaf values; lists of tables become ``key[label].field``."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{dotted}."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for label, item in zip(_label(value), value, strict=True):
                out.update(flatten(item, f"{dotted}[{label}]."))
        else:
            out[dotted] = value
    return out


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def same(value: Any, reference: Any, tolerance_pct: float) -> bool:
    """Equal, or for numbers within ``tolerance_pct`` % of the reference's magnitude."""
    if value is None or reference is None:
        return value is None and reference is None
    x, y = _number(value), _number(reference)
    if x is not None and y is not None:
        return x == y or abs(x - y) <= tolerance_pct / 100.0 * abs(y)
    if (x is None) != (y is None):
        return False
    return bool(value == reference)


def format_value(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.6g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, list):
        return ", ".join(format_value(x) for x in v)
    return str(v)


@dataclass(frozen=True)
class Cell:
    value: Any  # None when the box has no such key
    text: str
    same: bool  # the same as the row's reference (within tolerance)


@dataclass(frozen=True)
class Row:
    key: str
    cells: tuple[Cell, ...]
    reference: Any
    tolerance_pct: float

    @property
    def differs(self) -> bool:
        return not all(c.same for c in self.cells)


@dataclass
class Comparison:
    """The whole table: column labels, rows, and which column (if any) is golden."""

    labels: list[str]
    rows: list[Row]
    golden: int | None = None  # index into labels

    @property
    def differing(self) -> list[Row]:
        return [r for r in self.rows if r.differs]

    def odd_keys(self) -> dict[str, list[str]]:
        """For each box, the keys where it differs from the reference."""
        out: dict[str, list[str]] = {label: [] for label in self.labels}
        for row in self.rows:
            for label, cell in zip(self.labels, row.cells, strict=True):
                if not cell.same:
                    out[label].append(row.key)
        return out

    def odd_ones(self) -> list[str]:
        """Boxes that differ from the reference in at least one key, most different first."""
        keys = self.odd_keys()
        golden = self.labels[self.golden] if self.golden is not None else None
        odd = [(len(v), k) for k, v in keys.items() if v and k != golden]
        return [k for _n, k in sorted(odd, key=lambda t: (-t[0], t[1]))]

    def as_dict(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "golden": self.labels[self.golden] if self.golden is not None else None,
            "rows": [
                {"key": r.key, "tolerance_pct": r.tolerance_pct, "differs": r.differs,
                 "reference": r.reference,
                 "cells": [{"value": c.value, "same": c.same} for c in r.cells]}
                for r in self.rows
            ],
            "odd_ones": {k: v for k, v in self.odd_keys().items() if v},
        }


def _reference(values: Sequence[Any], tol: float) -> Any:
    """The value most boxes share (within tolerance); ties go to the earliest column."""
    best: Any = None
    best_count = -1
    for v in values:
        count = sum(1 for w in values if same(w, v, tol))
        if count > best_count:
            best, best_count = v, count
    return best


def compare(
    findings: Sequence[Findings],
    labels: Sequence[str] | None = None,
    *,
    golden: int | None = None,
    thresholds: Thresholds | None = None,
) -> Comparison:
    """Compare boxes key by key. ``golden`` is the index of the reference box, if any."""
    if labels is None:
        labels = [f.target.name for f in findings]
    if len(labels) != len(findings):
        raise ValueError("one label per findings document")
    if golden is not None and not 0 <= golden < len(findings):
        raise ValueError("golden index out of range")
    th = thresholds or Thresholds()
    flats = [flatten(f.to_dict()) for f in findings]
    keys: dict[str, None] = {}
    for flat in flats:
        for k in flat:
            if not th.ignored(k):
                keys.setdefault(k, None)
    rows: list[Row] = []
    for key in _ordered(keys):
        tol = th.tolerance_pct(key)
        values = [flat.get(key) for flat in flats]
        ref = values[golden] if golden is not None else _reference(values, tol)
        cells = tuple(Cell(v, format_value(v), same(v, ref, tol)) for v in values)
        rows.append(Row(key, cells, ref, tol))
    return Comparison(list(labels), rows, golden)


def _ordered(keys: Iterable[str]) -> list[str]:
    """target.* first, then probes in name order keeping each probe's own key order."""
    ks = list(keys)

    def group(k: str) -> tuple[int, str]:
        if k.startswith("target."):
            return (0, "")
        if k.startswith("probes."):
            return (1, k.split(".", 2)[1])
        return (2, k.split(".", 1)[0])

    pos = {k: i for i, k in enumerate(ks)}
    return sorted(ks, key=lambda k: (group(k), pos[k]))


def label_for(findings: Findings, taken: set[str]) -> str:
    """A unique column label: the target name, suffixed when two boxes share it."""
    base = findings.target.name or "box"
    label, n = base, 1
    while label in taken:
        n += 1
        label = f"{base} ({n})"
    taken.add(label)
    return label
