"""Panels fed by recorded findings and live readings: what a user reads on screen."""

from __future__ import annotations

from typing import Any

from textual.widgets import ProgressBar, Static

from inferfit.api import Progress, Sample
from inferfit.findings import Findings, ProbeResult
from inferfit.tui.fmt import DASH, ago, duration, export_name, fnum, fvalue, spark, unit_for
from inferfit.tui.panels.gpu_panel import GpuPanel, aggregate
from inferfit.tui.panels.latency_panel import LatencyPanel, sample_points
from inferfit.tui.panels.live import SparkRow
from inferfit.tui.panels.nginx_panel import count_5xx, status_counts

SIZE = (100, 60)


def text_of(widget: Any) -> str:
    """Everything the widget's Static children render, as plain text."""
    from rich.console import Console

    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for static in widget.query(Static):
        console.print(static.content)
    return console.export_text()


def test_formatting_helpers() -> None:
    assert fnum(None) == DASH
    assert fnum("n/a") == DASH
    assert fnum(True) == DASH
    assert fnum(2453.9, 0, "MiB/s") == "2,454 MiB/s"
    assert fnum(86480) == "86,480"
    assert fvalue("rtt_ms_p95", 5.94) == "5.94 ms"
    assert fvalue("seq_read_mib_s", 2453.9) == "2,454 MiB/s"
    assert fvalue("direct_io", True) == "yes"
    assert fvalue("regions", [{"a": 1}, {"a": 2}]) == "2 entries"
    assert unit_for("request_time_ms_p99") == "ms"
    assert unit_for("power_draw_w") == "W"
    assert ago(3.4) == "3s"
    assert ago(125) == "2m 5s"
    assert ago(3700) == "1h 1m"
    assert duration(3 * 86400 + 4 * 3600 + 59) == "3d 4h"
    assert duration(None) == DASH
    assert spark([]) == ""
    assert spark([1, 1, 1]) == "▄▄▄"
    assert spark([0, 50, 100]) == "▁▅█"
    assert export_name("gpu a100/../x") .startswith("findings-gpu_a100_.._x-")
    assert export_name("box").endswith(".toml")


def test_live_sample_shapes_are_read_defensively() -> None:
    assert aggregate([{"util_gpu_pct": 50, "memory_used_mib": 10, "memory_total_mib": 100,
                       "power_draw_w": 100}, {"util_gpu_pct": 100, "memory_used_mib": 30,
                                          "memory_total_mib": 100, "power_draw_w": 300}]) == (
        75.0, 20.0, 400.0)
    assert aggregate([{"name": "no numbers"}]) == (None, None, None)
    assert sample_points({"regions": [{"name": "eu", "rtt_ms": 5.0}, {"name": "us"}]}) == [
        ("eu", 5.0), ("us", None)]
    assert sample_points({"regions": {"eu": 4.0}}) == [("eu", 4.0)]
    assert sample_points({"region": "ap", "rtt_ms": 180}) == [("ap", 180.0)]
    assert sample_points({"nothing": 1}) == []
    nested = {"status_counts": {"by_code": {"200": 5, "502": 2, "504": 1},
                                "by_class": {"2xx": 5, "5xx": 3}}}
    assert status_counts(nested)["502"] == 2
    assert count_5xx(nested) == 3
    assert count_5xx({"status_counts": {"500": 1, "503": 2, "200": 9}}) == 3
    assert count_5xx({"status_5xx": 4}) == 4
    assert count_5xx({}) is None


