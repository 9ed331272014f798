"""Realtime, region, batch and mode rules; ``size()`` runs them all in order."""

from __future__ import annotations

import math
from typing import Any

from inferfit.plugins import sizing_math as sm
from inferfit.plugins.sizing_inputs import Observed, Sourced
from inferfit.plugins.sizing_rules import DAYS_PER_MONTH, Sizer, _round, fig
from inferfit.workload import Workload


def occupancy(s: Sizer) -> Sourced | None:
    """Seconds a request occupies the server (W in Little's law).

    The larger of the observed W (nginx: concurrency_littles_law / qps_mean, the
    box's current traffic) and the estimated E2E for this workload's model — the
    conservative choice when the two disagree; else the E2E p95 budget (an upper bound).
    """
    rt = s.w.realtime
    assert rt is not None
    ng = s.obs.nginx
    found: list[Sourced] = []
    if "concurrency_littles_law" in ng and ng.get("qps_mean") and ng["qps_mean"].value > 0:
        found.append(Sourced(ng["concurrency_littles_law"].value / ng["qps_mean"].value,
                             "observed: probes.nginx.concurrency_littles_law / qps_mean"))
    times = s.model_ms()
    if times is not None:
        found.append(Sourced(times[1] / 1000, "estimated E2E = TTFT + (output − 1) × TPOT "
                             f"(TPOT {s.tpot.source if s.tpot else '?'})"))
    if len(found) == 2:
        hi, lo = sorted(found, key=lambda x: x.value, reverse=True)
        return Sourced(hi.value, f"the larger of {hi.source} and {lo.source} ({lo.value:.2f} s)")
    if found:
        return found[0]
    if rt.e2e_ms_p95:
        s.lack("model time (no nginx findings, no TPOT estimate): used the E2E p95 budget as "
               "the occupancy, an upper bound", 0.1)
        return Sourced(rt.e2e_ms_p95 / 1000, "workload realtime.e2e_ms_p95 (budget, upper bound)")
    s.lack("time per request: no nginx findings, no GPU datasheet, no E2E budget", 0.2)
    return None


