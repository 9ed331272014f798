"""Snapshot tests: each panel fed by recorded findings (and live readings), pinned size.

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs under tests/tui/__snapshots__/ before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from inferfit.api import Progress, Sample
from inferfit.config import Config
from inferfit.findings import Findings, ProbeResult
from inferfit.tui.app import InferfitApp
from inferfit.tui.target_view import TargetSpec

PANEL_SIZE = (100, 40)
APP_SIZE = (80, 24)
Snap = Callable[..., bool]


def feed(probe: str, samples: list[dict[str, Any]]) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        app = pilot.app
        assert isinstance(app, InferfitApp)
        panel = app.current_view().visible_slots()[0].panel
        for values in samples:
            if probe == "disk":
                panel.show_progress(Progress("disk", values["message"], values["fraction"],  # type: ignore[attr-defined]
                                             values["values"]))
            else:
                panel.show_sample(Sample(probe, values, at=values.get("at", 0.0)))  # type: ignore[attr-defined]
        panel.flush()  # type: ignore[attr-defined]
        await pilot.pause()

    return run_before


async def settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()


@pytest.mark.parametrize("probe", ["system", "sizing"])
def test_panel_from_findings(snap_compare: Snap, kit: Any, probe: str) -> None:
    assert snap_compare(kit.replay_app(kit.A100, keep=[probe]), terminal_size=PANEL_SIZE,
                        run_before=settle)


@pytest.mark.parametrize(("probe", "samples"), [
    ("gpu", "gpu"), ("latency", "latency"), ("nginx", "nginx"), ("disk", "disk_progress"),
])
def test_live_panel_with_recorded_readings(snap_compare: Snap, kit: Any, probe: str,
                                           samples: str) -> None:
    app = kit.replay_app(kit.A100, keep=[probe])
    assert snap_compare(app, terminal_size=PANEL_SIZE,
                        run_before=feed(probe, kit.live_samples()[samples]))


def test_generic_panel(snap_compare: Snap, kit: Any) -> None:
    findings = Findings.load(kit.T4)
    findings.probes = {"custom": ProbeResult(
        "custom", "warn", "a team's own probe: queue deeper than usual", 1.5,
        values={"queue_depth": 12, "drain_s": 3.25, "workers": [
            {"name": "w1", "up": True, "jobs": 7}, {"name": "w2", "up": False, "jobs": 0}]},
        notes=["queue deeper than 10"], fix="add a worker")}
    app = InferfitApp([TargetSpec("gpu-t4", findings=findings,
                                  panels=dict(kit.registry().panels))],
                      Config.load(include_user=False, include_project=False))
    assert snap_compare(app, terminal_size=PANEL_SIZE, run_before=settle)


def test_whole_console_at_80x24(snap_compare: Snap, kit: Any) -> None:
    assert snap_compare(kit.replay_app(kit.A100), terminal_size=APP_SIZE, run_before=settle)


def test_overview_of_two_targets(snap_compare: Snap, kit: Any) -> None:
    async def to_overview(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        await pilot.press("left_square_bracket")
        await pilot.pause()

    assert snap_compare(kit.replay_app(kit.A100, kit.T4), terminal_size=APP_SIZE,
                        run_before=to_overview)


def test_help_screen(snap_compare: Snap, kit: Any) -> None:
    async def help_(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(kit.replay_app(kit.A100), terminal_size=APP_SIZE, run_before=help_)


def test_export_prompt(snap_compare: Snap, kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import inferfit.tui.app as app_module

    monkeypatch.setattr(app_module, "export_name", lambda host: f"findings-{host}-2026-11-30.toml")

    async def export(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()

    assert snap_compare(kit.replay_app(kit.A100), terminal_size=APP_SIZE, run_before=export)
