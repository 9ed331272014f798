"""Done-when: `inferfit check --probe latency` through a real sshd against emulated regions.

The console runs in its own namespace 10 ms from the box; the box runs OpenSSH
and reaches three regions at 5 ms, 40 ms (±5 ms, 1 % loss) and 180 ms through
the delay line, plus a 20 % loss region so loss is always seen.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

SAMPLES = 300


def write_config(path: Path, lab: Any, extra: str = "") -> Path:
    path.write_text(f"""
[probes.latency]
samples = {SAMPLES}
interval_ms = 15.0
timeout_ms = 2000.0

[[regions]]
name = "near"
targets = ["{lab.peer_ip('near')}:443"]
budget_ms_p95 = 50

[[regions]]
name = "mid"
targets = ["{lab.peer_ip('mid')}:443"]
budget_ms_p95 = 100

[[regions]]
name = "far"
targets = ["{lab.peer_ip('far')}:443"]
budget_ms_p95 = 150

[[regions]]
name = "lossy"
targets = ["{lab.peer_ip('lossy')}:443"]
budget_ms_p95 = 50
{extra}""")
    return path


def test_three_regions_through_real_sshd(regions_lab: Any, box_sshd: Any, cli_in_ns: Any,
                                         tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "regions.toml", regions_lab)
    out = tmp_path / "findings.toml"
    before = regions_lab.stats()
    done = cli_in_ns(regions_lab.peers["console"], "check", "--probe", "latency",
                     "--config", str(cfg), "--export", str(out), *box_sshd.cli())
    after = regions_lab.stats()
    assert done.returncode == 2, done.stdout + done.stderr  # far fails its budget
    doc = tomllib.loads(out.read_text())
    lat = doc["probes"]["latency"]
    assert lat["status"] == "fail"
    assert lat["method"] == "tcp"
    regions = {r["name"]: r for r in lat["regions"]}

    near, mid, far, lossy = (regions[n] for n in ("near", "mid", "far", "lossy"))
    # p50 within ±2 ms of the set delay; p95 inside the jitter band (same ±2 ms slack).
    assert abs(near["rtt_ms_p50"] - 5) <= 2, near
    assert near["rtt_ms_p95"] <= 5 + 2, near
    assert abs(mid["rtt_ms_p50"] - 40) <= 2, mid
    assert 35 - 2 <= mid["rtt_ms_p95"] <= 45 + 2, mid
    assert mid["rtt_ms_min"] >= 35 - 2, mid
    assert abs(far["rtt_ms_p50"] - 180) <= 2, far
    assert far["rtt_ms_p95"] <= 180 + 2, far
    assert [near["verdict"], mid["verdict"], far["verdict"]] == ["ok", "ok", "fail"]
    assert "exceeds the budget of 150 ms" in far["verdict_reason"]

    # Loss: every probe whose SYN the delay line dropped is counted lost, no more.
    for name, region in (("mid", mid), ("lossy", lossy)):
        dropped = after[name]["dropped_syn"] - before[name]["dropped_syn"]
        lost = region["samples_sent"] - region["samples"]
        assert region["samples_sent"] == SAMPLES
        assert lost <= dropped, (name, lost, dropped)
        assert lost >= dropped - max(2, dropped // 4), (name, lost, dropped)  # re-sent SYNs
        assert region["loss_pct"] == round(100 * lost / SAMPLES, 3)
    assert 8 <= lossy["loss_pct"] <= 35, lossy  # 20 % set: always seen
    assert mid["loss_pct"] < 5

    for region in (near, mid, far, lossy):
        assert region["samples"] >= 1
        assert region["targets"] == [f"{regions_lab.peer_ip(region['name'])}:443"]
        assert region["rtt_ms_min"] <= region["rtt_ms_p50"] <= region["rtt_ms_p95"]
        assert region["rtt_ms_p95"] <= region["rtt_ms_p99"] <= region["rtt_ms_max"]
        assert "jitter_ms" in region
        assert "budget_ms_p95" in region
    assert mid["jitter_ms"] > near["jitter_ms"]  # ±5 ms of jitter shows

    console = lat["console"]
    assert "SRE" in console["vantage"]
    assert console["address"] == f"{regions_lab.box_ip('console')}:{box_sshd.port}"
    assert abs(console["rtt_ms_p50"] - 10) <= 2, console
    assert console["ssh_exec_ms_p50"] >= 10
    assert "far fail" in lat["summary"]
    assert "far" in done.stdout
    assert "fail" in done.stdout


def test_failure_cases_through_real_sshd(regions_lab: Any, box_sshd: Any, cli_in_ns: Any,
                                         tmp_path: Path) -> None:
    """Unreachable (no route), timeout (black hole), DNS failure, and a refused port."""
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"""
[probes.latency]
samples = 5
interval_ms = 50.0
timeout_ms = 800.0
console = false

[[regions]]
name = "closed"
targets = ["{regions_lab.peer_ip('near')}:444"]
budget_ms_p95 = 50

[[regions]]
name = "noroute"
targets = ["10.200.250.2:443"]

[[regions]]
name = "blackhole"
targets = ["{regions_lab.peer_ip('black')}:443"]

[[regions]]
name = "nodns"
targets = ["nonexistent.invalid:443"]
""")
    out = tmp_path / "f.toml"
    done = cli_in_ns(regions_lab.peers["console"], "check", "--probe", "latency", "--config",
                     str(cfg), "--export", str(out), *box_sshd.cli())
    assert done.returncode == 2, done.stdout + done.stderr
    lat = tomllib.loads(out.read_text())["probes"]["latency"]
    regions = {r["name"]: r for r in lat["regions"]}
    closed = regions["closed"]
    assert closed["verdict"] == "ok"
    assert closed["refused_samples"] == 5
    assert closed["samples"] == 5
    # The reset still times the round trip (wall clock: the kernel keeps no RTT for a
    # refused connect, so a busy box adds its scheduling delay on top).
    assert 5 - 1 <= closed["rtt_ms_p50"] <= 5 + 20
    assert any("refused" in n for n in lat["notes"])
    assert regions["noroute"]["verdict"] == "unreachable"
    assert regions["noroute"]["unreachable_reason"].startswith("no route")
    assert regions["blackhole"]["verdict"] == "unreachable"
    assert regions["blackhole"]["unreachable_reason"].startswith("timeout")
    assert regions["blackhole"]["loss_pct"] == 100
    assert regions["nodns"]["verdict"] == "unreachable"
    assert regions["nodns"]["unreachable_reason"].startswith("DNS failure")
    assert "console" not in lat
