"""latency probe: tail RTT, jitter and loss from the box to where its users are.

Regions come from the top-level ``[[regions]]`` config (see
configs/regions.example.toml); with none configured the probe is skipped and
sends nothing anywhere. Everything is measured *from the box*, over SSH, with
nothing installed there:

* ``tcp``: latency_agent.py fed to the box's ``python3`` on stdin (targets as one
  JSON argument): non-blocking TCP connects, all targets concurrently; a refused
  connection still yields an RTT; a connect that needed a SYN retransmission
  counts as lost;
* ``tcp-curl``: the same handshake timed by ``curl -w`` when there is no python3;
* ``icmp``: ``ping`` (iputils or busybox output);
* ``http``: ``curl -w`` connect / TLS / first byte for http(s) URLs.

It also times the console-to-box path (TCP connect to the SSH port, SSH round
trip of ``true``): the SRE's own vantage point, a proxy for users near them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import statistics
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from inferfit.api import ProbeContext, Progress, Sample
from inferfit.findings import ProbeResult, Status
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host, HostError, sh
from inferfit.probes import latency_agent
from inferfit.probes.latency_stats import (
    EXAMPLE,
    METHODS,
    Region,
    RegionConfigError,
    SampleSet,
    TargetSpec,
    Verdict,
    judge_region,
    parse_regions,
    percentile,
    percentile_notes,
    summarize,
    unreachable_reason,
)
from inferfit.probes.ping_parse import parse_curl, parse_ping

DETECT = (
    'for t in python3 curl ping; do command -v "$t" >/dev/null 2>&1 && echo "$t"; done; '
    "echo @@end"
)

# $1 samples, $2 gap seconds, $3 timeout seconds, $4 URL. Requests start $2 apart,
# concurrently (a TCP target timed with curl may hold the connection to -m).
CURL_LOOP = r"""
n=$1; gap=$2; to=$3; url=$4; i=0
fmt='%{time_namelookup} %{time_connect} %{time_appconnect} %{time_starttransfer} %{http_code}'
while [ "$i" -lt "$n" ]; do
  ( out=$(curl -sS -o /dev/null -m "$to" --connect-timeout "$to" -w "$fmt" \
      -- "$url" 2>/dev/null </dev/null); rc=$?; echo "@@$i $rc $out" ) &
  i=$((i + 1)); sleep "$gap"
done
wait
echo @@end
"""

VANTAGE = "console: where inferfit runs (the SRE's own vantage point, a proxy for users near them)"
VERDICT_STATUS: dict[Verdict, Status] = {
    "ok": "ok", "warn": "warn", "fail": "fail", "unreachable": "fail",
}


class LatencySettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    samples: int = 20
    interval_ms: float = 200.0
    timeout_ms: float = 2000.0
    method: str = "auto"
    console: bool = True
    live_window_s: float = 60.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Settings:
        s = cls(
            samples=int(options.get("samples", 20)),
            interval_ms=float(options.get("interval_ms", 200.0)),
            timeout_ms=float(options.get("timeout_ms", 2000.0)),
            method=str(options.get("method", "auto")),
            console=bool(options.get("console", True)),
            live_window_s=float(options.get("live_window_s", 60.0)),
        )
        if s.samples < 1:
            raise LatencySettingsError("'probes.latency.samples' must be at least 1")
        if s.interval_ms <= 0 or s.timeout_ms <= 0:
            raise LatencySettingsError(
                "'probes.latency.interval_ms' and 'probes.latency.timeout_ms' must be > 0"
            )
        if s.method not in METHODS:
            raise LatencySettingsError(
                f"'probes.latency.method' is {s.method!r}; expected one of {', '.join(METHODS)}"
            )
        return s


# -- planning: which method measures which target --------------------------------
@dataclass
class Job:
    """One target of one region and how it will be measured."""

    region: int
    spec: TargetSpec
    method: str  # tcp | tcp-curl | icmp | http | none
    note: str = ""
    result: SampleSet = field(default_factory=SampleSet)
    extra: dict[str, Any] = field(default_factory=dict)
    via_agent: bool = False  # an http target whose RTT comes from the TCP agent
    curl: SampleSet | None = None  # what curl itself measured (http targets)


def choose_method(spec: TargetSpec, method: str, tools: set[str]) -> tuple[str, str]:
    """(method, note) for one target given the configured method and the box's tools."""
    want = spec.kind if method == "auto" else method
    if want == "tcp" and spec.port is None:
        return "none", f"{spec.text}: method tcp needs host:port"
    if want == "http" and spec.kind == "icmp":
        return "none", f"{spec.text}: method http needs a URL or host:port"
    if want == "http":
        if "curl" in tools:
            return "http", ""
        want = "tcp"
    if want == "tcp":
        if "python3" in tools:
            return "tcp", ""
        if "curl" in tools:
            return "tcp-curl", ""
        if "ping" in tools:
            return "icmp", f"{spec.text}: no python3 or curl on the box: ICMP ping, port ignored"
        return "none", "the box has no python3, curl or ping to measure with"
    if "ping" in tools:
        return "icmp", ""
    return "none", f"{spec.text}: no ping on the box (give host:port to time TCP instead)"


