"""The formulas of the field (DESIGN.md §3), each a small pure function.

Every function states its formula in its docstring; the sizing rules quote the
same formula text in ``[[sizing.reasons]]`` so a reader can recompute each
figure by hand. Units are in the names: ``_bytes``, ``_s``, ``_ms``, ``_mib_s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2

# Bytes per parameter (or per cached value) by dtype name. INT4 is 0.5 byte plus
# one FP16 scale per 128-weight group (GPTQ/AWQ group size 128): 0.5 + 2/128.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0, "float32": 4.0,
    "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0, "half": 2.0,
    "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
    "int4": 0.5 + 2 / 128, "awq": 0.5 + 2 / 128, "gptq": 0.5 + 2 / 128,
}
# Order used when suggesting a smaller precision (quantize action).
QUANTIZE_LADDER: tuple[str, ...] = ("fp32", "bf16", "fp8", "int4")

# Constants of the MM1 tail formula: p99 of the M/M/1 sojourn time is -ln(0.01)/(mu - lambda).
MM1_P99_FACTOR = -math.log(0.01)  # 4.605...


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU model: HBM bandwidth and dense BF16 tensor throughput."""

    name: str
    hbm_gb_s: float
    bf16_tflops: float


# Matched by substring of the nvidia-smi product name, most specific first.
GPU_SPECS: tuple[tuple[str, GpuSpec], ...] = (
    ("GH200", GpuSpec("GH200", 4000.0, 989.0)),
    ("H200", GpuSpec("H200", 4800.0, 989.0)),
    ("H100 NVL", GpuSpec("H100 NVL", 3900.0, 835.0)),
    ("H100 PCIE", GpuSpec("H100 PCIe", 2000.0, 756.0)),
    ("H100", GpuSpec("H100 SXM", 3350.0, 989.0)),
    ("H800", GpuSpec("H800", 3350.0, 989.0)),
    ("B200", GpuSpec("B200", 8000.0, 2250.0)),
    ("A100-SXM4-80GB", GpuSpec("A100 80GB SXM", 2039.0, 312.0)),
    ("A100 80GB PCIE", GpuSpec("A100 80GB PCIe", 1935.0, 312.0)),
    ("A100-PCIE-80GB", GpuSpec("A100 80GB PCIe", 1935.0, 312.0)),
    ("A100", GpuSpec("A100 40GB", 1555.0, 312.0)),
    ("L40S", GpuSpec("L40S", 864.0, 362.0)),
    ("L40", GpuSpec("L40", 864.0, 181.0)),
    ("A10G", GpuSpec("A10G", 600.0, 70.0)),
    ("A10", GpuSpec("A10", 600.0, 125.0)),
    ("L4", GpuSpec("L4", 300.0, 121.0)),
    ("V100", GpuSpec("V100", 900.0, 125.0)),
    ("T4", GpuSpec("T4", 320.0, 65.0)),
    ("P100", GpuSpec("P100", 732.0, 18.7)),
)


def gpu_spec(product_name: str) -> GpuSpec | None:
    """Datasheet figures for an nvidia-smi product name, or None when unknown."""
    upper = product_name.upper()
    for key, spec in GPU_SPECS:
        if key.upper() in upper:
            return spec
    return None


def dtype_bytes(dtype: str) -> float | None:
    """Bytes per value for a dtype name (BF16/FP16 2, FP8/INT8 1, INT4 0.5 + scales)."""
    return DTYPE_BYTES.get(dtype.strip().lower())


# -- memory -------------------------------------------------------------------

def weights_bytes(params: float, bytes_per_param: float) -> float:
    """Weights = params × bytes/param."""
    return params * bytes_per_param


def head_dim(hidden_size: int, num_attention_heads: int, explicit: int | None = None) -> int:
    """head_dim = hidden_size / num_attention_heads, unless the config gives head_dim."""
    if explicit:
        return explicit
    return hidden_size // num_attention_heads


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim_: int, kv_bytes: float) -> float:
    """KV per token = 2 × num_hidden_layers × num_key_value_heads × head_dim × kv_bytes.

    The 2 is K and V. Uses the KV heads (GQA), not the attention heads.
    """
    return 2 * layers * kv_heads * head_dim_ * kv_bytes


def kv_heads_per_gpu(kv_heads: int, tensor_parallel: int) -> int:
    """KV heads each GPU holds = ceil(kv_heads / TP) (replicated when TP > kv_heads)."""
    return max(1, math.ceil(kv_heads / max(1, tensor_parallel)))


def kv_budget_bytes(
    total_bytes: float,
    utilization: float,
    weights_bytes_: float,
    activation_bytes: float,
    non_torch_bytes: float,
) -> float:
    """vLLM's KV budget = total × gpu_memory_utilization − (weights + activations + non-torch).

    Per GPU: ``weights_bytes_`` is this GPU's share (weights / TP). Negative
    means the model does not fit.
    """
    return total_bytes * utilization - (weights_bytes_ + activation_bytes + non_torch_bytes)


def tokens_in_cache(budget_bytes: float, kv_bytes_per_token_: float) -> int:
    """Tokens that fit = floor(KV budget / KV bytes per token); 0 when the budget is negative."""
    if budget_bytes <= 0 or kv_bytes_per_token_ <= 0:
        return 0
    return math.floor(budget_bytes / kv_bytes_per_token_)


def max_concurrent_sequences(tokens: int, context_tokens: int) -> float:
    """Max concurrency = tokens in cache / tokens per sequence (vLLM's "Maximum concurrency")."""
    return tokens / context_tokens if context_tokens > 0 else 0.0


# -- load and queues ----------------------------------------------------------

