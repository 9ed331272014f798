"""Live mode (watch) and the CLI paths that need no namespaces (real loopback sshd)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferfit.api import LiveProbe, ProbeContext, Sample
from inferfit.config import Config
from inferfit.hosts import SSHHost, SSHOptions
from inferfit.manager import Registry, make_plugin_manager
from inferfit.probes.latency import Job, LatencyProbe, Settings, _run_agent
from inferfit.probes.latency_stats import TargetSpec

MARK = "inferfit-latency"


def agent_pids() -> set[int]:
    """PIDs of latency agents (python3 - inferfit-latency ...) running on this machine."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if len(argv) > 2 and argv[1] == b"-" and argv[2] == MARK.encode():
                    pids.add(int(entry.name))
    return pids


async def wait_gone(pids: set[int]) -> set[int]:
    for _ in range(100):  # up to ~10 s
        left = pids & agent_pids()
        if not left:
            return left
        await asyncio.sleep(0.1)
    return pids & agent_pids()


async def wait_gone_ping(address: str) -> set[int]:
    """PIDs of `ping ... ADDRESS` still running after a bounded wait (ours: netns address)."""
    def pings() -> set[int]:
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                    if argv[0].endswith(b"ping") and address.encode() in argv:
                        found.add(int(entry.name))
        return found

    for _ in range(100):
        if not pings():
            return set()
        await asyncio.sleep(0.1)
    return pings()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 (the kernel answers the handshakes)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4096)
        yield int(s.getsockname()[1])


def ctx_for(regions: list[dict[str, Any]], **options: Any) -> ProbeContext:
    return ProbeContext(options=options,
                        config=Config(data={"regions": regions, "probes": {"latency": options}}))


def test_registered_as_live_probe() -> None:
    probes = Registry.collect(make_plugin_manager(load_entry_points=False)).probes
    assert isinstance(probes["latency"], LiveProbe)


async def test_watch_rolls_at_1hz_and_stops_cleanly(regions_lab: Any) -> None:
    before = agent_pids()
    ctx = ctx_for([
        {"name": "near", "targets": [f"{regions_lab.peer_ip('near')}:443"]},
        {"name": "mid", "targets": [f"{regions_lab.peer_ip('mid')}:443"]},
        {"name": "ping-only", "targets": [regions_lab.peer_ip("far")]},
    ], interval_ms=100.0, live_window_s=30.0)
    stream = LatencyProbe().watch(regions_lab.host(), ctx)
    samples: list[Sample] = []
    async for sample in stream:
        samples.append(sample)
        if len(samples) == 4:
            break
    running = agent_pids() - before
    await stream.aclose()  # type: ignore[attr-defined]
    assert all(s.probe == "latency" for s in samples)
    gaps = [b.at - a.at for a, b in itertools.pairwise(samples)]
    assert all(g >= 0.5 for g in gaps), gaps  # one sample a second, not a flood
    last = {r["name"]: r for r in samples[-1].values["regions"]}
    assert abs(last["near"]["rtt_ms"] - 5) <= 2
    assert abs(last["mid"]["rtt_ms_p50"] - 40) <= 4
    assert last["near"]["loss_pct"] == 0
    assert len(last["near"]["history_ms"]) == 4  # sparkline: one value per tick
    assert last["near"]["samples"] >= 20
    assert abs(last["ping-only"]["rtt_ms_p50"] - 180) <= 3  # ICMP, streamed from ping
    assert "notes" not in samples[-1].values
    assert running, "the live agent was not running on the box"
    assert not await wait_gone(running), "the live agent outlived aclose()"
    assert not await wait_gone_ping(regions_lab.peer_ip("far")), "live ping outlived aclose()"


async def test_watch_over_real_sshd_stops_the_remote_agent(sshd: Any, home: Path,
                                                          listener: int) -> None:
    before = agent_pids()
    host = SSHHost("box", SSHOptions(config_file=str(sshd.ssh_config)))
    ctx = ctx_for([{"name": "lo", "targets": [f"127.0.0.1:{listener}"]},
                   {"name": "lo-icmp", "targets": ["127.0.0.83"]}], interval_ms=100.0)
    try:
        stream = LatencyProbe().watch(host, ctx)
        first = await anext(stream)  # type: ignore[call-overload]
        for _ in range(20):  # a loaded machine may deliver nothing in some seconds
            second = await anext(stream)  # type: ignore[call-overload]
            if all("rtt_ms" in r for r in second.values["regions"]):
                break
        running = agent_pids() - before
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await host.close()
    assert first.values["regions"][0]["name"] == "lo"
    assert second.values["regions"][0]["rtt_ms"] < 50
    assert second.values["regions"][1]["rtt_ms"] < 50  # ping over SSH
    assert running
    assert not await wait_gone(running)
    assert not await wait_gone_ping("127.0.0.83"), "the remote ping outlived aclose()"


async def test_hostile_hosts_over_ssh_stay_data(sshd: Any, home: Path, tmp_path: Path) -> None:
    """shlex-quoted argv over a real sshd: text like $(touch X) is never run."""
    marker = tmp_path / "pwned"
    evil = [f"127.0.0.1;touch {marker}", f"$(touch {marker})"]
    jobs = [Job(0, TargetSpec(e, "tcp", e, 443), "tcp") for e in evil]
    host = SSHHost("box", SSHOptions(config_file=str(sshd.ssh_config)))
    try:
        await _run_agent(host, jobs, Settings(samples=1, timeout_ms=300.0), [])
    finally:
        await host.close()
    assert [j.result.errors for j in jobs] == [{"dns": 1}, {"dns": 1}]
    assert not marker.exists()


def test_cli_no_regions_is_skipped(sshd: Any, inferfit_cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "latency", "--export", str(out), *sshd.cli())
    assert r.returncode == 0, r.stderr
    lat = tomllib.loads(out.read_text())["probes"]["latency"]
    assert lat["status"] == "skipped"
    assert "configs/regions.example.toml" in lat["summary"]
    assert "skipped" in r.stdout


def test_cli_hostile_target_is_refused(sshd: Any, inferfit_cli: Any, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    cfg = tmp_path / "evil.toml"
    cfg.write_text(f'[[regions]]\nname = "evil"\ntargets = ["127.0.0.1;touch {marker}"]\n')
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "latency", "--config", str(cfg), "--export", str(out),
                     *sshd.cli())
    assert r.returncode == 3, r.stdout + r.stderr
    lat = tomllib.loads(out.read_text())["probes"]["latency"]
    assert lat["error_kind"] == "bad_config"
    assert "regions[0].targets[0]" in lat["summary"]
    assert not marker.exists()


def test_cli_loopback_region_with_console_path(sshd: Any, inferfit_cli: Any, tmp_path: Path,
                                               listener: int) -> None:
    cfg = tmp_path / "lo.toml"
    cfg.write_text(f"""
[probes.latency]
samples = 10
interval_ms = 20.0

[[regions]]
name = "loopback"
targets = ["127.0.0.1:{listener}"]
budget_ms_p95 = 50
""")
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "latency", "--config", str(cfg), "--export", str(out),
                     *sshd.cli())
    assert r.returncode == 0, r.stdout + r.stderr
    lat = tomllib.loads(out.read_text())["probes"]["latency"]
    region = lat["regions"][0]
    assert region["verdict"] == "ok"
    assert region["samples"] == 10
    assert lat["console"]["address"] == f"127.0.0.1:{sshd.port}"
    assert lat["console"]["samples"] == 10
    assert lat["console"]["ssh_exec_samples"] == 10
    assert any("p99 of 10 samples is the maximum" in n for n in lat["notes"])
