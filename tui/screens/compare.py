"""The compare screen: every finding of every open box side by side; the odd box out on top.

The comparison itself is ``inferfit.compare.compare`` (the same rows, references and
"same within tolerance" rules as ``inferfit compare``, from the config's ``[compare]``
table); this module only lays it out: a summary of the odd box(es) out, a table with one
column per box (golden first) whose differing cells are red, and a detail line for the
row under the cursor (full key, tolerance, reference, the values that differ).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from inferfit.compare import Comparison, Row, Thresholds, compare, format_value
from inferfit.findings import Findings

KEY_WIDTH = 30  # the key column at most (full key in the detail line)
CELL_WIDTH = 22  # a box's column at most; narrower so that a few boxes fit the screen
CELL_MIN = 12  # a box's column at least (more boxes than fit: scroll right)
GOLDEN = " (golden)"
ODD_LINES = 3  # odd boxes listed by name in the summary; the rest are counted
DIFF_STYLE = "bold red"
GOLDEN_STYLE = "bold cyan"


@dataclass(frozen=True)
class CompareSource:
    """What to compare: findings, one unique label each, and the golden box's index."""

    findings: Sequence[Findings]
    labels: Sequence[str]
    golden: int | None = None


def unique_labels(names: Iterable[str]) -> list[str]:
    """Column labels: each name, suffixed `(2)`, `(3)` … where two boxes share one."""
    taken: set[str] = set()
    out: list[str] = []
    for name in names:
        base = name or "box"
        label, n = base, 1
        while label in taken:
            n += 1
            label = f"{base} ({n})"
        taken.add(label)
        out.append(label)
    return out


def golden_first(source: CompareSource) -> CompareSource:
    """The same source with the golden box (if any) moved to the first column."""
    g = source.golden
    if g is None or g == 0:
        return source
    order = [g, *(i for i in range(len(source.findings)) if i != g)]
    return CompareSource([source.findings[i] for i in order],
                         [source.labels[i] for i in order], 0)


def short_key(key: str, width: int = KEY_WIDTH) -> str:
    """``probes.`` dropped; a long key keeps its head and tail around an ellipsis."""
    key = key.removeprefix("probes.")
    if len(key) <= width:
        return key
    head = width // 3
    tail = width - head - 1
    return f"{key[:head]}…{key[-tail:]}"