def realtime(s: Sizer) -> None:
    rt, pol = s.w.realtime, s.w.sizing
    if rt is None:
        return
    peak = Sourced(rt.qps_peak, "workload realtime.qps_peak") if rt.qps_peak else None
    if peak is None and "qps_peak" in s.obs.nginx:
        peak = s.obs.nginx["qps_peak"]
    if "qps_peak" not in s.obs.nginx:
        s.lack("probes.nginx: no observed QPS or request time", 0.1)
    occ = occupancy(s)
    if peak is None or occ is None:
        return
    required = sm.littles_law(peak.value, occ.value)
    s.required = required
    s.t["required_concurrency"] = _round(required)
    s.t["occupancy_s"] = _round(occ.value)
    figs = [fig("qps_peak", peak.value, "req/s", peak.source),
            fig("time_in_system", occ.value, "s", occ.source)]
    if "concurrency_littles_law" in s.obs.nginx:
        c = s.obs.nginx["concurrency_littles_law"]
        figs.append(fig("observed_concurrency", c.value, "requests", c.source))
    s.reason("littles_law", f"{peak.value:g} req/s × {occ.value:.2f} s ≈ {required:.0f} "
             "requests in flight at peak", "L = λ × W (Little's law)", figs)
    boxes: int | None = None
    if s.cap_inst and s.inst_per_box >= 1:
        inst = sm.replicas_needed(required, s.cap_inst, pol.headroom)
        inst = max(inst, prefill_instances(s, peak, inst))
        boxes = math.ceil(inst / s.inst_per_box)
        s.t["instances_needed"] = inst
        cap_box = s.cap_inst * s.inst_per_box
        rho = sm.utilisation(required, cap_box)
        s.t["utilisation_peak"] = _round(rho)
        cap_figs = [fig("required_concurrency", required, "requests", "littles_law"),
                    fig("concurrency_per_instance", s.cap_inst, "sequences", "kv_capacity"),
                    fig("instances_per_box", s.inst_per_box, "instances",
                        f"gpu_count {s.gpus} / tensor_parallel {s.tp}"),
                    fig("headroom", pol.headroom, "utilisation", "workload sizing.headroom")]
        s.reason("realtime_headroom",
                 f"{inst} instance(s) keep peak utilisation ≤ {pol.headroom:g}: {boxes} box(es) "
                 f"like this one ({s.inst_per_box} instance(s) each)",
                 "instances = max(ceil(required / (per-instance concurrency × headroom)), "
                 "prefill_compute instances); boxes = ceil(instances / instances per box)",
                 cap_figs,
                 action="scale_out" if boxes > 1 else None)
        s.rt_boxes = boxes
        if rho > pol.headroom:
            mult, base = sm.mm1_p99_multiple(min(rho, 0.999)), sm.mm1_p99_multiple(pol.headroom)
            if rho < 1:
                s.t["p99_multiple"] = _round(mult)
            s.reason("mm1_tail_penalty",
                     f"this box alone runs at ρ = {rho:.2f} at peak: "
                     + (f"p99 ≈ {mult:.0f}× the service time" if rho < 1 else
                        "the queue grows without bound (ρ ≥ 1)")
                     + f", vs {base:.0f}× at ρ = {pol.headroom:g}",
                     "M/M/1: p99 ≈ 4.6 / (μ − λ) = 4.6 / (1 − ρ) × service time",
                     [fig("utilisation", rho, "ρ", "required / box concurrency")])
            rate = cap_box * pol.headroom / occ.value
            limits = s.t.setdefault("throttle", {})
            limits["max_concurrency"] = math.floor(cap_box * pol.headroom)
            limits["rate_limit_qps"] = _round(rate)
            if rt.api_keys:
                limits["rate_limit_qps_per_key"] = _round(rate / rt.api_keys)
            s.reason("throttle_at_peak",
                     f"until scaled out, cap at {math.floor(cap_box * pol.headroom)} concurrent "
                     f"requests and {rate:.1f} req/s"
                     + (f" ({rate / rt.api_keys:.2f} per key)" if rt.api_keys else ""),
                     "max concurrency = box concurrency × headroom; rate = that / time in "
                     "system (Little's law); per key = rate / api_keys",
                     [fig("box_concurrency", cap_box, "sequences", "kv_capacity"),
                      fig("time_in_system", occ.value, "s", occ.source)], action="throttle")
    else:
        s.lack("realtime capacity per instance (needs GPU memory and the model): replicas "
               "not computed", 0.0)
    if rt.e2e_ms_p99 and boxes == 1:
        s.rt_boxes = 2
        s.reason("strict_sla_single_node",
                 "a p99 budget on a single box: one restart or GPU fault is a full outage "
                 + (f"of ≈ {s.t['model_load_s']:.0f} s (cold start); " if "model_load_s" in s.t
                    else "; ") + "run 2 boxes (N+1)",
                 "boxes = max(boxes, 2) when e2e_ms_p99 is set",
                 [fig("e2e_ms_p99", rt.e2e_ms_p99, "ms", "workload realtime.e2e_ms_p99")],
                 action="scale_out")
    model_budget(s)
    bandwidth(s, peak)


def prefill_instances(s: Sizer, peak: Sourced, kv_instances: int) -> int:
    """Instances the prompt tokens need in compute (prefill is compute-bound), at headroom."""
    rt, pol = s.w.realtime, s.w.sizing
    if rt is None or s.spec is None or s.params is None or s.t.get("fits") is not True:
        return 0
    rate = sm.prefill_tokens_per_s(s.params.value, s.tp, s.spec.bf16_tflops, pol.prefill_mfu)
    need = peak.value * rt.input_tokens
    inst = sm.replicas_needed(need, rate, pol.headroom)
    if inst > kv_instances:
        s.reason("prefill_compute",
                 f"{peak.value:g} req/s × {rt.input_tokens:,} prompt tokens = {need:,.0f} "
                 f"tokens/s of prefill; one instance does ≈ {rate:,.0f}: {inst} instances at "
                 f"headroom {pol.headroom:g} (more than the {kv_instances} the KV cache asks)",
                 "prefill tokens/s per instance = TP × TFLOPS × 1e12 × MFU / (2 × params); "
                 "instances = ceil(peak QPS × input tokens / (that × headroom))",
                 [fig("qps_peak", peak.value, "req/s", peak.source),
                  fig("input_tokens", rt.input_tokens, "tokens", "workload realtime.input_tokens"),
                  fig("params", s.params.value, "params", s.params.source),
                  fig("bf16_tflops", s.spec.bf16_tflops, "TFLOPS", f"datasheet {s.spec.name}"),
                  fig("prefill_mfu", pol.prefill_mfu, "fraction", "workload sizing.prefill_mfu")])
    return inst


