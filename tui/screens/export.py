"""The export prompt: a file name (default findings-<host>-<date>.toml); Enter writes."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class ExportScreen(ModalScreen[str | None]):
    """Dismisses with the file name typed (None on escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    ExportScreen { align: center middle; }
    ExportScreen > Vertical {
        width: 70; max-width: 95%; height: auto; border: round $accent; padding: 1 2;
        background: $surface;
    }
    ExportScreen Label { width: 100%; }
    """

    def __init__(self, default: str, target: str) -> None:
        super().__init__()
        self.default = default
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Export findings of [b]{self.target}[/b] to (TOML; .json for JSON):")
            yield Input(value=self.default, id="export-path", select_on_focus=False)
            yield Label("[dim]enter: write · escape: cancel[/dim]")

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = False
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        self.dismiss(value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
