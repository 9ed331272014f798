"""The formulas, against numbers anyone can recompute by hand (DESIGN.md §3, issue 5)."""

from __future__ import annotations

import math

import pytest

from inferfit.plugins import sizing_math as sm

GIB = 1024**3


def test_llama3_8b_kv_bytes_per_token_is_131072_and_1_gib_per_8k_tokens() -> None:
    # 2 × 32 layers × 8 KV heads × 128 head_dim × 2 bytes (BF16)
    kv = sm.kv_bytes_per_token(32, 8, sm.head_dim(4096, 32), sm.dtype_bytes("bf16") or 0)
    assert kv == 131_072
    assert kv * 8192 == GIB


def test_using_attention_heads_instead_of_kv_heads_is_4x_too_big() -> None:
    assert sm.kv_bytes_per_token(32, 32, 128, 2) == 4 * sm.kv_bytes_per_token(32, 8, 128, 2)


def test_littles_law_20_qps_times_8_s_is_160_in_flight() -> None:
    assert sm.littles_law(20, 8) == 160


@pytest.mark.parametrize(
    ("total_gib", "budget_gib", "tokens", "concurrency"),
    [
        # torch's view of an 80 GB H100 (79.11 GiB): the exact figures
        (79.11, 54.62, 447_447, 13.65),
        # nvidia-smi's memory_total_mib = 81559 for "NVIDIA H100 80GB HBM3": within 2 %
        (81559 / 1024, 54.62, 447_447, 13.65),
    ],
)
def test_vllm_kv_budget_on_80gb_h100(total_gib: float, budget_gib: float, tokens: int,
                                     concurrency: float) -> None:
    budget = sm.kv_budget_bytes(total_gib * GIB, 0.9, 14.99 * GIB, 1.24 * GIB, 0.35 * GIB)
    assert budget / GIB == pytest.approx(budget_gib, rel=0.02)
    fit = sm.tokens_in_cache(budget, 131_072)
    assert fit == pytest.approx(tokens, rel=0.02)
    assert sm.max_concurrent_sequences(fit, 32_768) == pytest.approx(concurrency, rel=0.02)


def test_vllm_budget_exact_figures() -> None:
    budget = sm.kv_budget_bytes(79.11 * GIB, 0.9, 14.99 * GIB, 1.24 * GIB, 0.35 * GIB)
    assert round(budget / GIB, 2) == 54.62
    assert round(sm.tokens_in_cache(budget, 131_072), -3) == 447_000
    conc = sm.max_concurrent_sequences(sm.tokens_in_cache(budget, 131_072), 32_768)
    assert conc == pytest.approx(13.6, abs=0.1)


def test_a_model_that_does_not_fit_has_a_negative_budget_and_no_tokens() -> None:
    # Llama-3-70B in BF16 (141 GB) on one 80 GB GPU
    weights = sm.weights_bytes(70.55e9, 2)
    budget = sm.kv_budget_bytes(81559 * sm.MIB, 0.9, weights, 1.25 * GIB, 0.5 * GIB)
    assert budget < 0
    assert sm.tokens_in_cache(budget, 327_680) == 0


@pytest.mark.parametrize(
    ("dtype", "bytes_"),
    [("bf16", 2), ("FP16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5 + 2 / 128), ("fp32", 4),
     ("nf3", None)],
)
def test_bytes_per_param(dtype: str, bytes_: float | None) -> None:
    assert sm.dtype_bytes(dtype) == bytes_


def test_weights_bytes_of_llama3_8b() -> None:
    assert sm.weights_bytes(8_030_261_248, 2) / GIB == pytest.approx(14.96, abs=0.01)


def test_params_estimated_from_config_json_fields_match_llama3_8b_exactly() -> None:
    assert sm.estimate_params(layers=32, hidden_size=4096, heads=32, kv_heads=8, head_dim_=128,
                              intermediate_size=14336, vocab_size=128256) == 8_030_261_248


@pytest.mark.parametrize(("rho", "multiple"), [(0.5, 9.2), (0.7, 15.4), (0.8, 23.0), (0.9, 46.1)])
def test_mm1_p99_multiple_of_service_time(rho: float, multiple: float) -> None:
    assert sm.mm1_p99_multiple(rho) == pytest.approx(multiple, abs=0.1)


def test_mm1_p99_seconds_and_saturation() -> None:
    assert sm.mm1_p99_s(mu=10, lam=5) == pytest.approx(4.605 / 5, rel=1e-3)
    assert sm.mm1_p99_s(mu=5, lam=5) == math.inf
    assert sm.mm1_p99_multiple(1.2) == math.inf


@pytest.mark.parametrize(
    ("required", "per_replica", "headroom", "replicas"),
    [(160, 100, 0.7, 3), (70, 100, 0.7, 1), (70.0001, 100, 0.7, 2), (0, 100, 0.7, 1)],
)
def test_replicas_with_headroom(required: float, per_replica: float, headroom: float,
                                replicas: int) -> None:
    assert sm.replicas_needed(required, per_replica, headroom) == replicas


def test_bandwidth_mbit() -> None:
    # 20 req/s × 2400 B × 8 × 1.5 = 576,000 bit/s
    assert sm.bandwidth_mbit(20, 2400, 1.5) == pytest.approx(0.576)


def test_cold_start_uses_the_slower_of_disk_and_loader() -> None:
    model = 16 * GIB
    assert sm.cold_start_s(model, 2048) == pytest.approx(8.0)
    assert sm.cold_start_s(model, 2048, loader_mib_s=1024) == pytest.approx(16.0)
    assert sm.cold_start_s(model, 0) == math.inf


def test_model_time_formulas() -> None:
    assert sm.e2e_s(0.1, 101, 0.01) == pytest.approx(1.1)
    # 16 GB read per step at 2000 GB/s × 0.5 → 16 ms
    assert sm.decode_step_s(16e9, 2000, 0.5) == pytest.approx(0.016)
    # 2 × 8e9 params × 1000 tokens / (1 GPU × 1000 TFLOPS × 0.4)
    assert sm.prefill_s(8e9, 1000, 1, 1000, 0.4) == pytest.approx(0.04)
    assert sm.prefill_tokens_per_s(8e9, 1, 1000, 0.4) == pytest.approx(25_000)
    assert sm.region_total_ms(88.1, 35, 61) == pytest.approx(184.1)


def test_batch_formulas() -> None:
    assert sm.batch_hours_needed(3600, 1000, 0.0, 1000) == pytest.approx(1.0)
    assert sm.batch_hours_needed(3600, 1000, 0.25, 1000) == pytest.approx(1.25)
    assert sm.batch_hours_needed(1, 1, 0, 0) == math.inf
    assert sm.batch_tokens_per_s(100, 0.05) == pytest.approx(2000)
    # (3000 + 0) / 1000 tasks + 0.1 per GB × 1 GB × 1.5
    assert sm.batch_unit_cost(3000, 1000, 0, 0.1, 1, 0.5) == pytest.approx(3.15)
    assert sm.batch_unit_cost(3000, 0) == math.inf


@pytest.mark.parametrize(
    ("name", "spec"),
    [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
     ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
     ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A10", "A10"), ("NVIDIA A10G", "A10G"),
     ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"), ("Tesla T4", "T4"),
     ("Tesla P100-PCIE-16GB", "P100"), ("NVIDIA GH200 480GB", "GH200"), ("NVIDIA H200", "H200"),
     ("Quadro P400", None)],
)
def test_gpu_datasheet_lookup(name: str, spec: str | None) -> None:
    found = sm.gpu_spec(name)
    assert (found.name if found else None) == spec