def model_budget(s: Sizer) -> None:
    """The model time alone against the SLO (before any network or queue)."""
    rt = s.w.realtime
    times = s.model_ms()
    if rt is None or times is None:
        return
    checks = [("ttft_ms_p95", rt.ttft_ms_p95, times[0]), ("e2e_ms_p95", rt.e2e_ms_p95, times[1])]
    for key, slo, model in checks:
        if slo and model > slo:
            s.reason("model_time_budget",
                     f"the model alone needs ≈ {model:.0f} ms against {key} {slo:g} ms on this "
                     "GPU: more GPUs per instance (TP), a faster GPU, or fewer output tokens",
                     "E2E = TTFT + (output tokens − 1) × TPOT; TTFT = prefill + TPOT",
                     [fig(key, slo, "ms", f"workload realtime.{key}"),
                      fig("tpot", (s.tpot.value if s.tpot else 0) * 1000, "ms",
                          s.tpot.source if s.tpot else "?"),
                      fig("prefill", (s.prefill.value if s.prefill else 0) * 1000, "ms",
                          s.prefill.source if s.prefill else "not estimated (0)")])


def bandwidth(s: Sizer, peak: Sourced) -> None:
    rt, pol = s.w.realtime, s.w.sizing
    assert rt is not None
    if not rt.response_bytes:
        s.lack("realtime.response_bytes: bandwidth not computed", 0.05)
        return
    need = sm.bandwidth_mbit(peak.value, rt.response_bytes, pol.bandwidth_redundancy)
    s.t["bandwidth_mbit_needed"] = _round(need)
    link = (Sourced(pol.link_mbit, "workload sizing.link_mbit") if pol.link_mbit
            else s.obs.link_mbit)
    figs = [fig("qps_peak", peak.value, "req/s", peak.source),
            fig("response_bytes", rt.response_bytes, "B", "workload realtime.response_bytes"),
            fig("redundancy", pol.bandwidth_redundancy, "×",
                "workload sizing.bandwidth_redundancy")]
    if "bandwidth_mbit_peak" in s.obs.nginx:
        b = s.obs.nginx["bandwidth_mbit_peak"]
        figs.append(fig("observed_peak", b.value, "Mbit/s", b.source))
    if link is None:
        s.lack("link speed (sizing.link_mbit): bandwidth not compared", 0.05)
        return
    figs.append(fig("link", link.value, "Mbit/s", link.source))
    limit = link.value * pol.headroom
    if need > limit:
        boxes = math.ceil(need / limit)
        s.rt_boxes = max(s.rt_boxes or 1, boxes)
        s.reason("link_headroom", f"peak needs {need:.0f} Mbit/s, over {pol.headroom:g} × the "
                 f"{link.value:g} Mbit/s link: spread over {boxes} boxes",
                 "Mbit/s = peak QPS × response bytes × 8 × redundancy / 1e6; boxes = ceil(need /"
                 " (link × headroom))", figs, action="scale_out")


def cold_start(s: Sizer) -> None:
    pol = s.w.sizing
    d = s.obs.seq_read_mib_s
    if s.weights is None:
        return
    if d is None:
        s.lack("probes.disk seq_read_mib_s: cold start not computed", 0.1)
    else:
        load = sm.cold_start_s(s.weights, d.value, pol.loader_mib_s)
        s.t["model_load_s"] = _round(load)
        figs = [fig("weights", s.weights / sm.GIB, "GiB", "weights_bytes"),
                fig("seq_read", d.value, "MiB/s", d.source)]
        if pol.loader_mib_s:
            figs.append(fig("loader", pol.loader_mib_s, "MiB/s", "workload sizing.loader_mib_s"))
        if s.obs.disk_model_load_s:
            figs.append(fig("disk_model_load", s.obs.disk_model_load_s.value, "s",
                            s.obs.disk_model_load_s.source))
        slow = load > pol.cold_start_warn_s
        s.reason("cold_start", f"a cold load takes ≈ {load:.0f} s"
                 + (f", over {pol.cold_start_warn_s:g} s: keep the model resident and a warm "
                    "spare; never restart at peak" if slow else ""),
                 "cold start ≥ model bytes / min(sequential read, loader)", figs)
    mem = s.obs.memory_gib
    if mem is not None and mem.value < s.weights / sm.GIB:
        s.reason("host_memory", f"host RAM {mem.value:g} GiB < weights "
                 f"{s.weights / sm.GIB:.1f} GiB: restarts always read from disk",
                 "warm restart needs RAM ≥ weights (page cache)",
                 [fig("memory", mem.value, "GiB", mem.source)])


