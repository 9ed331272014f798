"""Interference A/B: what batch work costs realtime latency on the same box.

One measured cycle: realtime latency with batch running, then paused (with a
lease this cycle renews), then running again. Latency comes from an HTTP probe
run *on the box* (``python3``, bounded request count and concurrency) against
``[batch] measure_url``, so the network between laptop and box is not in the
figures. GPU utilisation is sampled once per phase when ``nvidia-smi`` exists.

The result is the ``[mixed]`` findings section (see docs/mixed.md):
``p95_ms_batch_on``, ``p95_ms_batch_off``, ``p99_ms_batch_on``, ``p99_ms_batch_off``,
``interference_pct`` (p95 on vs off), ``samples``, ``method`` and friends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfit.api import BatchController, Progress
from inferfit.hosts.base import Host, HostError
from inferfit.plugins.batch_common import BatchRefused
from inferfit.plugins.batch_session import BatchSession

MAX_REQUESTS = 5000
MAX_CONCURRENCY = 32
METHOD = "http_probe"

# Runs on the box: python3 -c PROBE URL REQUESTS CONCURRENCY TIMEOUT_S -> one JSON line.
PROBE = r"""
import json, sys, threading, time, urllib.error, urllib.request
url, n, conc, tmo = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
lat, errors, codes, lock = [], [], {}, threading.Lock()
left = [n]
def take():
    with lock:
        if left[0] <= 0:
            return False
        left[0] -= 1
        return True
def worker():
    while take():
        t0 = time.perf_counter()
        code = 0
        try:
            with urllib.request.urlopen(url, timeout=tmo) as r:
                r.read()
                code = r.status
        except urllib.error.HTTPError as e:
            code = e.code
        except Exception as e:
            with lock:
                errors.append(type(e).__name__ + ": " + str(e)[:120])
            continue
        ms = (time.perf_counter() - t0) * 1000.0
        with lock:
            codes[str(code)] = codes.get(str(code), 0) + 1
            if 200 <= code < 400:
                lat.append(round(ms, 3))
            else:
                errors.append("HTTP %d" % code)
ts = [threading.Thread(target=worker, daemon=True) for _ in range(conc)]
t0 = time.perf_counter()
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps({"lat_ms": lat, "errors": len(errors), "first_error": errors[:1],
                  "codes": codes, "wall_s": round(time.perf_counter() - t0, 3)}))
"""

GPU_QUERY = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]


@dataclass
class Phase:
    name: str  # "on" | "off"
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    wall_s: float = 0.0
    gpu_util_pct: float | None = None


@dataclass(frozen=True)
class ProbeSettings:
    url: str
    requests: int
    concurrency: int
    timeout_s: float
    settle_s: float

    @classmethod
    def from_options(cls, options: Mapping[str, Any], **override: Any) -> ProbeSettings:
        def pick(key: str, default: Any) -> Any:
            value = override.get(key)
            return options.get(f"measure_{key}", default) if value is None else value

        url = str(pick("url", "") or "")
        if not url.startswith(("http://", "https://")):
            raise BatchRefused(
                "interference measurement needs [batch] measure_url (http:// or https://)",
                kind="not_configured",
                fix='set measure_url to the realtime endpoint as seen from the box, e.g. '
                '"http://127.0.0.1:8000/health"',
            )
        requests, conc = int(pick("requests", 200)), int(pick("concurrency", 4))
        if not 1 <= requests <= MAX_REQUESTS or not 1 <= conc <= MAX_CONCURRENCY:
            raise BatchRefused(
                f"measure_requests must be 1..{MAX_REQUESTS} and measure_concurrency "
                f"1..{MAX_CONCURRENCY} (got {requests}, {conc})", kind="config",
            )
        return cls(url, requests, conc, float(pick("timeout_s", 5.0)),
                   max(0.0, float(pick("settle_s", 1.0))))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), like numpy's default; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def parse_probe(text: str) -> dict[str, Any]:
    """The probe's JSON line (the last line that parses)."""
    for line in reversed(text.strip().splitlines()):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("lat_ms"), list):
            return doc
    raise ValueError("no result line from the HTTP probe")


def parse_gpu_util(text: str) -> float | None:
    vals = []
    for line in text.splitlines():
        try:
            vals.append(float(line.strip()))
        except ValueError:
            continue
    return round(sum(vals) / len(vals), 1) if vals else None


