"""What sizing reads from findings: each figure with the probe key it came from.

Pure and forgiving: any probe may be missing, errored, skipped, or hold a
value of the wrong type; such a figure is simply absent (``None``) and the
rules list it as a missing input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inferfit.findings import Findings


@dataclass(frozen=True)
class Sourced:
    """A number and where it came from (``probes.disk.seq_read_mib_s``, ``workload ...``)."""

    value: float
    source: str


@dataclass(frozen=True)
class Region:
    name: str
    rtt_ms_p95: float
    budget_ms_p95: float | None = None
    loss_pct: float | None = None


@dataclass
class Observed:
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_memory_mib: Sourced | None = None  # smallest GPU on the box
    seq_read_mib_s: Sourced | None = None
    disk_model_load_s: Sourced | None = None
    nginx: dict[str, Sourced] = field(default_factory=dict)
    regions: list[Region] = field(default_factory=list)
    latency_present: bool = False
    memory_gib: Sourced | None = None
    link_mbit: Sourced | None = None
    mixed: dict[str, Sourced] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _num(table: Mapping[str, Any] | None, key: str) -> float | None:
    if not isinstance(table, Mapping):
        return None
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _probe(findings: Findings, name: str) -> dict[str, Any] | None:
    result = findings.probes.get(name)
    if result is None:
        return None
    return result.values if isinstance(result.values, dict) else None


NGINX_KEYS = ("qps_mean", "qps_peak", "request_time_ms_p50", "request_time_ms_p95",
              "request_time_ms_p99", "concurrency_littles_law", "nginx_time_ms_p95",
              "queue_ms_p95", "bandwidth_mbit_peak")
MIXED_KEYS = ("p95_ms_batch_on", "p95_ms_batch_off", "p99_ms_batch_on", "p99_ms_batch_off",
              "interference_pct")


def observe(findings: Findings) -> Observed:
    """Collect the figures sizing uses from whatever probes ran (pure)."""
    obs = Observed()
    gpu = _probe(findings, "gpu")
    devices = gpu.get("devices") if gpu else None
    if isinstance(devices, list):
        mems = [(i, _num(d, "memory_total_mib")) for i, d in enumerate(devices)
                if isinstance(d, Mapping)]
        known = [(i, m) for i, m in mems if m is not None and m > 0]
        if known:
            i, smallest = min(known, key=lambda im: im[1])
            obs.gpu_memory_mib = Sourced(smallest, f"probes.gpu.devices[{i}].memory_total_mib")
            obs.gpu_count = len(known)
            name = devices[i].get("name")
            obs.gpu_name = name if isinstance(name, str) else None
            if len(known) < len(mems):
                obs.notes.append(f"{len(mems) - len(known)} GPU(s) without memory_total_mib "
                                 "were left out")
    disk = _probe(findings, "disk")
    v = _num(disk, "seq_read_mib_s")
    if v is not None and v > 0:
        obs.seq_read_mib_s = Sourced(v, "probes.disk.seq_read_mib_s")
    v = _num(disk, "model_load_s")
    if v is not None:
        obs.disk_model_load_s = Sourced(v, "probes.disk.model_load_s")
    nginx = _probe(findings, "nginx")
    for key in NGINX_KEYS:
        v = _num(nginx, key)
        if v is not None and v >= 0:
            obs.nginx[key] = Sourced(v, f"probes.nginx.{key}")
    latency = _probe(findings, "latency")
    regions = latency.get("regions") if latency else None
    if isinstance(regions, list):
        obs.latency_present = True
        for i, r in enumerate(regions):
            if not isinstance(r, Mapping):
                continue
            rtt = _num(r, "rtt_ms_p95")
            name = r.get("name") if isinstance(r.get("name"), str) else f"region {i}"
            if rtt is None:
                obs.notes.append(f"latency region {name!r} has no rtt_ms_p95 (unreachable?)")
                continue
            obs.regions.append(Region(str(name), rtt, _num(r, "budget_ms_p95"),
                                      _num(r, "loss_pct")))
    system = _probe(findings, "system")
    v = _num(system, "memory_gib")
    if v is not None:
        obs.memory_gib = Sourced(v, "probes.system.memory_gib")
    elif _num(findings.target.facts, "memory_gib") is not None:
        obs.memory_gib = Sourced(float(findings.target.facts["memory_gib"]), "target.memory_gib")
    for key in ("link_mbit", "nic_speed_mbit"):
        v = _num(system, key)
        if v is not None and v > 0:
            obs.link_mbit = Sourced(v, f"probes.system.{key}")
            break
    mixed = findings.sections.get("mixed")
    for key in MIXED_KEYS:
        v = _num(mixed, key)
        if v is not None:
            obs.mixed[key] = Sourced(v, f"mixed.{key}")
    if ("interference_pct" not in obs.mixed and "p95_ms_batch_on" in obs.mixed
            and "p95_ms_batch_off" in obs.mixed and obs.mixed["p95_ms_batch_off"].value > 0):
        on, off = obs.mixed["p95_ms_batch_on"].value, obs.mixed["p95_ms_batch_off"].value
        obs.mixed["interference_pct"] = Sourced(
            round((on - off) / off * 100, 1), "mixed.p95_ms_batch_on/off")
    return obs