def regions(s: Sizer) -> None:
    rt = s.w.realtime
    if rt is None:
        return
    if not s.obs.latency_present:
        s.lack("probes.latency regions: per-region budget not judged", 0.15)
        return
    wanted = set(rt.regions)
    found = [r for r in s.obs.regions if not wanted or r.name in wanted]
    for name in sorted(wanted - {r.name for r in s.obs.regions}):
        s.lack(f"latency region {name!r} (realtime.regions) not in probes.latency", 0.05)
    times = s.model_ms()
    if rt.streaming and rt.ttft_ms_p95:
        slo, slo_src, model = rt.ttft_ms_p95, "workload realtime.ttft_ms_p95", times and times[0]
    elif rt.e2e_ms_p95:
        slo, slo_src, model = rt.e2e_ms_p95, "workload realtime.e2e_ms_p95", times and times[1]
    else:
        slo, slo_src, model = None, "", None
    queue = s.obs.nginx.get("nginx_time_ms_p95") or s.obs.nginx.get("queue_ms_p95")
    if queue is None:
        s.lack("queue time (probes.nginx nginx_time_ms_p95): taken as 0 in region budgets", 0.05)
    rows: list[dict[str, Any]] = []
    far: list[str] = []
    for r in found:
        budget = slo if slo is not None else r.budget_ms_p95
        src = slo_src if slo is not None else f"probes.latency region {r.name} budget_ms_p95"
        row: dict[str, Any] = {"name": r.name, "rtt_ms_p95": r.rtt_ms_p95}
        figs = [fig("rtt_ms_p95", r.rtt_ms_p95, "ms", f"probes.latency.regions[{r.name}]")]
        if budget is None:
            rows.append(row)
            continue
        row["slo_ms"] = budget
        figs.append(fig("slo", budget, "ms", src))
        if r.rtt_ms_p95 >= budget:
            row["verdict"] = "rtt_over"
            far.append(r.name)
            s.reason("rtt_breaks_budget", f"{r.name}: RTT p95 {r.rtt_ms_p95:g} ms alone uses the "
                     f"{budget:g} ms budget: serve these users from a closer box",
                     "RTT p95 ≥ SLO", figs, action="move_closer")
            rows.append(row)
            continue
        q = queue.value if queue else 0.0
        row["queue_ms"] = _round(q)
        if model:
            row["model_ms"] = _round(model)
            total = sm.region_total_ms(r.rtt_ms_p95, q, model)
            row["total_ms"] = _round(total)
            row["verdict"] = "ok" if total <= budget else "over"
            figs += [fig("queue", q, "ms", queue.source if queue else "assumed 0"),
                     fig("model_time", model, "ms", s.tpot.source if s.tpot else "?")]
            s.reason("region_budget", f"{r.name}: {r.rtt_ms_p95:g} + {q:.0f} + {model:.0f} = "
                     f"{total:.0f} ms vs {budget:g} ms: "
                     + ("within budget" if total <= budget else
                        "over budget: reduce model time (TP, smaller model) or queueing"),
                     "total = RTT p95 + queue + model time", figs)
        else:
            row["verdict"] = "ok"
        rows.append(row)
    if rows:
        s.t["regions"] = rows
    if far:
        s.t["move_closer_regions"] = far