def plan(regions: list[Region], method: str, tools: set[str]) -> list[Job]:
    jobs = []
    for r, region in enumerate(regions):
        for spec in region.targets:
            chosen, note = choose_method(spec, method, tools)
            job = Job(r, spec, chosen, note)
            if chosen == "none":
                job.result.error("tool", note)
            jobs.append(job)
    return jobs


# -- parsing the agent's events -------------------------------------------------
def collect_agent(events: Sequence[Mapping[str, Any]], n_targets: int) -> list[SampleSet]:
    """SampleSets (send order) from latency_agent events."""
    sets = [SampleSet() for _ in range(n_targets)]
    ordered: list[dict[int, float]] = [{} for _ in range(n_targets)]
    for ev in events:
        t = ev.get("t")
        if not isinstance(t, int) or not 0 <= t < n_targets:
            continue
        s = sets[t]
        if ev.get("ev") == "resolve" and ev.get("error"):
            s.error(str(ev["error"]), f"cannot resolve: {ev.get('detail', '')}")
        elif ev.get("ev") == "s":
            kind = ev.get("k")
            if kind in ("ok", "refused"):
                s.sent += 1
                ordered[t][int(ev.get("i", 0))] = float(ev["ms"])
                s.refused += kind == "refused"
            elif kind in ("lost", "timeout"):
                s.sent += 1
                s.lost += 1
            else:
                s.error(str(ev.get("e", "error")), str(ev.get("detail", "")))
    for s, rtts in zip(sets, ordered, strict=True):
        s.rtts_ms = [rtts[i] for i in sorted(rtts)]
    return sets