def _clip(text: str, width: int = CELL_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def tolerance_text(row: Row) -> str:
    return f"±{row.tolerance_pct:g} %" if row.tolerance_pct else "exact"


def odd_summary(result: Comparison) -> Text:
    """One line per odd box (most different first), or a green all-same line."""
    odd = result.odd_ones()
    if not odd:
        return Text(f"✔ all {len(result.labels)} boxes are the same within the tolerances",
                    style="green")
    keys = result.odd_keys()
    text = Text()
    for n, label in enumerate(odd[:ODD_LINES]):
        if n:
            text.append("\n")
        differ = keys[label]
        shown = ", ".join(short_key(k, 40) for k in differ[:3]) + (" …" if len(differ) > 3
                                                                   else "")
        text.append("✖ odd one out: ", style=DIFF_STYLE)
        text.append(label, style="bold")
        text.append(f" — {len(differ)} key{'s' if len(differ) != 1 else ''} differ: {shown}")
    if len(odd) > ODD_LINES:
        text.append(f"\n… and {len(odd) - ODD_LINES} more boxes differ", style=DIFF_STYLE)
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


class CompareScreen(Screen[None]):
    """Findings of several boxes side by side (``c`` in the console, ``show --compare``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,c", "close", "back"),
        Binding("o", "only_diff", "only differences"),
        Binding("n", "next_diff(1)", "next diff"),
        Binding("N", "next_diff(-1)", "prev diff", show=False),
        Binding("r", "reload", "refresh"),
    ]
    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen #compare-title {
        height: 1; padding: 0 1; background: $boost; text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    CompareScreen #compare-odd {
        height: auto; max-height: 4; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    CompareScreen #compare-table { height: 1fr; scrollbar-size: 1 1; }
    CompareScreen #compare-detail {
        height: auto; max-height: 3; padding: 0 1; background: $boost;
    }
    """

    def __init__(self, load: Callable[[], CompareSource], thresholds: Thresholds | None = None,
                 *, only_diff: bool = False) -> None:
        super().__init__()
        self.load = load
        self.thresholds = thresholds or Thresholds()
        self.only_diff = only_diff
        self.result = Comparison([], [])
        self.shown: list[Row] = []
        self._widths: tuple[int, int] = (0, 0)

    def compose(self) -> ComposeResult:
        yield Static(id="compare-title")
        yield Static(id="compare-odd")
        yield DataTable(id="compare-table", fixed_columns=1, zebra_stripes=True,
                        cursor_type="row")
        yield Static(id="compare-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()
        self.query_one(DataTable).focus()

    # -- data --------------------------------------------------------------------
    def action_reload(self) -> None:
        """Compare the findings as they are now (a live console's probes keep finishing)."""
        source = golden_first(self.load())
        self.result = compare(list(source.findings), list(source.labels),
                              golden=source.golden, thresholds=self.thresholds)
        self.query_one("#compare-odd", Static).update(odd_summary(self.result))
        self._fill()

    def _title(self) -> Text:
        r = self.result
        text = Text(f"Compare {len(r.labels)} boxes", style="bold")
        if r.golden is not None:
            text.append(" · reference: golden ")
            text.append(r.labels[r.golden].removesuffix(GOLDEN), style=GOLDEN_STYLE)
        else:
            text.append(" · reference: what most boxes share")
        text.append(f" · {len(r.differing)} of {len(r.rows)} keys differ")
        return text

    def _column_widths(self) -> tuple[int, int]:
        """(key column, box column cap) for the screen's width."""
        key = min(KEY_WIDTH, max((len(short_key(row.key)) for row in self.shown),
                                 default=3) + 2)
        key = max(key, 16)
        boxes = max(1, len(self.result.labels))
        cell = (self.app.size.width - key - 4) // boxes - 2
        return key, max(CELL_MIN, min(CELL_WIDTH, cell))

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        keep = self.current_row()
        table.clear(columns=True)
        r = self.result
        self.shown = [row for row in r.rows if row.differs or not self.only_diff]
        odd = set(r.odd_ones())
        width, cap = self._widths = self._column_widths()
        table.add_column("differing keys" if self.only_diff else "key", key="key", width=width)
        for i, label in enumerate(r.labels):
            if i == r.golden:
                header = Text(_clip("◆ " + label.removesuffix(GOLDEN), cap), style=GOLDEN_STYLE)
            else:
                header = Text(_clip(label, cap), style=DIFF_STYLE if label in odd else "")
            lengths = [len(row.cells[i].text) for row in self.shown]
            table.add_column(header, key=f"box-{i}", width=min(cap, max([len(header), *lengths])))
        for row in self.shown:
            mark = "≠ " if row.differs else "  "
            key = Text(mark + short_key(row.key, width - 2),
                       style="bold" if row.differs else "")
            cells = [Text(_clip(c.text, cap), style="" if c.same else DIFF_STYLE)
                     for c in row.cells]
            table.add_row(key, *cells, key=row.key)
        self.query_one("#compare-title", Static).update(self._title())
        if keep is not None and any(row.key == keep.key for row in self.shown):
            table.move_cursor(row=table.get_row_index(keep.key), animate=False)
        self._show_detail()

    def current_row(self) -> Row | None:
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return None
        if table.row_count != len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def _show_detail(self) -> None:
        detail = self.query_one("#compare-detail", Static)
        row = self.current_row()
        if row is None:
            detail.update(Text("no keys differ" if self.only_diff else "no findings",
                               style="dim"))
            return
        text = Text(row.key, style="bold")
        text.append(f"  {tolerance_text(row)}", style="dim")
        ref = "golden" if self.result.golden is not None else "most boxes"
        text.append(f"\nreference ({ref}): ")
        text.append(format_value(row.reference))
        odd = [(label, cell.text) for label, cell in zip(self.result.labels, row.cells,
                                                         strict=True) if not cell.same]
        if odd:
            text.append(" · differs: ")
            for n, (label, value) in enumerate(odd):
                text.append(", " if n else "")
                text.append(f"{label} {value}", style=DIFF_STYLE)
        detail.update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_resize(self) -> None:
        if self.result.labels and self._column_widths() != self._widths:
            self._fill()

    # -- actions -------------------------------------------------------------------
    def action_only_diff(self) -> None:
        self.only_diff = not self.only_diff
        self._fill()

    def action_next_diff(self, step: int) -> None:
        table = self.query_one(DataTable)
        n = len(self.shown)
        for k in range(1, n + 1):
            i = (table.cursor_row + step * k) % n
            if self.shown[i].differs:
                table.move_cursor(row=i, animate=False)
                return
        self.notify("no differences", timeout=2)

    def action_close(self) -> None:
        self.dismiss(None)