def batch(s: Sizer, share: float = 1.0) -> None:
    """Batch throughput, hours, window and unit cost; ``share`` of the box batch may use."""
    b, pol = s.w.batch, s.w.sizing
    if b is None:
        return
    tok_s: Sourced | None = None
    if b.tokens_per_s:
        tok_s = Sourced(b.tokens_per_s, "workload batch.tokens_per_s (measured)")
    elif s.spec and s.tokens is not None and s.params and s.weights and s.kv_tok_gpu:
        seqs = math.floor(sm.max_concurrent_sequences(s.tokens, b.tokens_per_task))
        if seqs >= 1:
            step = sm.decode_step_s(s.weights / s.tp + seqs * b.tokens_per_task * s.kv_tok_gpu,
                                    s.spec.hbm_gb_s, pol.decode_efficiency)
            decode = sm.batch_tokens_per_s(seqs, step) * s.inst_per_box
            prefill = s.inst_per_box * sm.prefill_tokens_per_s(
                s.params.value, s.tp, s.spec.bf16_tflops, pol.prefill_mfu)
            out = b.output_tokens_per_task or b.tokens_per_task
            if b.output_tokens_per_task is None:
                s.lack("batch.output_tokens_per_task: every token counted at decode speed "
                       "(conservative)", 0.05)
            per_task = out / decode + (b.tokens_per_task - out) / prefill
            tok_s = Sourced(b.tokens_per_task / per_task,
                            f"estimate: {seqs} sequences × {s.inst_per_box} instance(s) decode "
                            f"({s.spec.name} {s.spec.hbm_gb_s:g} GB/s × {pol.decode_efficiency:g}"
                            f"), prefill at MFU {pol.prefill_mfu:g}")
    if tok_s is None:
        s.lack("batch throughput (batch.tokens_per_s, or GPU + model to estimate it): batch "
               "hours not computed", 0.2)
        return
    eff = tok_s.value * share
    hours = sm.batch_hours_needed(b.tasks_per_day, b.tokens_per_task, b.retry_rate, eff)
    s.t["batch_tokens_per_s"] = _round(eff)
    s.t["batch_hours_needed"] = _round(hours)
    boxes = max(1, math.ceil(hours / b.window_hours - 1e-9))
    figs = [fig("tasks_per_day", b.tasks_per_day, "tasks", "workload batch.tasks_per_day"),
            fig("tokens_per_task", b.tokens_per_task, "tokens", "workload batch.tokens_per_task"),
            fig("retry_rate", b.retry_rate, "fraction", "workload batch.retry_rate"),
            fig("tokens_per_s", eff, "tokens/s", tok_s.source + (f" × share {share:.2f}"
                                                                  if share < 1 else ""))]
    s.reason("batch_window", f"the daily volume needs {hours:.1f} h of this box against a "
             f"{b.window_hours:g} h window" + (f": {boxes} boxes" if boxes > 1 else ": fits"),
             "hours = tasks × (1 + retry rate) × tokens per task / tokens/s / 3600", figs,
             action="scale_out" if boxes > 1 else None)
    s.batch_boxes = boxes
    c = s.w.cost
    if c is None or c.server_per_month is None:
        s.lack("cost.server_per_month: unit cost not computed", 0.05)
        return
    boxes_cost = boxes if share >= 1 else min(1.0, hours / 24)
    tasks_month = b.tasks_per_day * DAYS_PER_MONTH
    unit = sm.batch_unit_cost(c.server_per_month * boxes_cost, tasks_month, c.storage_per_month,
                              c.transfer_per_gb, (b.bytes_per_task or 0) / 1e9, b.retry_rate)
    s.t["batch_unit_cost"] = _round(unit)
    s.t["currency"] = c.currency
    s.reason("batch_unit_cost", f"{unit:.5f} {c.currency} per completed task",
             "unit = (period cost + storage) / tasks completed + transfer/GB × GB/task × "
             "(1 + retries)",
             [fig("server_per_month", c.server_per_month, c.currency, "workload cost"),
              fig("boxes_charged", boxes_cost, "boxes", "batch_window (share of a day if mixed)"),
              fig("tasks_per_month", tasks_month, "tasks", "tasks_per_day × 30.44")])


