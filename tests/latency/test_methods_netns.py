"""The probe run inside the "box" namespace (no SSH): ping, curl, fallbacks, injection."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.findings import ProbeResult
from inferfit.probes.latency import Job, LatencyProbe, Settings, _run_agent, _run_curl, _run_ping
from inferfit.probes.latency_stats import TargetSpec


def ctx_for(regions: list[dict[str, Any]], **options: Any) -> ProbeContext:
    config = Config(data={"regions": regions, "probes": {"latency": options}})
    return ProbeContext(options=options, config=config)


async def check(host: Any, regions: list[dict[str, Any]], **options: Any) -> ProbeResult:
    return await LatencyProbe().check(host, ctx_for(regions, **options))


def by_name(result: ProbeResult) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in result.values["regions"]}


async def test_icmp_with_real_ping(regions_lab: Any) -> None:
    result = await check(regions_lab.host(), [
        {"name": "near", "targets": [regions_lab.peer_ip("near")], "budget_ms_p95": 50},
        {"name": "mid", "targets": [regions_lab.peer_ip("mid")], "budget_ms_p95": 100},
    ], samples=15, interval_ms=200.0)
    regions = by_name(result)
    assert regions["near"]["method"] == "icmp"
    assert abs(regions["near"]["rtt_ms_p50"] - 5) <= 2
    assert abs(regions["mid"]["rtt_ms_p50"] - 40) <= 3  # 15 samples of ±5 ms jitter
    assert regions["near"]["verdict"] == "ok"
    assert "console-to-box path not measured: the box is the local machine" in result.notes


async def test_http_timing_with_curl(regions_lab: Any) -> None:
    url = f"http://{regions_lab.peer_ip('near')}:80/healthz"
    result = await check(regions_lab.host(), [{"name": "web", "targets": [url]}],
                         samples=8, interval_ms=50.0)
    web = by_name(result)["web"]
    assert web["method"] == "http"
    assert web["samples"] == 8
    assert abs(web["rtt_ms_p50"] - 5) <= 2  # the TCP handshake
    row = web["per_target"][0]
    assert row["http_status_last"] == 200
    # handshake + request: two round trips at least, plus curl and server time
    assert 9 <= row["http_ms_first_byte_p50"] <= 40
    assert "http_ms_tls_p50" not in row  # plain http: no TLS figure


async def test_without_python3_tcp_falls_back_to_curl(regions_lab: Any, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "curl", "sleep"):
        (bin_dir / tool).symlink_to(f"/bin/{tool}" if tool != "curl" else "/usr/bin/curl")
    host = regions_lab.host(path=str(bin_dir))
    result = await check(host, [
        {"name": "near", "targets": [f"{regions_lab.peer_ip('near')}:443"]},
    ], samples=6, interval_ms=50.0, timeout_ms=1000.0)
    near = by_name(result)["near"]
    assert result.values["box_tools"] == ["curl"]
    assert near["method"] == "tcp-curl"
    assert near["samples"] == 6
    assert 5 - 1 <= near["rtt_ms_p50"] <= 5 + 20  # curl times in user space: load adds to it


async def test_no_tools_is_said_in_words(regions_lab: Any, tmp_path: Path) -> None:
    bin_dir = tmp_path / "empty"
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to("/bin/sh")
    result = await check(regions_lab.host(path=str(bin_dir)),
                         [{"name": "x", "targets": ["127.0.0.1:22"]}], samples=2)
    region = by_name(result)["x"]
    assert region["verdict"] == "unreachable"
    assert "no python3, curl or ping" in region["unreachable_reason"]
    assert result.status == "fail"


async def test_no_regions_is_skipped_and_sends_nothing(regions_lab: Any) -> None:
    before = regions_lab.stats()
    result = await check(regions_lab.host(), [])
    assert result.status == "skipped"
    assert "configs/regions.example.toml" in result.summary
    after = regions_lab.stats()  # (the kernel's own IPv6 chatter is not ours)
    assert {k: v["ipv4_to_peer"] for k, v in after.items()} == {
        k: v["ipv4_to_peer"] for k, v in before.items()}


async def test_hostile_config_is_rejected_before_anything_runs(regions_lab: Any,
                                                               tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for hostile in (f"127.0.0.1;touch {marker}", "$(id)", f"127.0.0.1:22`touch {marker}`"):
        result = await check(regions_lab.host(), [{"name": "evil", "targets": [hostile]}])
        assert result.status == "error"
        assert result.error_kind == "bad_config"
        assert "regions[0].targets[0]" in result.summary
    assert not marker.exists()


async def test_hostile_strings_reaching_the_runners_are_data(regions_lab: Any,
                                                             tmp_path: Path) -> None:
    """Defence in depth: even unvalidated text only ever travels as argv/JSON data."""
    marker = tmp_path / "pwned"
    host = regions_lab.host()
    settings = Settings(samples=2, interval_ms=20.0, timeout_ms=500.0)
    evil = [f"127.0.0.1;touch {marker}", f"$(touch {marker})", f"`touch {marker}`"]
    jobs = [Job(0, TargetSpec(e, "tcp", e, 443), "tcp") for e in evil]
    await _run_agent(host, jobs, settings, [])
    assert all(j.result.errors == {"dns": 1} for j in jobs), [j.result for j in jobs]
    for e in evil:
        ping = Job(0, TargetSpec(e, "icmp", e), "icmp")
        await _run_ping(host, ping, settings)
        assert not ping.result.rtts_ms
        curl = Job(0, TargetSpec(e, "http", e, 80, url=f"http://{e}/"), "http")
        await _run_curl(host, curl, settings)
        assert not curl.result.rtts_ms
    assert not marker.exists()
    assert not Path(os.getcwd(), "pwned").exists()


async def test_ipv6_targets_in_brackets(regions_lab: Any) -> None:
    """[::1]:port (nothing listens: refused, still timed) and [::1] by ping, inside the box."""
    result = await check(regions_lab.host(), [
        {"name": "v6-tcp", "targets": ["[::1]:9"]},
        {"name": "v6-icmp", "targets": ["[::1]"]},
    ], samples=3, interval_ms=200.0)
    regions = by_name(result)
    assert regions["v6-tcp"]["refused_samples"] == 3
    assert regions["v6-tcp"]["rtt_ms_p50"] < 5
    assert regions["v6-icmp"]["method"] == "icmp"
    assert regions["v6-icmp"]["samples"] == 3


async def test_broken_python3_falls_back_to_curl(regions_lab: Any, tmp_path: Path) -> None:
    """A python3 that cannot run the timer (too old, broken) is noticed, and curl takes over."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "sleep"):
        (bin_dir / tool).symlink_to(f"/bin/{tool}")
    (bin_dir / "curl").symlink_to("/usr/bin/curl")
    fake = bin_dir / "python3"
    fake.write_text("#!/bin/sh\necho 'SyntaxError: invalid syntax' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = await check(regions_lab.host(path=str(bin_dir)), [
        {"name": "near", "targets": [f"{regions_lab.peer_ip('near')}:443"]},
    ], samples=4, interval_ms=50.0, timeout_ms=1000.0)
    near = by_name(result)["near"]
    assert near["method"] == "tcp-curl"
    assert near["samples"] == 4
    assert any("python3 could not run the TCP timer" in n and "SyntaxError" in n
               for n in result.notes), result.notes
