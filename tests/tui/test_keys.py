"""Pilot tests: keys change what the console shows and does."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Input, TabbedContent

from inferfit.api import Progress
from inferfit.config import Config
from inferfit.findings import Findings
from inferfit.hosts import SSHHost, SSHOptions, SSHTarget
from inferfit.tui.app import InferfitApp
from inferfit.tui.batch import BatchView
from inferfit.tui.fmt import export_name
from inferfit.tui.screens.confirm import ConfirmScreen
from inferfit.tui.screens.export import ExportScreen
from inferfit.tui.screens.help import HelpScreen
from inferfit.tui.target_view import TargetHeader, TargetSpec

SIZE = (80, 24)


def notes(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


def header(app: Any) -> str:
    view = app.current_view()
    return str(view.query_one(TargetHeader).render())


async def test_replay_shows_every_probe_in_reading_order(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.current_view()
        names = [s.probe_name for s in view.visible_slots()]
        assert names == ["system", "gpu", "disk", "latency", "nginx", "sizing"]
        assert all(s.state != "pending" for s in view.visible_slots())
        assert "recorded 2026-11-30 04:42Z" in header(app)
        assert "gpu-a100" in header(app)


async def test_number_keys_and_tab_move_between_panels(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("3")
        assert app.focused_slot().probe_name == "disk"
        await pilot.press("tab")
        assert app.focused_slot().probe_name == "latency"
        await pilot.press("shift+tab", "shift+tab")
        assert app.focused_slot().probe_name == "gpu"
        await pilot.press("9")
        assert "no panel 9 here (6 shown)" in notes(app)


async def test_filter_hides_panels_and_escape_restores(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"lat")
        view = app.current_view()
        assert [s.probe_name for s in view.visible_slots()] == ["latency"]
        await pilot.press("enter")  # keeps the filter, back to the panels
        assert app.focused_slot().probe_name == "latency"
        await pilot.press("slash", "escape")
        assert len(view.visible_slots()) == 6


async def test_d_toggles_dark_and_light(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        dark = app.current_theme.dark
        await pilot.press("d")
        await pilot.pause()
        assert app.current_theme.dark is not dark
        await pilot.press("d")
        await pilot.pause()
        assert app.current_theme.dark is dark


async def test_question_mark_opens_help_listing_every_key(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = [k for k, _ in app.screen.keys]
        for key in ("r", "R", "e", "p", "/", "d", "q", "?", "tab / shift+tab", "1…9"):
            assert key in keys
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_command_palette_offers_every_action(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE):
        titles = " | ".join(c.title for c in app.get_system_commands(app.screen)).lower()
        for word in ("re-run the focused probe", "re-run every probe", "export findings",
                     "pause / resume batch", "filter panels", "toggle dark", "quit",
                     "this help"):
            assert word in titles, word


async def test_export_writes_the_prompted_name_and_loads_back_equal(
    kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    original = Findings.load(kit.A100)
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        field = app.screen.query_one(Input)
        assert field.value == export_name("gpu-a100")
        await pilot.press("enter")
        await pilot.pause()
        written = tmp_path / export_name("gpu-a100")
        assert written.is_file()
        assert Findings.load(written).to_dict() == original.to_dict()
        assert app.last_export == written.resolve()
        assert any(str(written.resolve()) in n for n in notes(app))
        # Another name typed over the default, in a directory that does not exist yet.
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one(Input).value = "out/second.toml"
        await pilot.press("enter")
        await pilot.pause()
        assert Findings.load(tmp_path / "out" / "second.toml").to_dict() == original.to_dict()
        # Escape writes nothing.
        await pilot.press("e", "escape")
        assert sorted(p.name for p in tmp_path.rglob("*.toml")) == sorted(
            [written.name, "second.toml"])


async def test_export_failure_is_reported_not_fatal(
    kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocker").write_text("a file, not a directory")
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one(Input).value = "blocker/x.toml"
        await pilot.press("enter")
        await pilot.pause()
        assert any(n.startswith("cannot write blocker/x.toml") for n in notes(app))
        assert app.is_running


async def test_several_targets_get_tabs_and_an_overview(kit: Any) -> None:
    app = kit.replay_app(kit.A100, kit.T4)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tabs = app.query_one(TabbedContent)
        assert tabs.active == "target-0"
        table = app.query_one("#overview", DataTable)
        assert table.row_count == 2
        first = [str(c) for c in table.get_row_at(0)]
        second = [str(c) for c in table.get_row_at(1)]
        assert first[0] == "gpu-a100"
        assert "fail" in first[2]
        assert second[0] == "gpu-t4"
        assert "error" in second[2]
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert tabs.active == "target-1"
        assert app.current_view().spec.name == "gpu-t4"
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert tabs.active == "overview-pane"
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert tabs.active == "target-1"


async def test_replay_refuses_rerun_and_batch_politely(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("r", "R", "p")
        assert "replay of saved findings: nothing to re-run" in notes(app)
        assert "replay of saved findings: no probes to re-run on gpu-a100" in notes(app)
        assert "replay of saved findings: no batch to control" in notes(app)
        await pilot.press("q")
    assert app.return_value == 0


async def test_resize_keeps_panels(kit: Any) -> None:
    app = kit.replay_app(kit.A100, kit.T4)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        slot = app.current_view().visible_slots()[0]
        assert slot.size.width <= 80
        await pilot.resize_terminal(140, 50)
        await pilot.pause()
        assert slot.size.width > 100
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        assert 0 < slot.size.width <= 60
        assert app.is_running


# -- live ------------------------------------------------------------------------------
async def test_a_raising_probe_shows_an_error_while_others_keep_updating(kit: Any) -> None:
    ticker = kit.TickingProbe(count=6, period_s=0.05)
    steady = kit.CountingProbe("steady")
    app = kit.live_app([kit.RaisingProbe(), ticker, steady])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        view = app.current_view()
        slots = {s.probe_name: s for s in view.slots}
        broken = slots["broken"]
        assert broken.state == "error"
        assert broken.has_class("-error")
        assert broken.result is not None
        assert broken.result.error_kind == "probe_crashed"
        assert "RuntimeError: the probe fell over" in broken.result.summary
        assert any("the probe fell over" in n for n in notes(app))
        assert slots["steady"].state == "ok"
        assert slots["ticker"].state == "ok"
        assert ticker.sent == 6
        assert slots["ticker"].updated_at is not None
        view.tick()  # the 1 Hz tick draws pending live data
        await pilot.pause()
        live_text = str(slots["ticker"].panel.query_one(".live").render())
        assert "tick" in live_text  # the last sample reached the panel
        assert view.findings.probes["broken"].status == "error"
        assert view.findings.probes["steady"].summary == "run 1"
        assert app.is_running


async def test_r_reruns_the_focused_probe_and_R_reruns_all(kit: Any) -> None:
    a, b = kit.CountingProbe("alpha"), kit.CountingProbe("beta")
    app = kit.live_app([a, b])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert (a.runs, b.runs) == (1, 1)
        await pilot.press("2", "r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (a.runs, b.runs) == (1, 2)
        slot = app.focused_slot()
        assert slot.result is not None
        assert slot.result.summary == "run 2"
        await pilot.press("R")
        await app.workers.wait_for_complete()
        assert (a.runs, b.runs) == (2, 3)


async def test_q_asks_first_while_a_probe_runs(kit: Any) -> None:
    release = asyncio.Event()
    slow = kit.CountingProbe("slow", release=release)
    app = kit.live_app([slow])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.busy
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        assert "still running on local" in app.screen.question
        await pilot.press("n")
        assert app.is_running
        assert not isinstance(app.screen, ConfirmScreen)
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not app.busy
        await pilot.press("q")  # nothing runs now: no question
    assert app.return_value == 0


async def test_q_then_y_quits_while_running(kit: Any) -> None:
    slow = kit.CountingProbe("slow", release=asyncio.Event())
    app = kit.live_app([slow])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("q", "y")
    assert app.return_value == 0


async def test_p_says_batch_control_is_not_configured(kit: Any) -> None:
    app = kit.live_app([kit.CountingProbe("alpha")])
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("batch control is not configured" in n for n in notes(app))
        assert "batch: not configured" in header(app)


class FakeBatch:
    """A batch control standing in for the mixed-mode plugin: flips a flag."""

    def __init__(self) -> None:
        self.paused = False
        self.closed = False

    async def status(self, host: Any, target: str) -> BatchView:
        return BatchView("paused" if self.paused else "running", self.paused, True)

    async def toggle(self, host: Any, target: str) -> tuple[BatchView, str]:
        self.paused = not self.paused
        view = await self.status(host, target)
        return view, f"batch {view.text} on {target}"

    def view(self, host: Any) -> BatchView | None:
        return BatchView("paused · resumes in 90 s", True, True) if self.paused else None

    async def close(self) -> None:
        self.closed = True
        self.paused = False


async def test_p_toggles_a_wired_batch_control_and_q_warns_while_paused(kit: Any) -> None:
    batch = FakeBatch()
    app = kit.live_app([kit.CountingProbe("alpha")], batch_control=batch)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "batch: running" in header(app)
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert batch.paused
        assert "batch paused on local" in notes(app)
        await pilot.pause(1.3)  # a tick: the header takes view() (a countdown, no I/O)
        assert "batch: paused · resumes in 90 s" in header(app)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "PAUSED on local (quitting resumes it)" in app.screen.question
        await pilot.press("escape", "p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not batch.paused
        await pilot.press("p")  # paused again, then quit: the console resumes on the way out
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
    assert app.return_value == 0
    assert batch.closed
    assert not batch.paused


def test_batch_control_comes_from_mixed_mode_when_configured(kit: Any, tmp_path: Path) -> None:
    from inferfit.tui.batch import NoBatchControl, make_batch_control

    reg = kit.registry()
    plain = Config.load(include_user=False, include_project=False)
    assert isinstance(make_batch_control(plain, reg), NoBatchControl)
    cfg = tmp_path / "batch.toml"
    cfg.write_text('[batch]\ncontroller = "signal"\npattern = "python3 worker.py"\n')
    control = make_batch_control(
        Config.load(cfg, include_user=False, include_project=False), reg)
    assert type(control).__name__ == "ConsoleBatchControl"


async def test_unreachable_target_shows_not_connected_and_keeps_running(
    kit: Any, home: Path
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    host = SSHHost(SSHTarget.parse(f"127.0.0.1:{port}"), SSHOptions(connect_timeout_s=5))
    spec = TargetSpec(host.name, host=host, probes=[kit.CountingProbe("alpha")],
                      panels=dict(kit.registry().panels))
    app = InferfitApp([spec], Config.load(include_user=False, include_project=False))
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        view = app.current_view()
        assert view.conn_state == "failed"
        assert "not connected" in header(app)
        slot = view.slots[0]
        assert slot.state == "error"
        assert slot.result is not None
        assert slot.result.error_kind == "not_connected"
        assert any("could not connect" in n.title for n in app._notifications)
        await pilot.press("R")  # tries again, fails again, still alive
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.conn_state == "failed"
        assert app.is_running


async def test_m_without_mixed_mode_says_not_configured(kit: Any) -> None:
    app = kit.live_app([kit.CountingProbe("alpha")])
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        assert any("batch control is not configured" in n for n in notes(app))


async def test_m_measures_interference_after_asking_and_exports_it(
    kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inferfit.plugins.interference as interference

    calls: list[str] = []

    async def fake_measure(host: Any, controller: Any, options: Any, *, progress: Any = None,
                           **override: Any) -> dict[str, Any]:
        calls.append(controller.name)
        progress(Progress("mixed", "pausing batch", 1 / 3))
        return {"method": "http_probe", "controller": controller.name, "samples": 600,
                "p95_ms_batch_on": 412.0, "p95_ms_batch_off": 120.0, "duration_s": 9.5}

    monkeypatch.setattr(interference, "measure_interference", fake_measure)
    batch = FakeBatch()
    batch.options = {"controller": "signal", "pattern": "python3 worker.py",  # type: ignore[attr-defined]
                     "measure_url": "http://127.0.0.1:8000/health", "measure_requests": 200}
    batch.registry = kit.registry()  # type: ignore[attr-defined]
    app = kit.live_app([kit.CountingProbe("alpha")], batch_control=batch)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "PAUSES batch load" in app.screen.question
        assert "http://127.0.0.1:8000/health" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert calls == []
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert calls == ["signal"]
        view = app.current_view()
        assert view.mixed_slot is not None
        assert view.mixed_slot.state == "ok"
        assert "412 ms with batch running, 120 ms with it paused" in (
            view.mixed_slot.result.summary)
        assert view.findings.sections["mixed"]["p95_ms_batch_on"] == 412.0
        out = tmp_path / "with-mixed.toml"
        app.export_to(view, str(out))
    assert Findings.load(out).sections["mixed"]["controller"] == "signal"
    # ... and the replay shows it again.
    replay = kit.replay_app(out)
    async with replay.run_test(size=SIZE) as pilot:
        await pilot.pause()
        names = [s.probe_name for s in replay.current_view().visible_slots()]
        assert names == ["alpha", "mixed", "sizing"]
