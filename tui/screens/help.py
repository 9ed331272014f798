"""The `?` help screen: every key and what it does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = (
    "Panels fill as probes finish; live panels update about once a second. "
    "Every action is also in the command palette (ctrl+p)."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss_help", "close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 76; max-width: 98%; height: auto; max-height: 95%; border: round $accent;
        padding: 0 1; background: $surface;
    }
    """

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(overflow="fold")
        for key, text in self.keys:
            table.add_row(key, text)
        with VerticalScroll():
            yield Static("[b]inferfit console — keys[/b]")
            yield Static(table)
            yield Static(f"[dim]{INTRO}\nescape or ? closes this screen.[/dim]")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
