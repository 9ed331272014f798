"""The console app: a small shell of tabs (one per target, plus an overview), keys and screens.

The app never runs commands itself: each TargetView connects and each
ProbeSlot runs its probe in Textual workers (``inferfit.runner.run_probe``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, TabbedContent, TabPane

from inferfit.compare import Thresholds
from inferfit.config import Config
from inferfit.findings import FindingsError
from inferfit.tui.batch import NOT_CONFIGURED, BatchControl, NoBatchControl, can_measure
from inferfit.tui.fmt import STATUS_ICON, STATUS_STYLE, export_name
from inferfit.tui.messages import Connected, ConnectionFailed, ProbeCrashed, ProbeFinished
from inferfit.tui.screens.compare import CompareScreen, CompareSource, unique_labels
from inferfit.tui.screens.confirm import ConfirmScreen
from inferfit.tui.screens.export import ExportScreen
from inferfit.tui.screens.help import HelpScreen
from inferfit.tui.sizing import ConsoleSizing
from inferfit.tui.slot import ProbeSlot
from inferfit.tui.target_view import TargetSpec, TargetView

# (keys shown in help, action, description) — the one list for footer, help and palette.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("r", "rerun", "re-run the focused probe"),
    ("R", "rerun_all", "re-run every probe on this target (reconnects if needed)"),
    ("e", "export", "export findings to a TOML file (prompt with a default name)"),
    ("p", "batch", "pause / resume batch load (mixed mode)"),
    ("m", "measure", "measure batch interference: realtime latency with batch on / paused"),
    ("tab / shift+tab", "", "next / previous panel"),
    ("1…9", "", "jump to panel 1…9 of this target"),
    ("] / [", "next_target", "next / previous target tab (several targets)"),
    ("/", "filter", "filter panels by name (escape clears)"),
    ("c", "compare", "compare the targets' findings side by side (2+ targets)"),
    ("o n r esc", "", "on compare: only differences, next one, refresh, back"),
    ("d", "toggle_theme", "toggle dark / light"),
    ("?", "help", "this help"),
    ("ctrl+p", "", "command palette: every action by name"),
    ("q", "request_quit", "quit (asks first while probes run or batch is paused)"),
)

# Actions on the target tabs, off while the compare screen covers them.
BEHIND_COMPARE = frozenset({
    "rerun", "rerun_all", "export", "batch", "measure", "focus_panel", "next_target",
    "prev_target", "filter",
})


class FilterInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "clear filter")]

    def action_clear(self) -> None:
        self.value = ""
        self.app.call_later(self.app.run_action, "close_filter")


class InferfitApp(App[int]):
    """``inferfit [TARGET ...]`` (live) and ``inferfit show FILE ...`` (read-only replay)."""

    TITLE = "inferfit"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "request_quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("r", "rerun", "re-run"),
        Binding("R", "rerun_all", "all"),
        Binding("e", "export", "export"),
        Binding("p", "batch", "batch"),
        Binding("m", "measure", "interference", show=False),
        Binding("slash", "filter", "filter"),
        Binding("c", "compare", "compare"),
        Binding("d", "toggle_theme", "theme"),
        Binding("right_square_bracket", "next_target", "next target", show=False),
        Binding("left_square_bracket", "prev_target", "prev target", show=False),
        *(Binding(str(n), f"focus_panel({n})", f"panel {n}", show=False) for n in range(1, 10)),
    ]

    def __init__(
        self,
        targets: Sequence[TargetSpec],
        config: Config,
        *,
        batch_control: BatchControl | None = None,
        sizing: ConsoleSizing | None = None,
        tick_s: float = 1.0,
        golden: int | None = None,
        compare_on_start: bool = False,
    ) -> None:
        super().__init__()
        if not targets:
            raise ValueError("the console needs at least one target")
        self.specs = list(targets)
        self.config = config
        self.batch_control: BatchControl = batch_control or NoBatchControl()
        self.sizing = sizing
        self.tick_s = tick_s
        self.read_only = not any(s.live for s in self.specs)
        self.last_export: Path | None = None
        self.filter_text = ""
        self.golden = golden  # index into targets: the compare screen's reference box
        self.compare_on_start = compare_on_start

    # -- layout --------------------------------------------------------------
    def compose(self) -> ComposeResult:
        several = len(self.specs) > 1
        with TabbedContent(id="targets", classes="several" if several else "single"):
            if several:
                with TabPane("Overview", id="overview-pane"):
                    yield DataTable(id="overview", cursor_type="row", zebra_stripes=True)
            for i, spec in enumerate(self.specs):
                with TabPane(spec.name, id=f"target-{i}"):
                    yield TargetView(spec, self.config, batch=self.batch_control,
                                     sizing=self.sizing, view_id=f"view-{i}")
        yield FilterInput(id="filter", placeholder="filter panels by name — enter keeps, "
                          "escape clears")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "replay (read-only)" if self.read_only else "live"
        if len(self.specs) > 1:
            self._build_overview()
            self.query_one(TabbedContent).active = "target-0"
        self.set_interval(self.tick_s, self._tick)
        self.call_after_refresh(self._focus_first)
        if self.compare_on_start and len(self.specs) > 1:
            self.action_compare()

    def _focus_first(self) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == "overview-pane":
            self.query_one("#overview", DataTable).focus()
            return
        slots = self.current_view().visible_slots()
        if slots:
            slots[0].focus()

    @property
    def views(self) -> list[TargetView]:
        return list(self.query(TargetView))

    def current_view(self) -> TargetView:
        tabs = self.query_one(TabbedContent)
        pane = tabs.active_pane
        if pane is not None:
            found = pane.query(TargetView)
            if found:
                return found.first()
        if pane is not None and pane.id == "overview-pane":
            table = self.query_one("#overview", DataTable)
            row = table.cursor_row
            if 0 <= row < len(self.specs):
                return self.query_one(f"#view-{row}", TargetView)
        return self.views[0]

    def focused_slot(self) -> ProbeSlot | None:
        node: Widget | None = self.focused
        while node is not None:
            if isinstance(node, ProbeSlot):
                return node
            parent = node.parent
            node = parent if isinstance(parent, Widget) else None
        return None

    def _tick(self) -> None:
        self.current_view().tick()

    # -- overview ---------------------------------------------------------------
    def _probe_columns(self) -> list[str]:
        names: dict[str, None] = {}
        for view in self.views:
            for slot in view.slots:
                names[slot.probe_name] = None
        return list(names)

    def _build_overview(self) -> None:
        table = self.query_one("#overview", DataTable)
        table.clear(columns=True)
        table.add_columns("target", "connection", "overall", *self._probe_columns())
        self._fill_overview()

    def _fill_overview(self) -> None:
        if len(self.specs) < 2:
            return
        table = self.query_one("#overview", DataTable)
        cols = self._probe_columns()
        table.clear()
        for view in self.views:
            states = {s.probe_name: s.state for s in view.slots}
            overall = view.findings.status if view.findings.probes else "pending"
            conn = view.conn_state + (
                f" {view.latency_ms:.0f} ms" if view.latency_ms is not None else "")
            row: list[Text | str] = [view.spec.name, conn, _state(overall)]
            row.extend(_state(states.get(c, "")) for c in cols)
            table.add_row(*row, key=view.id)

    def on_probe_finished(self, message: ProbeFinished) -> None:
        self._fill_overview()
        view = self._view_named(message.target)
        if view is not None and self.sizing is not None and not view.busy:
            try:
                table = self.sizing.recommend(view.spec.name, view.findings)
            except Exception as exc:  # a sizing plugin bug must not kill the console
                self.notify(f"sizing failed: {type(exc).__name__}: {exc}", severity="error")
                return
            if table:
                view.set_sizing(table)

    def on_probe_crashed(self, message: ProbeCrashed) -> None:
        self._fill_overview()

    def on_connected(self, message: Connected) -> None:
        self._fill_overview()

    def on_connection_failed(self, message: ConnectionFailed) -> None:
        self._fill_overview()

    def _view_named(self, name: str) -> TargetView | None:
        for view in self.views:
            if view.spec.name == name:
                return view
        return None

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._fill_overview()
        self.current_view().tick()

    # -- actions ------------------------------------------------------------------
    def action_rerun(self) -> None:
        if self.read_only:
            self.notify("replay of saved findings: nothing to re-run", severity="warning")
            return
        slot = self.focused_slot()
        if slot is None:
            self.notify("focus a panel first (tab or 1…9), or press R for all")
            return
        if slot.read_only:
            self.notify(f"{slot.title}: nothing to re-run here")
            return
        view = self._view_named(slot.target)
        if view is not None and view.conn_state != "connected":
            view.run_all()
            return
        slot.start_check()
        self.notify(f"re-running {slot.title} on {slot.target}", timeout=2)

    def action_rerun_all(self) -> None:
        view = self.current_view()
        if not view.live:
            self.notify(f"replay of saved findings: no probes to re-run on {view.spec.name}",
                        severity="warning")
            return
        count = view.run_all()
        self.notify(f"re-running {count} probes on {view.spec.name}", timeout=2)

    def action_export(self) -> None:
        view = self.current_view()
        default = export_name(view.findings.target.name)

        def done(path: str | None) -> None:
            if path:
                self.export_to(view, path)

        self.push_screen(ExportScreen(default, view.spec.name), done)

    def export_to(self, view: TargetView, path: str) -> Path | None:
        """Write the view's findings (Findings.write: atomic); notify where."""
        try:
            written = view.findings.write(Path(path).expanduser())
        except (OSError, ValueError, FindingsError) as exc:
            self.notify(f"cannot write {path}: {exc}", title="export failed", severity="error")
            return None
        self.last_export = written.resolve()
        self.notify(f"findings written to {self.last_export}", title="exported", timeout=10)
        return written

    def action_batch(self) -> None:
        if self.read_only:
            self.notify("replay of saved findings: no batch to control", severity="warning")
            return
        self.current_view().toggle_batch()

    def action_measure(self) -> None:
        if self.read_only:
            self.notify("replay of saved findings: nothing to measure", severity="warning")
            return
        view = self.current_view()
        if not can_measure(self.batch_control):
            self.notify(NOT_CONFIGURED, title="interference", severity="warning")
            return
        if not view.live or view.conn_state != "connected":
            self.notify(f"{view.spec.name} is not connected", severity="warning")
            return
        opts = getattr(self.batch_control, "options", {})
        question = (
            f"Measure interference on {view.spec.name}?\n"
            f"This PAUSES batch load for a while (lease-protected, resumed afterwards) and "
            f"sends {opts.get('measure_requests', 200)} requests per phase to "
            f"{opts.get('measure_url') or '(measure_url is not set)'} from the box."
        )

        def answer(yes: bool | None) -> None:
            if yes:
                view.start_measure().scroll_visible()

        self.push_screen(ConfirmScreen(question), answer)

    def action_focus_panel(self, n: int) -> None:
        slots = self.current_view().visible_slots()
        if 1 <= n <= len(slots):
            slots[n - 1].focus()
            slots[n - 1].scroll_visible()
        else:
            self.notify(f"no panel {n} here ({len(slots)} shown)", timeout=2)

    def _switch_target(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        panes = [p.id for p in tabs.query(TabPane) if p.id]
        if len(panes) < 2:
            return
        idx = panes.index(tabs.active) if tabs.active in panes else 0
        # Drop focus first: a focused widget left in the old pane would pull it back
        # (TabbedContent shows the pane that holds the focus).
        self.screen.set_focus(None)
        tabs.active = panes[(idx + step) % len(panes)]
        self.call_after_refresh(self._focus_first)

    def action_next_target(self) -> None:
        self._switch_target(1)

    def action_prev_target(self) -> None:
        self._switch_target(-1)

    def action_filter(self) -> None:
        box = self.query_one("#filter", FilterInput)
        box.add_class("-shown")
        box.cursor_blink = False
        box.focus()

    def action_close_filter(self) -> None:
        box = self.query_one("#filter", FilterInput)
        box.remove_class("-shown")
        self._focus_first()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value
            for view in self.views:
                view.apply_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.action_close_filter()

    def action_compare(self) -> None:
        if len(self.specs) < 2:
            self.notify("compare needs two or more targets", severity="warning")
            return
        if not isinstance(self.screen, CompareScreen):
            self.push_screen(CompareScreen(self._compare_source, Thresholds.from_config(
                self.config.get("compare"))))

    def _compare_source(self) -> CompareSource:
        views = self.views
        return CompareSource([v.findings for v in views],
                             unique_labels(v.spec.name for v in views), self.golden)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "compare":
            return len(self.specs) > 1 and not isinstance(self.screen, CompareScreen)
        # Keys that act on the target tabs do nothing while the compare screen is up.
        return not (isinstance(self.screen, CompareScreen) and action in BEHIND_COMPARE)

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def action_help(self) -> None:
        self.push_screen(HelpScreen([(k, d) for k, _, d in KEYS]))

    @property
    def busy(self) -> bool:
        return any(v.busy for v in self.views)

    def action_request_quit(self) -> None:
        running = [v.spec.name for v in self.views if v.busy]
        paused = [v.spec.name for v in self.views if v.batch_view.paused]
        if not running and not paused:
            self.exit(0)
            return
        parts = []
        if running:
            parts.append(f"probes are still running on {', '.join(running)}")
        if paused:
            after = ("quitting resumes it" if hasattr(self.batch_control, "close")
                     else "it stays paused")
            parts.append(f"batch load is PAUSED on {', '.join(paused)} ({after})")
        text = "; ".join(parts)
        question = text[:1].upper() + text[1:] + ".\nQuit anyway?"

        def answer(yes: bool | None) -> None:
            if yes:
                self.exit(0)

        self.push_screen(ConfirmScreen(question), answer)

    async def on_unmount(self) -> None:
        close = getattr(self.batch_control, "close", None)
        if close is not None:
            try:
                await close()  # resume what this console paused
            except Exception as exc:
                self.log.error(f"batch control close failed: {exc!r}")
        for spec in self.specs:
            if spec.host is not None:
                await spec.host.close()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for keys, action, text in KEYS:
            if action and (action != "compare" or len(self.specs) > 1):
                yield SystemCommand(
                    f"{text.split(' (')[0].capitalize()}", f"key: {keys}", _runner(self, action)
                )


def _state(state: str) -> Text:
    if not state:
        return Text("")
    return Text(f"{STATUS_ICON.get(state, '')} {state}", style=STATUS_STYLE.get(state, ""))


def _runner(app: App[Any], action: str) -> Callable[[], Any]:
    async def run() -> None:
        await app.run_action(action)

    return run
