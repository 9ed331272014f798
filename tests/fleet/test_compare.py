"""compare(): thresholds for "same", golden box vs majority, the odd one out; the CLI."""

from __future__ import annotations

import json

from inferfit.compare import Thresholds, compare, flatten, same


def test_disk_within_ten_percent_is_the_same_and_twenty_is_not(findings_factory):
    golden = findings_factory("golden", seq=2400.0)
    close = findings_factory("close", seq=2200.0)  # -8.3 %
    slow = findings_factory("slow", seq=1900.0)  # -20.8 %
    result = compare([golden, close, slow], golden=0)
    row = next(r for r in result.rows if r.key == "probes.disk.seq_read_mib_s")
    assert row.tolerance_pct == 10.0
    assert [c.same for c in row.cells] == [True, True, False]
    assert result.odd_ones() == ["slow"]
    assert result.odd_keys()["slow"] == ["probes.disk.seq_read_mib_s"]


def test_majority_is_the_reference_without_golden(findings_factory):
    boxes = [findings_factory(f"gpu-{i}") for i in range(4)]
    boxes.append(findings_factory("gpu-4", gpus=1, gpu_name="NVIDIA A10"))
    result = compare(boxes)
    assert result.golden is None
    assert result.odd_ones() == ["gpu-4"]
    diff = set(result.odd_keys()["gpu-4"])
    assert {"probes.gpu.devices[0].name", "probes.gpu.devices[1].name"} <= diff
    row = next(r for r in result.rows if r.key == "probes.gpu.devices[1].name")
    assert row.cells[4].value is None
    assert row.cells[4].text == "—"
    # Volatile and per-box keys never count as differences.
    keys = {r.key for r in result.rows}
    assert not any(k.endswith(("duration_s", ".uuid", "summary", "uptime_s")) for k in keys)
    assert "target.name" not in keys


def test_status_changes_show_up_and_identical_boxes_are_all_same(findings_factory):
    a, b = findings_factory("a"), findings_factory("b")
    assert not compare([a, b]).differing
    c = findings_factory("c", disk_status="warn")
    result = compare([a, b, c])
    assert [r.key for r in result.differing] == ["probes.disk.status"]


def test_lists_labelled_by_mount_or_name():
    flat = flatten({"probes": {"system": {"filesystems": [
        {"mount": "/", "free_gib": 1.0}, {"mount": "/data", "free_gib": 2.0}]},
        "latency": {"regions": [{"name": "eu", "rtt_ms_p95": 3.0}]}}})
    assert flat["probes.system.filesystems[/data].free_gib"] == 2.0
    assert flat["probes.latency.regions[eu].rtt_ms_p95"] == 3.0


def test_same_rules():
    assert same(109.9, 100, 10)
    assert same(90, 100, 10)
    assert not same(111, 100, 10)
    assert not same(0.1, 0, 50)  # a zero reference needs an exact zero
    assert same(None, None, 0)
    assert not same(None, 0, 50)
    assert same(True, True, 0)
    assert not same(True, 1, 100)
    assert same("H100", "H100", 0)
    assert not same("H100", "A100", 100)
    th = Thresholds.from_config({"tolerance_pct": 5.0, "rules": [
        {"keys": "probes.disk.*", "tolerance_pct": 30.0}], "ignore": ["*.uuid"]})
    assert th.tolerance_pct("probes.disk.seq_read_mib_s") == 30.0
    assert th.tolerance_pct("probes.system.cpu_cores") == 5.0
    assert th.ignored("probes.gpu.devices[0].uuid")
    assert Thresholds.from_config({}, default_pct=1.0).tolerance_pct("x.y") == 1.0


def test_compare_cli_highlights_the_odd_box(inferfit_cli, tmp_path, findings_factory):
    d = tmp_path / "collected"
    for i in range(3):
        findings_factory(f"gpu-{i}").write(d / f"gpu-{i}.toml")
    findings_factory("gpu-3", seq=1000.0).write(d / "gpu-3.toml")
    golden = tmp_path / "golden.toml"
    findings_factory("golden").write(golden)
    r = inferfit_cli("compare", str(d), "--golden", str(golden), "--only-diff",
                     env={"COLUMNS": "200"})
    assert r.returncode == 1, r.stderr
    assert "odd one out: gpu-3: 1 keys differ (probes.disk.seq_read_mib_s)" in r.stdout
    assert "golden (golden)" in r.stdout
    assert "probes.disk.seq_read_mib_s ±10%" in r.stdout
    assert "probes.system.cpu_cores" not in r.stdout  # --only-diff
    assert "| gpu-3 " not in r.stdout
    assert "gpu-3" in r.stdout
    r = inferfit_cli("compare", str(d), "--json")
    doc = json.loads(r.stdout)
    assert doc["odd_ones"] == {"gpu-3": ["probes.disk.seq_read_mib_s"]}
    assert doc["golden"] is None
    r = inferfit_cli("compare", str(d / "gpu-0.toml"), str(d / "gpu-1.toml"), "--no-summary")
    assert r.returncode == 0
    assert "all boxes are the same within the tolerances" in r.stdout
    r = inferfit_cli("compare", str(d / "gpu-0.toml"), "--tolerance", "5")
    assert r.returncode == 3
    assert "at least two" in r.stderr
    r = inferfit_cli("compare", str(d / "gpu-0.toml"), str(tmp_path / "nope.toml"))
    assert r.returncode == 3
    assert "nope.toml: cannot read" in r.stderr


def test_compare_with_a_loose_tolerance_from_the_command_line(inferfit_cli, tmp_path,
                                                              findings_maker):
    a = findings_maker("a", {"x": ("ok", {"count": 100})})
    b = findings_maker("b", {"x": ("ok", {"count": 104})})
    a.write(tmp_path / "a.toml")
    b.write(tmp_path / "b.toml")
    assert inferfit_cli("compare", str(tmp_path / "a.toml"), str(tmp_path / "b.toml")
                        ).returncode == 1
    assert inferfit_cli("compare", str(tmp_path / "a.toml"), str(tmp_path / "b.toml"),
                        "--tolerance", "5").returncode == 0