async def test_replayed_panels_show_the_recorded_figures(kit: Any) -> None:
    app = kit.replay_app(kit.A100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        slots = {s.probe_name: s for s in app.current_view().visible_slots()}
        system = text_of(slots["system"].panel)
        assert "Debian GNU/Linux 12 (bookworm)" in system
        assert "2 cores" in system
        gpu = text_of(slots["gpu"].panel)
        assert "NVIDIA A100-SXM4-80GB" in gpu
        assert "535.54.03" in gpu
        assert "G4 x16" in gpu
        assert "50/81,920" in gpu
        assert "MIG" in gpu
        disk = text_of(slots["disk"].panel)
        assert "2,454 MiB/s" in disk
        assert "86,480 IOPS" in disk
        assert "6.2 s" in disk
        latency = text_of(slots["latency"].panel)
        assert "ap-south" in latency
        assert "fail" in latency
        assert "182" in latency
        nginx = text_of(slots["nginx"].panel)
        assert "3,519 (0 bad)" in nginx
        assert "5xx 110" in nginx
        assert "504 49" in nginx
        rec = text_of(slots["sizing"].panel)
        assert "REALTIME" in rec
        assert "scale_out" in rec
        assert "littles_law" in rec


async def test_gpu_panel_sparklines_follow_live_samples(kit: Any) -> None:
    app = kit.replay_app(kit.A100, keep=["gpu"])
    samples = kit.live_samples()["gpu"]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        for values in samples:
            panel.show_sample(Sample("gpu", values, at=values["at"]))
        panel.flush()  # what the console's 1 Hz tick does
        await pilot.pause()
        sparks = [panel.query_one(f"#gpu-{n}", SparkRow) for n in ("util", "mem", "power")]
        assert [len(s.series) for s in sparks] == [len(samples)] * 3
        assert sparks[0].series[-1] == samples[-1]["gpus"][0]["util_gpu_pct"]
        assert f"{samples[-1]['gpus'][0]['util_gpu_pct']} % mean" in sparks[0].value
        # Per-device samples (one device per Sample) make one point per round, not per device.
        panel.show_sample(Sample("gpu", {"index": 0, "util_gpu_pct": 10.0}))
        panel.show_sample(Sample("gpu", {"index": 1, "util_gpu_pct": 30.0}))
        panel.flush()
        await pilot.pause()
        assert len(panel.history.get("util")) == len(samples) + 1


async def test_disk_panel_progress_bar_and_live_bandwidth(kit: Any) -> None:
    app = kit.replay_app(kit.A100, keep=["disk"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        slot = app.current_view().visible_slots()[0]
        panel = slot.panel
        for p in kit.live_samples()["disk_progress"]:
            panel.show_progress(Progress("disk", p["message"], p["fraction"], p["values"]))
        await pilot.pause()
        bar = panel.query_one(ProgressBar)
        assert bar.progress == 40.0
        assert bar.display
        row = panel.query_one("#disk-bw", SparkRow)
        assert "2,660 MiB/s now" in row.value
        panel.show_progress(Progress("disk", "done", 1.0))
        await pilot.pause()
        assert panel.query_one(ProgressBar).has_class("-idle")
        assert "2,454 MiB/s seq read" in row.value  # the result, not the last reading


async def test_latency_panel_keeps_a_sparkline_per_region(kit: Any) -> None:
    app = kit.replay_app(kit.A100, keep=["latency"])
    samples = kit.live_samples()["latency"]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.query_one(LatencyPanel)
        for values in samples:
            panel.show_sample(Sample("latency", values))
        assert panel.dirty  # drawn at the next tick, not once per sample
        panel.flush()
        await pilot.pause()
        assert len(panel.history.get("us-east")) == len(samples)
        shown = text_of(panel)
        last = samples[-1]["regions"][2]["rtt_ms"]
        assert f"{last:,.0f}" in shown
        assert "▁" in shown
        assert "█" in shown


async def test_generic_panel_shows_a_probe_without_its_own_panel(kit: Any) -> None:
    findings = Findings.load(kit.A100)
    findings.probes = {"custom": ProbeResult(
        "custom", "warn", "a team's own probe", 1.5,
        values={"queue_depth": 12, "drain_s": 3.25, "nodes": [{"name": "n1", "up": True}]},
        notes=["queue deeper than 10"], fix="add a worker")}
    findings.sections.pop("sizing")
    from inferfit.config import Config
    from inferfit.tui.app import InferfitApp
    from inferfit.tui.target_view import TargetSpec

    app = InferfitApp([TargetSpec("x", findings=findings, panels=dict(kit.registry().panels))],
                      Config.load(include_user=False, include_project=False))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        slot = app.current_view().visible_slots()[0]
        assert type(slot.panel).__name__ == "GenericPanel"
        shown = text_of(slot.panel)
        for piece in ("warn", "a team's own probe", "queue_depth", "12", "3.25 s", "nodes",
                      "n1", "queue deeper than 10", "fix: add a worker"):
            assert piece in shown, piece


async def test_latency_panel_takes_the_probes_own_history_window(kit: Any) -> None:
    app = kit.replay_app(kit.A100, keep=["latency"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.query_one(LatencyPanel)
        panel.show_sample(Sample("latency", {"regions": [
            {"name": "eu-west", "rtt_ms": 5.5, "history_ms": [5.0, None, 6.0, 5.5]}]}))
        await pilot.pause()
        assert panel.history.get("eu-west") == [5.0, 6.0, 5.5]


async def test_sizing_with_a_workload_fills_the_recommendation(kit: Any) -> None:
    from inferfit.cli.console import console_registry
    from inferfit.tui.sizing import ConsoleSizing
    from inferfit.workload import load_workload

    pm, reg = console_registry()
    workload = load_workload(kit.FIXTURES.parent.parent.parent / "configs" / "workloads"
                             / "realtime-chat-8b.toml")
    system = reg.probes["system"]
    app = kit.live_app([system], sizing=ConsoleSizing(pm, workload))
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        view = app.current_view()
        assert view.sizing_slot is not None
        result = view.sizing_slot.result
        assert result is not None
        assert result.values["mode"] in ("realtime", "batch", "mixed", "split")
        assert view.findings.sections["sizing"]["mode"] == result.values["mode"]
        assert "confidence" in text_of(view.sizing_slot.panel)


async def test_a_panel_that_raises_is_reported_and_the_console_goes_on(kit: Any) -> None:
    from inferfit.tui.panels.base import ProbePanel

    class Exploding(ProbePanel):
        probe_name = "alpha"

        def show_result(self, result: ProbeResult) -> None:
            raise ValueError("bad panel")

    app = kit.live_app([kit.CountingProbe("alpha"), kit.CountingProbe("beta")])
    for view_spec in app.specs:
        view_spec.panels["alpha"] = Exploding
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("bad panel" in n.message for n in app._notifications)
        slots = {s.probe_name: s for s in app.current_view().slots}
        assert slots["alpha"].state == "ok"  # the probe's result is kept (and exportable)
        assert slots["beta"].state == "ok"
        assert app.current_view().findings.probes["alpha"].summary == "run 1"