def littles_law(qps: float, seconds_in_system: float) -> float:
    """Concurrency L = λ × W (requests/s × seconds a request occupies the server)."""
    return qps * seconds_in_system


def replicas_needed(required_concurrency: float, per_replica: float, headroom: float) -> int:
    """Replicas = ceil(required concurrency / (concurrency per replica × headroom)); ≥ 1."""
    if per_replica <= 0 or headroom <= 0:
        raise ValueError("per-replica capacity and headroom must be positive")
    return max(1, math.ceil(required_concurrency / (per_replica * headroom) - 1e-9))


def utilisation(offered: float, capacity: float) -> float:
    """ρ = λ / μ (offered load over capacity, same unit)."""
    return offered / capacity if capacity > 0 else math.inf


def mm1_p99_s(mu: float, lam: float) -> float:
    """M/M/1 p99 time in system ≈ 4.6 / (μ − λ) seconds (infinite when λ ≥ μ)."""
    return MM1_P99_FACTOR / (mu - lam) if mu > lam else math.inf


def mm1_p99_multiple(rho: float) -> float:
    """p99 / service time = 4.6 / (1 − ρ): ≈ 9× at 50 %, 23× at 80 %, 46× at 90 %."""
    return MM1_P99_FACTOR / (1 - rho) if rho < 1 else math.inf


def bandwidth_mbit(qps_peak: float, response_bytes: float, redundancy: float) -> float:
    """Peak bandwidth = peak QPS × mean response bytes × 8 × redundancy, in Mbit/s."""
    return qps_peak * response_bytes * 8 * redundancy / 1e6


def cold_start_s(model_bytes: float, seq_read_mib_s: float,
                 loader_mib_s: float | None = None) -> float:
    """Cold start ≥ model bytes / min(sequential read, loader throughput)."""
    rate = seq_read_mib_s if loader_mib_s is None else min(seq_read_mib_s, loader_mib_s)
    if rate <= 0:
        return math.inf
    return model_bytes / (rate * MIB)


# -- model time ---------------------------------------------------------------

def decode_step_s(bytes_read_per_gpu: float, hbm_gb_s: float, efficiency: float) -> float:
    """Decode step (memory-bound) = bytes read per GPU / (HBM GB/s × 1e9 × efficiency).

    Bytes read per step = this GPU's weights + the KV of the sequences in the batch.
    """
    return bytes_read_per_gpu / (hbm_gb_s * 1e9 * efficiency)


def prefill_s(params: float, tokens: float, gpus: int, tflops: float, mfu: float) -> float:
    """Prefill (compute-bound) = 2 × params × tokens / (GPUs × TFLOPS × 1e12 × MFU)."""
    return 2 * params * tokens / (gpus * tflops * 1e12 * mfu)


def prefill_tokens_per_s(params: float, gpus: int, tflops: float, mfu: float) -> float:
    """Prefill throughput = GPUs × TFLOPS × 1e12 × MFU / (2 × params) tokens/s."""
    return gpus * tflops * 1e12 * mfu / (2 * params)


def e2e_s(ttft_s: float, output_tokens: int, tpot_s: float) -> float:
    """E2E = TTFT + (output tokens − 1) × TPOT."""
    return ttft_s + max(0, output_tokens - 1) * tpot_s


def region_total_ms(rtt_ms_p95: float, queue_ms: float, model_ms: float) -> float:
    """Region budget used = RTT p95 + queue + model time (compared with the SLO)."""
    return rtt_ms_p95 + queue_ms + model_ms


# -- batch --------------------------------------------------------------------

def batch_tokens_per_s(sequences: float, step_s: float) -> float:
    """Decode throughput = sequences in the batch / decode step time (tokens/s)."""
    return sequences / step_s if step_s > 0 else 0.0


def batch_hours_needed(tasks: float, tokens_per_task: float, retry_rate: float,
                       tokens_per_s: float) -> float:
    """Hours = tasks × (1 + retry rate) × tokens per task / tokens per second / 3600."""
    if tokens_per_s <= 0:
        return math.inf
    return tasks * (1 + retry_rate) * tokens_per_task / tokens_per_s / 3600


def batch_unit_cost(period_cost: float, tasks_completed: float, storage_cost: float = 0.0,
                    transfer_per_gb: float = 0.0, gb_per_task: float = 0.0,
                    retry_rate: float = 0.0) -> float:
    """Unit cost = (period cost + storage) / tasks completed + transfer/GB × GB/task × (1 + retry).

    Retries cost GPU time (already inside the period cost) and transfer again.
    """
    if tasks_completed <= 0:
        return math.inf
    return ((period_cost + storage_cost) / tasks_completed
            + transfer_per_gb * gb_per_task * (1 + retry_rate))


def estimate_params(
    *,
    layers: int,
    hidden_size: int,
    heads: int,
    kv_heads: int,
    head_dim_: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool = False,
    experts: int = 1,
) -> int:
    """Params of a Llama-style decoder from its config.json.

    per layer = hidden × heads × head_dim × 2 (Q, O) + hidden × kv_heads × head_dim × 2 (K, V)
                + 3 × hidden × intermediate × experts (gate, up, down) + 2 × hidden (norms);
    total = layers × per layer + vocab × hidden × (1 if tied else 2) + hidden.
    Llama-3-8B → 8.03e9.
    """
    attn = 2 * hidden_size * heads * head_dim_ + 2 * hidden_size * kv_heads * head_dim_
    mlp = 3 * hidden_size * intermediate_size * max(1, experts)
    per_layer = attn + mlp + 2 * hidden_size
    embed = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    return layers * per_layer + embed + hidden_size
