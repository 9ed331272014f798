"""The named sizing rules (DESIGN.md §3): from a workload and observed figures to a verdict.

Each rule that is used or fires appends a reason: ``rule``, ``says`` (one
sentence), ``formula`` (the same text as the function in sizing_math), and
``figures`` (name, value, unit, source). A missing input never raises: the
rule that needs it is not judged, the input is listed in ``missing_inputs``
and the confidence drops by the input's weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from inferfit.plugins import sizing_math as sm
from inferfit.plugins.sizing_inputs import Observed, Sourced
from inferfit.workload import Workload

# One line per rule, for docs and `inferfit size --explain`-style listings.
RULES: dict[str, str] = {
    "model_fits": "weights + activations + non-torch + one max-context sequence of KV fit "
                  "under gpu_memory_utilization on each GPU",
    "quantize_to_fit": "the model does not fit; a smaller weight precision would",
    "add_gpus_to_fit": "the model does not fit; more GPUs (tensor parallel) would",
    "kv_capacity": "tokens in the KV cache and concurrent sequences at the profile's context",
    "long_context_memory": "memory near the limit with long contexts: cap tokens per request",
    "littles_law": "required concurrency = peak QPS × time a request occupies the server",
    "realtime_headroom": "instances so that peak utilisation stays ≤ headroom",
    "prefill_compute": "prompt tokens at peak need more instances in compute than in KV cache",
    "mm1_tail_penalty": "this box alone runs hotter than headroom at peak: p99 multiplies",
    "throttle_at_peak": "protect the box at peak: cap concurrency and rate per key",
    "strict_sla_single_node": "a strict SLA (p99 budget) on a single box: keep N+1",
    "model_time_budget": "the model time alone exceeds the TTFT or E2E budget on this GPU",
    "link_headroom": "peak bandwidth must stay well below the link",
    "cold_start": "cold start = model bytes / min(disk read, loader)",
    "host_memory": "host RAM smaller than the weights: no page-cache warm restart",
    "region_budget": "per region: RTT p95 + queue + model time within the SLO",
    "rtt_breaks_budget": "a region whose RTT alone exceeds the SLO: move closer to users",
    "batch_window": "daily batch volume must finish within the window",
    "batch_unit_cost": "cost per completed task",
    "prefer_realtime": "synchronous users with p95/p99 targets: serve realtime with headroom",
    "prefer_batch": "work that can queue: run batch at saturation, cost per task rules",
    "batch_interference": "measured batch interference on realtime p95: split",
    "both_heavy_no_isolation": "realtime and batch both heavy on one box: split",
    "mixed_reserve": "mixed: reserve capacity for realtime, cap batch, pause it at peak",
}
ACTION_ORDER = ("scale_out", "throttle", "split", "reserve_realtime", "quantize", "add_gpus",
                "move_closer")
DAYS_PER_MONTH = 365.25 / 12


def fig(name: str, value: float | int | str, unit: str, source: str) -> dict[str, Any]:
    if isinstance(value, float):
        value = _round(value)
    return {"name": name, "value": value, "unit": unit, "source": source}


def _round(x: float) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    digits = max(2, 4 - math.floor(math.log10(abs(x))))
    return round(x, min(digits, 9))


@dataclass
class Sizer:
    w: Workload
    obs: Observed
    reasons: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    penalty: float = 0.0
    t: dict[str, Any] = field(default_factory=dict)  # the [sizing] table under construction
    # Intermediate figures (None: not computable from the inputs at hand).
    params: Sourced | None = None
    tp: int = 1
    wbytes_param: float = 2.0
    kv_b: float = 2.0
    weights: float | None = None
    kv_tok: float | None = None
    kv_tok_gpu: float | None = None
    kv_figs: list[dict[str, Any]] = field(default_factory=list)
    context: int = 0
    typical: int = 0
    gpu_total: float | None = None
    gpus: int = 0
    inst_per_box: int = 0
    budget_gpu: float | None = None
    tokens: int | None = None
    cap_inst: float | None = None
    tpot: Sourced | None = None
    prefill: Sourced | None = None
    spec: sm.GpuSpec | None = None
    typical_src: str = ""
    required: float | None = None
    rt_boxes: int | None = None
    batch_boxes: int | None = None

    # -- bookkeeping -----------------------------------------------------
    def reason(self, rule: str, says: str, formula: str, figures: list[dict[str, Any]],
               action: str | None = None) -> None:
        r: dict[str, Any] = {"rule": rule, "says": says, "formula": formula, "figures": figures}
        if action:
            r["action"] = action
        self.reasons.append(r)

    @property
    def actions(self) -> list[str]:
        fired = {r["action"] for r in self.reasons if "action" in r}
        return [a for a in ACTION_ORDER if a in fired]

    def lack(self, what: str, weight: float) -> None:
        if what not in self.missing:
            self.missing.append(what)
            self.penalty += weight

    # -- model and memory ------------------------------------------------
    def src(self, key: str) -> str:
        m = self.w.model
        if key in m.from_hf_config:
            return f"config.json {key} ({m.hf_config})"
        return f"workload model.{key}"

    def model(self) -> None:
        m, pol = self.w.model, self.w.sizing
        if m.hf_config and m.hf_config_error:
            self.lack(f"model.hf_config: {m.hf_config_error}",
                      0.1 if m.num_hidden_layers else 0.3)
        if m.params:
            self.params = Sourced(m.params, self.src("params"))
        elif (m.num_hidden_layers and m.hidden_size and m.num_attention_heads
              and m.intermediate_size and m.vocab_size):
            hd = sm.head_dim(m.hidden_size, m.num_attention_heads, m.head_dim)
            est = sm.estimate_params(
                layers=m.num_hidden_layers, hidden_size=m.hidden_size,
                heads=m.num_attention_heads, kv_heads=m.num_key_value_heads or
                m.num_attention_heads, head_dim_=hd, intermediate_size=m.intermediate_size,
                vocab_size=m.vocab_size, tie_word_embeddings=m.tie_word_embeddings,
                experts=m.num_experts)
            self.params = Sourced(float(est), "estimated from config.json (layers, hidden, "
                                  "intermediate, vocab)")
        else:
            self.lack("model.params (or a readable hf_config): weights not computed", 0.3)
        self.tp = m.tensor_parallel
        self.wbytes_param = sm.dtype_bytes(m.weights_dtype_effective) or 2.0
        self.kv_b = sm.dtype_bytes(m.kv_dtype_effective) or 2.0
        if self.params:
            self.weights = sm.weights_bytes(self.params.value, self.wbytes_param)
            self.t["weights_bytes"] = int(self.weights)
            self.t["weights_gib"] = _round(self.weights / sm.GIB)
        if m.num_hidden_layers and m.num_attention_heads and (m.head_dim or m.hidden_size):
            hd = sm.head_dim(m.hidden_size or 0, m.num_attention_heads, m.head_dim)
            kvh = m.num_key_value_heads or m.num_attention_heads
            self.kv_tok = sm.kv_bytes_per_token(m.num_hidden_layers, kvh, hd, self.kv_b)
            self.kv_tok_gpu = sm.kv_bytes_per_token(
                m.num_hidden_layers, sm.kv_heads_per_gpu(kvh, self.tp), hd, self.kv_b)
            self.t["kv_bytes_per_token"] = int(self.kv_tok)
            self.kv_figs = [
                fig("num_hidden_layers", m.num_hidden_layers, "layers",
                    self.src("num_hidden_layers")),
                fig("num_key_value_heads", kvh, "heads", self.src("num_key_value_heads")
                    if m.num_key_value_heads else self.src("num_attention_heads")),
                fig("head_dim", hd, "values", self.src("head_dim") if m.head_dim else
                    "hidden_size / num_attention_heads"),
                fig("kv_bytes", self.kv_b, "B/value", f"kv_cache_dtype {m.kv_dtype_effective}"),
            ]
        else:
            self.lack("model.num_hidden_layers / num_attention_heads / num_key_value_heads / "
                      "hidden_size: KV cache not computed", 0.25)
        self.context = (m.max_context or
                        (self.w.realtime.input_tokens + self.w.realtime.output_tokens
                         if self.w.realtime else None) or
                        (self.w.batch.tokens_per_task if self.w.batch else None) or 0)
        self.typical = (self.w.realtime.input_tokens + self.w.realtime.output_tokens
                        if self.w.realtime else
                        self.w.batch.tokens_per_task if self.w.batch else self.context)
        self.typical_src = ("realtime input + output tokens" if self.w.realtime
                            else "batch.tokens_per_task")
        g = self.obs.gpu_memory_mib
        if g is None:
            self.lack("probes.gpu devices[].memory_total_mib: fit, KV budget and concurrency "
                      "not judged", 0.3)
            return
        self.gpu_total = g.value * sm.MIB
        self.gpus = self.obs.gpu_count or 1
        self.inst_per_box = self.gpus // self.tp
        if self.weights is None or self.kv_tok_gpu is None:
            return
        over = pol.activation_gib * sm.GIB + pol.non_torch_gib * sm.GIB
        self.budget_gpu = sm.kv_budget_bytes(self.gpu_total, pol.gpu_memory_utilization,
                                             self.weights / self.tp, pol.activation_gib * sm.GIB,
                                             pol.non_torch_gib * sm.GIB)
        self.tokens = sm.tokens_in_cache(self.budget_gpu, self.kv_tok_gpu)
        one_seq = self.kv_tok_gpu * self.context
        fits = self.budget_gpu >= one_seq and self.inst_per_box >= 1
        self.t["fits"] = fits
        self.t["kv_budget_bytes"] = int(max(0.0, self.budget_gpu) * self.tp)
        self.t["gpu_count"] = self.gpus
        self.t["instances_per_box"] = self.inst_per_box
        mem_figs = [
            fig("memory_total_mib", g.value, "MiB", g.source),
            fig("gpu_memory_utilization", pol.gpu_memory_utilization, "fraction",
                "workload sizing.gpu_memory_utilization"),
            fig("weights_per_gpu", self.weights / self.tp / sm.GIB, "GiB",
                f"{self.params.source if self.params else '?'} × {self.wbytes_param:g} B "
                f"({m.weights_dtype_effective}) / tensor_parallel {self.tp}"),
            fig("activation", pol.activation_gib, "GiB", "workload sizing.activation_gib"),
            fig("non_torch", pol.non_torch_gib, "GiB", "workload sizing.non_torch_gib"),
            fig("kv_one_sequence", one_seq / sm.GIB, "GiB",
                f"kv_bytes_per_token per GPU × max_context {self.context}"),
        ]
        budget_gib = self.budget_gpu / sm.GIB
        if self.inst_per_box < 1:
            says = (f"tensor_parallel {self.tp} needs {self.tp} GPUs; the box has {self.gpus}")
        elif fits:
            says = (f"fits: {budget_gib:.2f} GiB per GPU left for KV cache after "
                    f"{self.weights / self.tp / sm.GIB:.2f} GiB of weights and "
                    f"{over / sm.GIB:.2f} GiB overhead")
        else:
            says = (f"does not fit: KV budget {budget_gib:.2f} GiB per GPU, one "
                    f"{self.context}-token sequence needs {one_seq / sm.GIB:.2f} GiB")
        self.reason("model_fits", says, "budget = total × gpu_memory_utilization − (weights + "
                    "activations + non-torch); fits when budget ≥ KV of one max_context sequence",
                    mem_figs)
        if not fits:
            self.remedies(over, one_seq)
            return
        kv_cap = sm.max_concurrent_sequences(self.tokens, self.typical)
        self.cap_inst = min(kv_cap, float(pol.max_num_seqs))
        conc_max = sm.max_concurrent_sequences(self.tokens, self.context)
        self.t["max_tokens_in_cache"] = self.tokens * 1
        self.t["max_concurrency"] = _round(conc_max)
        self.t["max_concurrency_typical"] = _round(self.cap_inst)
        self.reason(
            "kv_capacity",
            f"{self.tokens:,} tokens fit in the KV cache per instance: {conc_max:.1f} sequences "
            f"at {self.context:,} tokens, {kv_cap:.1f} at the typical {self.typical:,}"
            + (f" (capped at max_num_seqs {pol.max_num_seqs})" if kv_cap > pol.max_num_seqs
               else ""),
            "KV/token = 2 × layers × kv_heads × head_dim × kv_bytes; tokens = floor(budget / "
            "KV/token); concurrency = tokens / context",
            [*self.kv_figs, fig("kv_budget_per_gpu", budget_gib, "GiB", "model_fits"),
             fig("context", self.context, "tokens", "workload model.max_context"),
             fig("typical", self.typical, "tokens", self.typical_src)])
        if conc_max < pol.min_concurrency_at_max_context:
            self.token_limits("long_context_memory",
                              f"only {conc_max:.1f} max-context sequences fit: memory is near "
                              "the limit with long contexts; cap tokens per request (and avoid "
                              "a single node for a strict SLA)")

    def remedies(self, over: float, one_seq: float) -> None:
        m, pol = self.w.model, self.w.sizing
        assert self.gpu_total is not None
        assert self.params is not None
        assert self.kv_tok_gpu is not None
        usable = self.gpu_total * pol.gpu_memory_utilization - over
        ladder = sm.QUANTIZE_LADDER
        cur = m.weights_dtype_effective
        start = ladder.index(cur) + 1 if cur in ladder else len(ladder)
        kvh = m.num_key_value_heads or m.num_attention_heads or 1
        tp_q = max(1, min(self.tp, self.gpus))  # the TP this box can give one instance
        kv_q = (self.kv_tok_gpu * sm.kv_heads_per_gpu(kvh, tp_q)
                / sm.kv_heads_per_gpu(kvh, self.tp) * self.context)
        for dtype in ladder[start:]:
            wb = sm.weights_bytes(self.params.value, sm.DTYPE_BYTES[dtype]) / tp_q
            if usable - wb >= kv_q:
                self.t["quantize_to"] = dtype
                self.reason("quantize_to_fit", f"{dtype} weights ({wb / sm.GIB:.2f} GiB per GPU) "
                            "would leave room for one max-context sequence",
                            "weights = params × bytes/param; fits when usable − weights ≥ KV "
                            "of one sequence",
                            [fig("params", self.params.value, "params", self.params.source),
                             fig("usable_per_gpu", usable / sm.GIB, "GiB",
                                 "total × utilisation − overhead")], action="quantize")
                break
        for tp in (2, 4, 8, 16, 32, 64):
            if tp <= self.tp:
                continue
            wb = self.weights / tp if self.weights else 0.0
            kv = self.kv_tok_gpu * sm.kv_heads_per_gpu(kvh, tp) / sm.kv_heads_per_gpu(kvh,
                                                                                     self.tp)
            if usable - wb >= kv * self.context:
                self.t["gpus_needed"] = tp
                where = (f"the box has {self.gpus}: set tensor_parallel = {tp}"
                         if tp <= self.gpus else f"the box has only {self.gpus}")
                self.reason("add_gpus_to_fit", f"{tp} GPUs per instance would fit ({where})",
                            "per-GPU weights = weights / TP; per-GPU KV = KV × ceil(kv_heads/TP)"
                            " / kv_heads", [fig("gpu_count", self.gpus, "GPUs",
                                                "probes.gpu.devices")], action="add_gpus")
                break

    def token_limits(self, rule: str, says: str) -> None:
        pol = self.w.sizing
        assert self.tokens is not None
        per_req = math.floor(self.tokens / pol.min_concurrency_at_max_context)
        rt = self.w.realtime
        limits = self.t.setdefault("throttle", {})
        limits["max_total_tokens"] = per_req
        if rt:
            limits["max_input_tokens"] = max(0, per_req - rt.output_tokens)
            limits["max_output_tokens"] = max(0, per_req - rt.input_tokens)
        self.reason(rule, says, "max tokens per request = floor(tokens in cache / "
                    "min_concurrency_at_max_context); max input = that − output tokens",
                    [fig("max_tokens_in_cache", self.tokens, "tokens", "kv_capacity"),
                     fig("min_concurrency_at_max_context", pol.min_concurrency_at_max_context,
                         "sequences", "workload sizing.min_concurrency_at_max_context")],
                    action="throttle")

    # -- model time --------------------------------------------------------
    def model_time(self) -> None:
        """TPOT, prefill and E2E estimates (seconds), with their sources."""
        rt, pol = self.w.realtime, self.w.sizing
        spec = sm.gpu_spec(self.obs.gpu_name) if self.obs.gpu_name else None
        self.spec = spec
        if rt and rt.tpot_ms:
            self.tpot = Sourced(rt.tpot_ms / 1000, "workload realtime.tpot_ms")
        elif spec and self.weights is not None and self.t.get("fits") is True:
            # At planned load an instance runs headroom × its concurrency, each sequence
            # holding the typical context: that KV is read on every decode step.
            seqs = pol.headroom * (self.cap_inst or 0.0)
            kv_read = min(seqs * self.typical * (self.kv_tok_gpu or 0.0),
                          max(0.0, self.budget_gpu or 0.0))
            self.tpot = Sourced(sm.decode_step_s(self.weights / self.tp + kv_read, spec.hbm_gb_s,
                                                 pol.decode_efficiency),
                                f"estimate: (weights/GPU + KV of {seqs:.0f} typical sequences) / "
                                f"({spec.name} {spec.hbm_gb_s:g} GB/s × "
                                f"{pol.decode_efficiency:g})")
        if spec and self.params and rt and self.t.get("fits") is True:
            self.prefill = Sourced(sm.prefill_s(self.params.value, rt.input_tokens, self.tp,
                                                spec.bf16_tflops, pol.prefill_mfu),
                                   f"estimate: 2 × params × input / ({self.tp} × {spec.name} "
                                   f"{spec.bf16_tflops:g} TFLOPS × MFU {pol.prefill_mfu:g})")
        if self.obs.gpu_name and spec is None:
            self.lack(f"GPU {self.obs.gpu_name!r} not in the datasheet table: model time "
                      "not estimated", 0.05)

    def model_ms(self) -> tuple[float, float] | None:
        """(TTFT model ms, E2E model ms), or None when TPOT is unknown."""
        if self.tpot is None or self.w.realtime is None:
            return None
        ttft = (self.prefill.value if self.prefill else 0.0) + self.tpot.value
        return ttft * 1000, sm.e2e_s(ttft, self.w.realtime.output_tokens, self.tpot.value) * 1000
