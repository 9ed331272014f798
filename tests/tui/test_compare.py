"""The compare screen: `inferfit show --compare` and `c` in the console, on recorded findings.

`a100-slow-disk.toml` is the A100 box with half its sequential read (and 5 % fewer random
IOPS, inside the 10 % disk tolerance); a renamed copy of the A100 box is its twin.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static, TabbedContent

from inferfit.cli import build_parser
from inferfit.cli.show import build_app
from inferfit.config import Config
from inferfit.findings import Findings
from inferfit.tui.app import InferfitApp
from inferfit.tui.screens.compare import CompareScreen
from inferfit.tui.screens.export import ExportScreen
from inferfit.tui.target_view import TargetSpec

SIZE = (80, 24)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tui"
A100 = FIXTURES / "a100-box.toml"
SLOW = FIXTURES / "a100-slow-disk.toml"
SEQ = "probes.disk.seq_read_mib_s"
IOPS = "probes.disk.rand_read_iops"
DIFFERING = [SEQ, "probes.disk.seq_read_gb_s", "probes.disk.model_load_s"]


@pytest.fixture
def twin(tmp_path: Path) -> Path:
    findings = Findings.load(A100)
    findings.target.name = "gpu-a100-b"
    return findings.write(tmp_path / "gpu-a100-b.toml")


def show_app(*argv: str | Path) -> InferfitApp:
    args = build_parser().parse_args(["show", *map(str, argv)])
    return build_app(args)


def console_app(*findings: Findings, golden: int | None = None) -> InferfitApp:
    from inferfit.cli.console import console_registry

    panels = dict(console_registry()[1].panels)
    specs = [TargetSpec(f.target.name, findings=f, panels=panels) for f in findings]
    return InferfitApp(specs, Config.load(include_user=False, include_project=False),
                       golden=golden)


def a100_twin_slow() -> list[Findings]:
    twin = Findings.load(A100)
    twin.target.name = "gpu-a100-b"
    return [Findings.load(A100), twin, Findings.load(SLOW)]


def text_of(screen: CompareScreen, widget_id: str) -> str:
    return str(screen.query_one(widget_id, Static).render())


def cell(table: DataTable[Any], row: str, column: int) -> Text:
    value = table.get_cell(row, f"box-{column}")
    assert isinstance(value, Text)
    return value


async def test_show_compare_opens_on_the_odd_box_out(home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     twin: Path) -> None:
    monkeypatch.chdir(tmp_path)
    app = show_app("--compare", "--golden", A100, twin, SLOW, A100)  # the golden one twice
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        # Golden first, each box once, the slow one singled out at the top.
        assert screen.result.labels == ["gpu-a100 (golden)", "gpu-a100-b", "gpu-a100-slow"]
        assert screen.result.odd_ones() == ["gpu-a100-slow"]
        odd = text_of(screen, "#compare-odd")
        assert "odd one out: gpu-a100-slow — 3 keys differ" in odd
        assert "disk.seq_read_mib_s" in odd
        assert "reference: golden gpu-a100 · 3 of" in text_of(screen, "#compare-title")
        # The slow disk's cell is red, the others are not; within 10 % is the same.
        table = screen.query_one(DataTable)
        assert str(cell(table, SEQ, 2)) == "1,180.4"
        assert "red" in str(cell(table, SEQ, 2).style)
        assert "red" not in str(cell(table, SEQ, 0).style)
        assert "red" not in str(cell(table, SEQ, 1).style)
        assert str(cell(table, IOPS, 2)) == "82110"
        assert "red" not in str(cell(table, IOPS, 2).style)
        assert str(table.get_cell(SEQ, "key")).startswith("≠ disk.seq_read_mib_s")
        assert str(table.get_cell(IOPS, "key")).startswith("  disk.rand_read_iops")
        # n jumps to the first difference; the detail line says why it is red.
        await pilot.press("n")
        detail = text_of(screen, "#compare-detail")
        assert f"{SEQ}  ±10 %" in detail
        assert "reference (golden): 2,453.9 · differs: gpu-a100-slow 1,180.4" in detail
        # Back to the console: the tabs, golden first.
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)
        assert [v.spec.name for v in app.views] == [
            "gpu-a100 (golden)", "gpu-a100-b", "gpu-a100-slow"]


async def test_only_differences_toggle_keeps_the_cursor_row(kit: Any) -> None:
    app = console_app(*a100_twin_slow())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        table = screen.query_one(DataTable)
        every = table.row_count
        assert every > 100
        assert [row.key for row in screen.shown][:2] == ["target.transport", "target.os"]
        await pilot.press("n", "n")  # on the second difference
        await pilot.press("o")
        assert [row.key for row in screen.shown] == DIFFERING
        assert table.row_count == 3
        assert str(table.ordered_columns[0].label) == "differing keys"
        assert screen.current_row() is not None
        assert screen.current_row().key == "probes.disk.seq_read_gb_s"  # type: ignore[union-attr]
        await pilot.press("o")
        assert table.row_count == every
        assert screen.current_row().key == "probes.disk.seq_read_gb_s"  # type: ignore[union-attr]


async def test_majority_reference_and_golden_moved_first(kit: Any) -> None:
    # No golden: the reference is what most boxes share, so the slow box is the odd one.
    app = console_app(*a100_twin_slow())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.result.golden is None
        assert screen.result.odd_ones() == ["gpu-a100-slow"]
        assert "what most boxes share" in text_of(screen, "#compare-title")
    # The slow box as golden: it moves to the first column and the two others differ.
    app = console_app(*a100_twin_slow(), golden=2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.result.labels[0] == "gpu-a100-slow"
        assert screen.result.odd_ones() == ["gpu-a100", "gpu-a100-b"]
        assert "red" not in str(cell(screen.query_one(DataTable), SEQ, 0).style)


async def test_refresh_compares_the_findings_as_they_are_now(kit: Any) -> None:
    boxes = a100_twin_slow()
    app = console_app(*boxes)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.result.odd_ones() == ["gpu-a100-slow"]
        # A re-run (here: the findings object the slow box's tab holds) fixed the disk.
        slow = app.views[2].findings.probes["disk"].values
        slow.update(seq_read_mib_s=2400.0, seq_read_gb_s=2.52, model_load_s=6.3)
        await pilot.press("r")
        assert screen.result.odd_ones() == []
        assert "all 3 boxes are the same within the tolerances" in text_of(
            screen, "#compare-odd")


async def test_console_keys_stay_off_behind_the_compare_screen(kit: Any) -> None:
    app = console_app(*a100_twin_slow())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert any(t.startswith("Compare the targets' findings") for t in commands)
        await pilot.press("c", "e", "right_square_bracket", "slash", "1")
        assert isinstance(app.screen, CompareScreen)
        assert not any(isinstance(s, ExportScreen) for s in app.screen_stack)
        assert app.query_one(TabbedContent).active == "target-0"
        await pilot.press("c")  # c toggles back to the console
        assert len(app.screen_stack) == 1


async def test_one_target_has_no_compare(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        assert not isinstance(app.screen, CompareScreen)
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(t.startswith("Compare") for t in commands)


async def test_many_boxes_scroll_right_with_the_key_column_fixed(kit: Any) -> None:
    boxes = []
    for n in range(8):
        findings = Findings.load(SLOW if n == 5 else A100)
        findings.target.name = f"gpu-{n:02d}"
        boxes.append(findings)
    app = console_app(*boxes)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.result.odd_ones() == ["gpu-05"]
        table = screen.query_one(DataTable)
        assert table.fixed_columns == 1
        assert table.max_scroll_x > 0  # eight columns do not fit 80 cells
        await pilot.press("end")  # a row cursor: end / home scroll to the last / first box
        assert table.scroll_x == table.max_scroll_x
        await pilot.press("home")
        assert table.scroll_x == 0


def test_show_compare_needs_two_findings(inferfit_cli: Callable[..., Any]) -> None:
    done = inferfit_cli("show", "--compare", str(A100))
    assert done.returncode == 3
    assert "--compare needs two or more findings documents" in done.stderr


async def test_show_compare_reads_a_directory(home: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for f in a100_twin_slow():
        f.write(out / f"{f.target.name}.toml")
    monkeypatch.chdir(tmp_path)
    app = show_app("--compare", out)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.result.labels == ["gpu-a100-b", "gpu-a100-slow", "gpu-a100"]  # by name
        assert screen.result.odd_ones() == ["gpu-a100-slow"]


def test_compare_screen_at_80x24(snap_compare: Callable[..., bool]) -> None:
    async def first_difference(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        await pilot.press("c", "n")
        await pilot.pause()

    assert snap_compare(console_app(*a100_twin_slow(), golden=0), terminal_size=SIZE,
                        run_before=first_difference)


def _tmux_screen(base: list[str], session: str) -> str:
    return subprocess.run([*base, "capture-pane", "-p", "-t", session], capture_output=True,
                          text=True, timeout=20).stdout


def _wait_for(base: list[str], session: str, check: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + 30
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux_screen(base, session)
        if check(screen):
            return screen
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")


def test_real_binary_opens_on_the_compare_screen(home: Path, tmp_path: Path, twin: Path) -> None:
    """`inferfit show --compare --golden` in tmux at 80×24: odd box, o, escape, q."""
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent))
    assert exe is not None
    session = f"inferfit-compare-{os.getpid()}"
    base = ["tmux", "-L", f"inferfit-compare-{os.getpid()}-{tmp_path.name}"]
    command = shlex.join([exe, "show", "--compare", "--golden", str(A100), str(twin),
                          str(SLOW)])
    try:
        subprocess.run([*base, "new-session", "-d", "-s", session, "-x", "80", "-y", "24",
                        "-c", str(tmp_path), f"{command}; echo \"inferfit exited $?\"; sleep 60"],
                       check=True, timeout=20)
        _wait_for(base, session, lambda s: "odd one out: gpu-a100-slow" in s
                  and "≠ disk.seq_read_mib_s" in s, "the compare screen")
        subprocess.run([*base, "send-keys", "-t", session, "o"], check=True, timeout=20)
        screen = _wait_for(base, session, lambda s: "differing keys" in s, "only differences")
        rows = [line for line in screen.splitlines() if line.startswith(" ≠ ")]
        assert [r.split()[1] for r in rows] == [
            "disk.seq_read_mib_s", "disk.seq_read_gb_s", "disk.model_load_s"]
        assert "1,180.4" in rows[0]
        subprocess.run([*base, "send-keys", "-t", session, "Escape"], check=True, timeout=20)
        _wait_for(base, session, lambda s: "Overview" in s and "gpu-a100 (golden)" in s,
                  "the tabs")
        subprocess.run([*base, "send-keys", "-t", session, "q"], check=True, timeout=20)
        _wait_for(base, session, lambda s: "inferfit exited 0" in s, "a clean exit")
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=20)
