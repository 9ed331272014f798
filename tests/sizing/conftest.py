"""Builders for sizing scenarios: findings of a box and workload profiles as plain dicts."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inferfit.findings import Findings, ProbeResult, Target
from inferfit.workload import Workload, parse_workload

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "sizing"
REPO = HERE.parent.parent
WORKLOADS = REPO / "configs" / "workloads"

H100 = ("NVIDIA H100 80GB HBM3", 81559)
L4 = ("NVIDIA L4", 23034)
T4 = ("Tesla T4", 15360)

LLAMA3_8B: dict[str, Any] = {
    "name": "Llama-3-8B", "params": 8_030_261_248, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
    "weights_dtype": "bf16", "max_context": 8192,
}
LLAMA3_70B: dict[str, Any] = {
    "name": "Llama-3.1-70B", "params": 70_553_706_496, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
    "weights_dtype": "bf16", "tensor_parallel": 4, "max_context": 131072,
}
CHAT: dict[str, Any] = {
    "qps_mean": 12.0, "qps_peak": 20.0, "input_tokens": 800, "output_tokens": 300,
    "ttft_ms_p95": 300, "e2e_ms_p95": 8000, "response_bytes": 2400, "streaming": True,
}
NIGHTLY: dict[str, Any] = {
    "tasks_per_day": 200000, "window_hours": 6, "tokens_per_task": 2500,
    "output_tokens_per_task": 300, "retry_rate": 0.02, "bytes_per_task": 12000,
}
NGINX: dict[str, Any] = {
    "qps_mean": 9.8, "qps_peak": 18.0, "request_time_ms_p95": 6200.0, "nginx_time_ms_p95": 35.0,
    "concurrency_littles_law": 41.2, "bandwidth_mbit_peak": 0.41,
}
REGIONS: list[dict[str, Any]] = [
    {"name": "eu-west", "rtt_ms_p95": 12.4, "budget_ms_p95": 50.0},
    {"name": "us-east", "rtt_ms_p95": 88.1, "budget_ms_p95": 100.0},
    {"name": "ap-southeast", "rtt_ms_p95": 318.0, "budget_ms_p95": 150.0},
]


def findings(
    gpu: tuple[str, int] | None = H100,
    gpus: int = 8,
    disk_mib_s: float | None = 6650.0,
    nginx: dict[str, Any] | None = None,
    regions: list[dict[str, Any]] | None = None,
    memory_gib: float | None = 2015.56,
    mixed: dict[str, Any] | None = None,
) -> Findings:
    f = Findings(Target("box", "sre@box", "ssh"),
                 created=dt.datetime(2026, 11, 30, 4, 42, 19, tzinfo=dt.UTC))
    if memory_gib is not None:
        f.probes["system"] = ProbeResult("system", "ok", "test", values={"memory_gib": memory_gib})
    if gpu is not None:
        devices = [{"index": i, "name": gpu[0], "memory_total_mib": gpu[1]} for i in range(gpus)]
        f.probes["gpu"] = ProbeResult("gpu", "ok", "test", values={"devices": devices})
    if disk_mib_s is not None:
        f.probes["disk"] = ProbeResult("disk", "ok", "test",
                                       values={"seq_read_mib_s": disk_mib_s})
    if nginx is not None:
        f.probes["nginx"] = ProbeResult("nginx", "ok", "test", values=dict(nginx))
    if regions is not None:
        f.probes["latency"] = ProbeResult("latency", "ok", "test",
                                          values={"regions": copy.deepcopy(regions)})
    if mixed is not None:
        f.sections["mixed"] = dict(mixed)
    return f


def workload(model: dict[str, Any] | None = None, *, realtime: dict[str, Any] | None = None,
             batch: dict[str, Any] | None = None, cost: dict[str, Any] | None = None,
             sizing: dict[str, Any] | None = None, **model_changes: Any) -> Workload:
    doc: dict[str, Any] = {"name": "test", "model": {**(model or LLAMA3_8B), **model_changes}}
    for key, table in (("realtime", realtime), ("batch", batch), ("cost", cost),
                       ("sizing", sizing)):
        if table is not None:
            doc[key] = dict(table)
    return parse_workload(doc, "test.toml")


@pytest.fixture
def make_findings() -> Callable[..., Findings]:
    return findings


@pytest.fixture
def make_workload() -> Callable[..., Workload]:
    return workload


def _chat(**changes: Any) -> dict[str, Any]:
    return {**CHAT, **changes}


MIXED_RT: dict[str, Any] = _chat(qps_mean=4.0, qps_peak=10.0, input_tokens=1200,
                                 output_tokens=250, ttft_ms_p95=600, e2e_ms_p95=10000)
MIXED_BATCH: dict[str, Any] = {"tasks_per_day": 80000, "window_hours": 24,
                               "tokens_per_task": 4000, "output_tokens_per_task": 500}
COST: dict[str, Any] = {"server_per_month": 2500.0, "storage_per_month": 150.0,
                        "transfer_per_gb": 0.05}
INTERFERENCE: dict[str, Any] = {"p95_ms_batch_on": 9100.0, "p95_ms_batch_off": 6200.0,
                                "interference_pct": 46.8}
L4_BOX: dict[str, Any] = {"gpu": L4, "gpus": 1, "disk_mib_s": 505.0, "memory_gib": 62.7}
LONG_RT: dict[str, Any] = _chat(qps_mean=1.5, qps_peak=4.0, input_tokens=24000, output_tokens=800,
                                ttft_ms_p95=4000, e2e_ms_p95=45000, response_bytes=6000)

# name -> (findings, workload): one box and one profile each, built fresh per call.
SCENARIOS: dict[str, Callable[[], tuple[Findings, Workload]]] = {
    "chat_h100": lambda: (findings(nginx=NGINX, regions=REGIONS),
                          workload(realtime=CHAT, sizing={"link_mbit": 10000})),
    "chat_h100_p99": lambda: (findings(nginx=NGINX, regions=REGIONS),
                              workload(realtime=_chat(e2e_ms_p99=12000))),
    "chat_h100_far_ok": lambda: (findings(nginx=NGINX, regions=REGIONS),
                                 workload(realtime=_chat(ttft_ms_p95=400))),
    "chat_h100_region_over": lambda: (
        findings(nginx=NGINX, regions=[{"name": "far", "rtt_ms_p95": 250.0}]),
        workload(realtime=CHAT)),
    "chat_slow_link": lambda: (findings(nginx=NGINX, regions=REGIONS),
                               workload(realtime=CHAT, sizing={"link_mbit": 0.5})),
    "chat_l4": lambda: (findings(**L4_BOX), workload(realtime=_chat(api_keys=50))),
    "chat_no_probes": lambda: (findings(gpu=None, disk_mib_s=None, memory_gib=None),
                               workload(realtime=CHAT)),
    "70b_tp4_h100": lambda: (findings(nginx=NGINX), workload(LLAMA3_70B, realtime=LONG_RT)),
    "70b_tp1_h100": lambda: (findings(), workload(LLAMA3_70B, realtime=LONG_RT,
                                                  tensor_parallel=1)),
    "70b_l4": lambda: (findings(**L4_BOX), workload(LLAMA3_70B, realtime=LONG_RT)),
    "8b_t4": lambda: (findings(gpu=T4, gpus=1), workload(realtime=CHAT)),
    "nightly_h100": lambda: (findings(), workload(batch=NIGHTLY, cost=COST)),
    "nightly_l4": lambda: (findings(**L4_BOX), workload(batch=NIGHTLY, cost=COST)),
    "nightly_no_cost": lambda: (findings(), workload(batch=NIGHTLY)),
    "mixed_h100": lambda: (findings(nginx=NGINX),
                           workload(realtime=MIXED_RT, batch=MIXED_BATCH, cost=COST)),
    "mixed_h100_interference": lambda: (
        findings(nginx=NGINX, mixed=INTERFERENCE),
        workload(realtime=MIXED_RT, batch=MIXED_BATCH)),
    "mixed_h100_low_interference": lambda: (
        findings(nginx=NGINX, mixed={**INTERFERENCE, "interference_pct": 8.0}),
        workload(realtime=MIXED_RT, batch=MIXED_BATCH)),
    "mixed_l4": lambda: (findings(**L4_BOX), workload(realtime=MIXED_RT, batch=MIXED_BATCH)),
}


@pytest.fixture
def scenario() -> Callable[[str], tuple[Findings, Workload]]:
    return lambda name: SCENARIOS[name]()