def parse_agent_output(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                events.append(obj)
    return events


def agent_source() -> bytes:
    return resources.files("inferfit.probes").joinpath("latency_agent.py").read_bytes()


def agent_argv(targets: list[tuple[str, int]], settings: Settings, samples: int,
               max_s: float = 3600.0) -> list[str]:
    payload = {"targets": targets, "samples": samples, "interval_ms": settings.interval_ms,
               "timeout_ms": settings.timeout_ms, "max_s": max_s}
    return ["python3", "-", "inferfit-latency", json.dumps(payload, separators=(",", ":"))]


# -- assembling findings --------------------------------------------------------
def region_findings(
    region: Region, jobs: list[Job], settings: Settings, options: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The [[probes.latency.regions]] table for one region, plus notes."""
    stats = summarize([j.result for j in jobs])
    verdict, reason = judge_region(stats, region.budget_ms_p95, options)
    methods = sorted({j.method for j in jobs if j.method != "none"})
    table: dict[str, Any] = {
        "name": region.name,
        "method": "+".join(methods) or "none",
        "targets": [j.spec.text for j in jobs],
        **stats,
        "budget_ms_p95": region.budget_ms_p95,
        "verdict": verdict,
    }
    notes = [f"{region.name}: {j.note}" for j in jobs if j.note]
    if verdict == "unreachable":
        reason = unreachable_reason({j.spec.text: j.result for j in jobs}, settings.timeout_ms)
        table["unreachable_reason"] = reason
    else:
        down = {j.spec.text: j.result for j in jobs if not j.result.rtts_ms}
        if down:
            notes.append(f"{region.name}: some targets did not answer: "
                         f"{unreachable_reason(down, settings.timeout_ms)}")
            if verdict == "ok":
                verdict, reason = "warn", reason + "; a target did not answer"
                table["verdict"] = verdict
    table["verdict_reason"] = reason
    notes += percentile_notes(region.name, int(stats["samples"]))
    if any(j.result.refused for j in jobs):
        notes.append(f"{region.name}: connection refused by a target; the reset still timed "
                     "the round trip")
    per_target = []
    for j in jobs:
        row: dict[str, Any] = {"target": j.spec.text, "method": j.method,
                               **summarize([j.result]), **j.extra}
        if j.result.errors:
            row["error_kind"] = max(j.result.errors, key=lambda k: j.result.errors[k])
            row["error"] = j.result.detail
        per_target.append(row)
    table["per_target"] = per_target
    return table, notes


def summary_line(tables: list[dict[str, Any]]) -> str:
    parts = []
    for t in tables:
        if t["verdict"] == "unreachable":
            parts.append(f"{t['name']} unreachable")
            continue
        bits = [f"p95 {t['rtt_ms_p95']:g} ms"]
        if t.get("budget_ms_p95") is not None:
            bits[0] += f" / {t['budget_ms_p95']:g}"
        if t.get("loss_pct"):
            bits.append(f"{t['loss_pct']:g} % loss")
        parts.append(f"{t['name']} {t['verdict']} ({', '.join(bits)})")
    return f"{len(tables)} region{'s' if len(tables) != 1 else ''}: " + "; ".join(parts)


class LatencyProbe:
    name = "latency"
    title = "Latency"

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        started = time.monotonic()
        try:
            settings = Settings.from_options(ctx.options)
            regions = parse_regions(ctx.config.get("regions"))
        except (RegionConfigError, LatencySettingsError) as exc:
            return ProbeResult.error(
                self.name, f"config: {exc}", kind="bad_config",
                fix=f"correct the key named above (see {EXAMPLE}); nothing was measured",
            )
        if not regions:
            return ProbeResult.skipped(
                self.name,
                f"no regions configured: add [[regions]] with targets to your config "
                f"(see {EXAMPLE}); no traffic was sent",
                kind="no_regions",
            )
        tools = await detect_tools(host)
        jobs = plan(regions, settings.method, tools)
        ctx.progress(Progress(self.name, f"measuring {len(jobs)} target(s) in "
                              f"{len(regions)} region(s), {settings.samples} samples each"))
        console_task = None
        if settings.console and host.transport == "ssh":
            console_task = asyncio.create_task(measure_console(host, settings))
        notes = await run_jobs(host, jobs, settings, tools)
        tables = []
        for r, region in enumerate(regions):
            table, region_notes = region_findings(
                region, [j for j in jobs if j.region == r], settings, ctx.options
            )
            tables.append(table)
            notes += region_notes
        values: dict[str, Any] = {
            "method": "+".join(sorted({j.method for j in jobs if j.method != "none"})) or "none",
            "samples_per_target": settings.samples,
            "interval_ms": settings.interval_ms,
            "timeout_ms": settings.timeout_ms,
            "box_tools": sorted(tools),
        }
        if console_task is not None:
            try:
                values["console"] = await console_task
            except HostError as exc:
                notes.append(f"console-to-box path not measured: {exc.message}")
        elif host.transport != "ssh":
            notes.append("console-to-box path not measured: the box is the local machine")
        values["regions"] = tables
        status = max((VERDICT_STATUS[t["verdict"]] for t in tables),
                     key=lambda s: ("ok", "warn", "fail").index(s))
        return ProbeResult(self.name, status, summary_line(tables),
                           time.monotonic() - started, values=values, notes=notes)

    async def watch(self, host: Host, ctx: ProbeContext) -> AsyncIterator[Sample]:
        """Rolling per-region RTT/loss at 1 Hz (sparkline data) until the consumer closes."""
        from inferfit.probes.latency_live import watch_regions  # live mode only

        async for sample in watch_regions(host, ctx):
            yield sample


async def detect_tools(host: Host) -> set[str]:
    done = await host.run(sh(DETECT), timeout=60)
    return {line.strip() for line in done.stdout.splitlines()} & {"python3", "curl", "ping"}


async def run_jobs(host: Host, jobs: list[Job], settings: Settings, tools: set[str]) -> list[str]:
    """Measure every job concurrently; fill job.result; return notes."""
    notes: list[str] = []
    for j in jobs:  # the kernel-timed handshake beats curl's user-space clock
        j.via_agent = j.method == "http" and "python3" in tools
    tcp = [j for j in jobs if j.method == "tcp" or j.via_agent]
    tasks = []
    if tcp:
        tasks.append(_run_agent(host, tcp, settings, notes))
    tasks += [_run_ping(host, j, settings) for j in jobs if j.method == "icmp"]
    tasks += [_run_curl(host, j, settings) for j in jobs if j.method in ("http", "tcp-curl")]
    await asyncio.gather(*tasks)
    if any(j.method == "tcp" and j.note.startswith("python3") for j in jobs):
        for j in jobs:
            if j.via_agent and j.note.startswith("python3") and j.curl is not None:
                j.result, j.via_agent = j.curl, False
        retry = [j for j in jobs if j.method == "tcp" and j.note.startswith("python3")]
        fallback = tools - {"python3"}
        for j in retry:
            j.method, extra = choose_method(j.spec, settings.method, fallback)
            j.note = (j.note + "; " + extra).strip("; ") if extra else j.note
            j.result = SampleSet()
            if j.method == "none":
                j.result.error("tool", j.note)
        await asyncio.gather(
            *[_run_curl(host, j, settings) for j in retry if j.method in ("http", "tcp-curl")],
            *[_run_ping(host, j, settings) for j in retry if j.method == "icmp"],
        )
    return notes


def _budget_s(settings: Settings) -> float:
    return settings.samples * settings.interval_ms / 1000 + settings.timeout_ms / 1000 + 30


async def _run_agent(host: Host, jobs: list[Job], settings: Settings, notes: list[str]) -> None:
    targets = [(j.spec.host, int(j.spec.port or 0)) for j in jobs]
    done = await host.run(agent_argv(targets, settings, settings.samples),
                          timeout=_budget_s(settings), stdin=agent_source())
    events = parse_agent_output(done.stdout)
    if not any(e.get("ev") == "start" for e in events):
        for j in jobs:  # python3 is there but cannot run the agent: fall back
            j.note = f"python3 could not run the TCP timer ({done.describe()})"
        return
    if not any(e.get("ev") == "end" for e in events):
        notes.append(f"the TCP timer stopped early: {done.describe()}")
    for j, result in zip(jobs, collect_agent(events, len(jobs)), strict=True):
        j.result = result


async def _run_ping(host: Host, job: Job, settings: Settings) -> None:
    gap = max(settings.interval_ms / 1000, 0.2)  # iputils refuses < 0.2 s for non-root
    wait = max(1, math.ceil(settings.timeout_ms / 1000))
    argv = ["ping", "-c", str(settings.samples), "-i", f"{gap:g}", "-W", str(wait), job.spec.host]
    done = await host.run(argv, timeout=_budget_s(settings) + settings.samples * gap)
    text = done.stdout + "\n" + done.stderr
    if done.returncode not in (0, 1) and "invalid" in text.lower() and "-i" in text:
        done = await host.run(["ping", "-c", str(settings.samples), job.spec.host],
                              timeout=_budget_s(settings) + settings.samples)
        text = done.stdout + "\n" + done.stderr
    job.result = parse_ping(text, settings.samples)


async def _run_curl(host: Host, job: Job, settings: Settings) -> None:
    url = job.spec.url or f"telnet://{job.spec.host_port}"
    if job.method == "http" and job.spec.url is None:
        url = f"http://{job.spec.host_port}/"
    to = f"{max(settings.timeout_ms / 1000, 0.1):g}"
    gap = f"{settings.interval_ms / 1000:g}"
    done = await host.run(sh(CURL_LOOP, str(settings.samples), gap, to, url),
                          timeout=_budget_s(settings) + settings.samples * 0.05)
    timings = parse_curl(done.stdout, connect_only=job.method == "tcp-curl")
    job.curl = timings.samples
    if not job.via_agent:
        job.result = timings.samples
    if job.method == "http":
        for key, values in (("http_ms_tls_p50", timings.tls_ms),
                            ("http_ms_first_byte_p50", timings.ttfb_ms)):
            if values:
                job.extra[key] = round(percentile(sorted(values), 50), 3)
        if timings.http_codes:
            job.extra["http_status_last"] = timings.http_codes[-1]


# -- the console-to-box path -------------------------------------------------------
async def measure_console(host: Host, settings: Settings) -> dict[str, Any]:
    """TCP connect to the box's SSH port from here, and the SSH round trip of `true`."""
    connect = getattr(host, "connect", None)
    peer: Any = None
    if connect is not None:
        conn = await connect()
        peer = conn.get_extra_info("peername")
    out: dict[str, Any] = {"vantage": VANTAGE}
    if peer:
        addr, port = str(peer[0]), int(peer[1])
        out["address"] = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        events: list[dict[str, Any]] = []
        await asyncio.to_thread(
            latency_agent.measure, [(addr, port)], settings.samples,
            settings.interval_ms / 1000, settings.timeout_ms / 1000, events.append,
        )
        tcp = summarize(collect_agent(events, 1))
        out["method"] = "tcp"
        out.update(tcp)
    rounds = []
    for _ in range(min(settings.samples, 10)):
        t0 = time.perf_counter()
        done = await host.run(["true"], timeout=settings.timeout_ms / 1000 + 10)
        if done.ok:
            rounds.append((time.perf_counter() - t0) * 1000)
    if rounds:
        out["ssh_exec_samples"] = len(rounds)
        out["ssh_exec_ms_min"] = round(min(rounds), 3)
        out["ssh_exec_ms_p50"] = round(statistics.median(rounds), 3)
        out["ssh_exec_ms_max"] = round(max(rounds), 3)
    return out


@hookimpl
def inferfit_register_probes(register: Callable[[LatencyProbe], None]) -> None:
    register(LatencyProbe())