def decide(s: Sizer) -> str:
    rt, b, pol = s.w.realtime, s.w.batch, s.w.sizing
    if rt and not b:
        s.reason("prefer_realtime", "synchronous users with latency targets: serve realtime, "
                 f"model resident, utilisation ≤ {pol.headroom:g}", "rule of the field (§3)", [])
        batch(s)
        return "realtime"
    if b and not rt:
        s.reason("prefer_batch", "the work can queue: run batch at saturation; cost per task "
                 "rules", "rule of the field (§3)", [])
        batch(s)
        return "batch"
    mixed = s.obs.mixed
    if "interference_pct" not in mixed:
        s.lack("[mixed] interference A/B (console `m`): batch impact on realtime not measured",
               0.1)
    inter = mixed.get("interference_pct")
    if inter is not None and inter.value >= pol.interference_split_pct:
        figs = [fig("interference", inter.value, "%", inter.source),
                fig("split_threshold", pol.interference_split_pct, "%",
                    "workload sizing.interference_split_pct")]
        for key in ("p95_ms_batch_on", "p95_ms_batch_off"):
            if key in mixed:
                figs.append(fig(key, mixed[key].value, "ms", mixed[key].source))
        s.reason("batch_interference", f"batch raises realtime p95 by {inter.value:g} %: split "
                 "realtime and batch onto separate nodes",
                 "interference = (p95 on − p95 off) / p95 off × 100 ≥ threshold", figs,
                 action="split")
        batch(s)
        return "split"
    required, cap_inst = s.required, s.cap_inst
    if not cap_inst or not s.inst_per_box or required is None:
        s.lack("realtime share of the box (needs GPU memory and targets): reserve not sized", 0.0)
        batch(s)
        return "mixed"
    reserve = required / (cap_inst * s.inst_per_box) / pol.headroom
    if reserve >= 1:
        batch(s)
        s.reason("both_heavy_no_isolation", f"realtime alone needs {reserve:.0%} of the box at "
                 "headroom: no room for batch without hurting p95/p99; split",
                 "reserve = required / box concurrency / headroom ≥ 1",
                 [fig("required_concurrency", required, "requests", "littles_law")],
                 action="split")
        return "split"
    mark = len(s.reasons)
    batch(s, share=1 - reserve)
    hours = s.t.get("batch_hours_needed")
    if isinstance(hours, float | int) and b and hours > b.window_hours:
        del s.reasons[mark:]  # re-size batch for a dedicated box
        batch(s)
        s.reason("both_heavy_no_isolation", f"with {reserve:.0%} reserved for realtime, batch "
                 f"needs {hours:.1f} h > its {b.window_hours:g} h window: split",
                 "batch hours on (1 − reserve) of the box > window",
                 [fig("reserve", reserve * 100, "%", "mixed_reserve")], action="split")
        s.t.pop("reserve_realtime_pct", None)
        return "split"
    cap_box = cap_inst * s.inst_per_box
    s.t["reserve_realtime_pct"] = _round(reserve * 100)
    limits = s.t.setdefault("throttle", {})
    limits["batch_max_concurrency"] = math.floor(cap_box * (1 - reserve))
    s.reason("mixed_reserve", f"reserve {reserve:.0%} of the box for realtime; cap batch at "
             f"{math.floor(cap_box * (1 - reserve))} sequences, pause it at peak, isolate the "
             "queues and watch p95/p99", "reserve = required / box concurrency / headroom",
             [fig("required_concurrency", required, "requests", "littles_law"),
              fig("box_concurrency", cap_box, "sequences", "kv_capacity"),
              fig("headroom", pol.headroom, "utilisation", "workload sizing.headroom")],
             action="reserve_realtime")
    return "mixed"


def size(workload: Workload, obs: Observed) -> Sizer:
    """Run every rule in order; never raises for missing inputs."""
    s = Sizer(workload, obs)
    s.model()
    s.model_time()
    cold_start(s)
    realtime(s)
    regions(s)
    mode = decide(s)
    if s.t.get("fits") is False:
        mode_note = "the model does not fit: sizing below assumes the remedy"
        s.missing.append(mode_note)
    s.t["mode"] = mode
    known = [b for b in (s.rt_boxes, s.batch_boxes) if b is not None]
    if mode == "split":
        if s.rt_boxes is not None:
            s.t["replicas"] = s.rt_boxes
        if s.batch_boxes is not None:
            s.t["batch_replicas"] = s.batch_boxes
    elif known:
        s.t["replicas"] = max(known)
    return s