def summarize(phases: Sequence[Phase], settings: ProbeSettings, controller: str) -> dict[str, Any]:
    """The [mixed] section from measured phases (pure)."""
    on = [v for p in phases if p.name == "on" for v in p.latencies_ms]
    off = [v for p in phases if p.name == "off" for v in p.latencies_ms]
    section: dict[str, Any] = {
        "method": METHOD,
        "url": settings.url,
        "controller": controller,
        "phases": [p.name for p in phases],
        "requests_per_phase": settings.requests,
        "concurrency": settings.concurrency,
        "samples": len(on) + len(off),
        "samples_batch_on": len(on),
        "samples_batch_off": len(off),
        "errors": sum(p.errors for p in phases),
    }
    for label, values in (("on", on), ("off", off)):
        for q in (50, 95, 99):
            value = percentile(values, q)
            if value is not None:
                section[f"p{q}_ms_batch_{label}"] = round(value, 2)
        gpu = [p.gpu_util_pct for p in phases if p.name == label and p.gpu_util_pct is not None]
        if gpu:
            section[f"gpu_util_pct_batch_{label}"] = round(sum(gpu) / len(gpu), 1)
    p95_on, p95_off = section.get("p95_ms_batch_on"), section.get("p95_ms_batch_off")
    if p95_on is not None and p95_off:
        section["interference_pct"] = round((p95_on - p95_off) / p95_off * 100.0, 1)
    p99_on, p99_off = section.get("p99_ms_batch_on"), section.get("p99_ms_batch_off")
    if p99_on is not None and p99_off:
        section["interference_p99_pct"] = round((p99_on - p99_off) / p99_off * 100.0, 1)
    return section


async def run_phase(host: Host, name: str, settings: ProbeSettings) -> Phase:
    """One bounded HTTP probe on the box, with a GPU utilisation sample alongside."""
    budget = settings.timeout_s * (settings.requests / settings.concurrency + 2) + 30
    probe = host.run(["python3", "-c", PROBE, settings.url, str(settings.requests),
                      str(settings.concurrency), str(settings.timeout_s)], timeout=budget)
    gpu = host.run(GPU_QUERY, timeout=15)
    done, gpu_done = await asyncio.gather(probe, gpu, return_exceptions=True)
    if isinstance(done, BaseException):
        raise done
    if done.not_found:
        raise BatchRefused(f"python3 is not installed on {host.name}", kind="no_python",
                           fix="install python3 on the box (the probe runs there)")
    try:
        doc = parse_probe(done.stdout)
    except ValueError:
        raise BatchRefused(f"the HTTP probe failed on {host.name}: {done.describe()}",
                           kind="probe_failed") from None
    phase = Phase(name, [float(v) for v in doc["lat_ms"]], int(doc.get("errors", 0)),
                  "; ".join(doc.get("first_error") or []), float(doc.get("wall_s", 0.0)))
    if not isinstance(gpu_done, BaseException) and gpu_done.ok:
        phase.gpu_util_pct = parse_gpu_util(gpu_done.stdout)
    if not phase.latencies_ms:
        raise BatchRefused(
            f"no request to {settings.url} succeeded from {host.name} "
            f"({phase.errors} errors: {phase.first_error})", kind="endpoint_down",
            fix="check [batch] measure_url from the box (curl it there)",
        )
    return phase


async def measure_interference(
    host: Host,
    controller: BatchController,
    options: Mapping[str, Any],
    *,
    progress: Callable[[Progress], None] | None = None,
    **override: Any,
) -> dict[str, Any]:
    """Run on / off / on and return the [mixed] section. Always leaves batch running.

    ``override`` may set url, requests, concurrency, timeout_s, settle_s.
    """
    settings = ProbeSettings.from_options(options, **override)
    report = progress or (lambda _p: None)
    started = time.monotonic()
    session = BatchSession(host, controller, options)
    state = await session.refresh()
    if state.state != "running":
        raise BatchRefused(
            f"batch is {state.state.replace('_', ' ')} on {host.name}, not running: the "
            "'batch on' phases would measure nothing", kind="not_running",
            fix="resume the batch first (inferfit batch resume), then measure",
        )
    phases: list[Phase] = []
    try:
        report(Progress("mixed", "batch on: probing", 0.0))
        phases.append(await run_phase(host, "on", settings))
        report(Progress("mixed", "pausing batch", 1 / 3))
        await session.pause()
        await asyncio.sleep(settings.settle_s)
        phases.append(await run_phase(host, "off", settings))
        report(Progress("mixed", "resuming batch", 2 / 3))
        await session.resume()
        await asyncio.sleep(settings.settle_s)
        phases.append(await run_phase(host, "on", settings))
    finally:
        if session.paused_by_us:  # the lease watchdog resumes it if this fails
            with contextlib.suppress(HostError, BatchRefused):
                await session.close()
    section = summarize(phases, settings, controller.name)
    section["duration_s"] = round(time.monotonic() - started, 1)
    report(Progress("mixed", "done", 1.0))
    return section
