"""Every named rule fires in one scenario and stays silent in another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inferfit.findings import Findings
from inferfit.plugins.sizing import recommend
from inferfit.plugins.sizing_rules import RULES
from inferfit.workload import Workload

Scenario = Callable[[str], tuple[Findings, Workload]]

# rule, a scenario where it fires, a scenario where it does not
RULE_CASES = [
    ("model_fits", "chat_h100", "chat_no_probes"),
    ("quantize_to_fit", "8b_t4", "chat_h100"),
    ("add_gpus_to_fit", "70b_tp1_h100", "chat_h100"),
    ("kv_capacity", "chat_h100", "chat_no_probes"),
    ("long_context_memory", "70b_tp4_h100", "chat_h100"),
    ("littles_law", "chat_h100", "nightly_h100"),
    ("realtime_headroom", "chat_h100", "chat_no_probes"),
    ("prefill_compute", "70b_tp4_h100", "chat_h100"),
    ("mm1_tail_penalty", "chat_l4", "chat_h100"),
    ("throttle_at_peak", "chat_l4", "chat_h100"),
    ("strict_sla_single_node", "chat_h100_p99", "chat_h100"),
    ("model_time_budget", "chat_l4", "chat_h100"),
    ("link_headroom", "chat_slow_link", "chat_h100"),
    ("cold_start", "chat_h100", "chat_no_probes"),
    ("host_memory", "70b_l4", "70b_tp4_h100"),
    ("region_budget", "chat_h100", "chat_l4"),
    ("rtt_breaks_budget", "chat_h100", "chat_h100_far_ok"),
    ("batch_window", "nightly_h100", "chat_h100"),
    ("batch_unit_cost", "nightly_h100", "nightly_no_cost"),
    ("prefer_realtime", "chat_h100", "nightly_h100"),
    ("prefer_batch", "nightly_h100", "chat_h100"),
    ("batch_interference", "mixed_h100_interference", "mixed_h100_low_interference"),
    ("both_heavy_no_isolation", "mixed_l4", "mixed_h100"),
    ("mixed_reserve", "mixed_h100", "mixed_l4"),
]


def size(scenario: Scenario, name: str) -> dict[str, Any]:
    return recommend(*scenario(name)).table


def rules_of(table: dict[str, Any]) -> set[str]:
    return {r["rule"] for r in table["reasons"]}


@pytest.mark.parametrize(("rule", "fires", "silent"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_fires_in_one_scenario_and_not_another(scenario: Scenario, rule: str, fires: str,
                                                    silent: str) -> None:
    assert rule in rules_of(size(scenario, fires)), f"{rule} should fire in {fires}"
    assert rule not in rules_of(size(scenario, silent)), f"{rule} should not fire in {silent}"


def test_every_named_rule_has_a_case() -> None:
    assert {c[0] for c in RULE_CASES} == set(RULES)


def test_llama3_8b_on_h100_box_figures(scenario: Scenario) -> None:
    t = size(scenario, "chat_h100")
    assert t["fits"] is True
    assert t["kv_bytes_per_token"] == 131_072
    assert t["weights_bytes"] == 16_060_522_496
    # 81559 MiB × 0.9 − 14.96 GiB weights − 1.25 GiB activations − 0.5 GiB non-torch
    assert t["kv_budget_bytes"] / 1024**3 == pytest.approx(54.98, abs=0.01)
    assert t["max_tokens_in_cache"] == pytest.approx(450_356, abs=2)
    assert t["max_concurrency"] == pytest.approx(450_356 / 8192, rel=1e-3)
    # 20 QPS × W, W = the larger of nginx's 41.2 / 9.8 s and the estimated E2E
    assert t["occupancy_s"] >= 41.2 / 9.8
    assert t["required_concurrency"] == pytest.approx(20 * t["occupancy_s"], rel=1e-3)
    assert t["bandwidth_mbit_needed"] == pytest.approx(0.576)
    assert t["model_load_s"] == pytest.approx(16_060_522_496 / (6650 * 1024**2), rel=1e-3)
    assert t["mode"] == "realtime"
    assert t["actions"] == ["move_closer"]
    assert t["move_closer_regions"] == ["ap-southeast"]
    assert t["confidence"] == 1.0


def test_a_model_that_does_not_fit(scenario: Scenario) -> None:
    t = size(scenario, "70b_tp1_h100")
    assert t["fits"] is False
    assert "add_gpus" in t["actions"]
    assert t["gpus_needed"] == 4
    assert "max_tokens_in_cache" not in t
    t4 = size(scenario, "8b_t4")
    assert t4["fits"] is False
    assert t4["quantize_to"] == "fp8"
    assert "quantize" in t4["actions"]


def test_region_whose_rtt_alone_exceeds_the_budget_says_move_closer(scenario: Scenario) -> None:
    t = size(scenario, "chat_h100")
    rows = {r["name"]: r for r in t["regions"]}
    assert rows["ap-southeast"]["verdict"] == "rtt_over"
    assert rows["eu-west"]["verdict"] == "ok"
    assert rows["eu-west"]["total_ms"] == pytest.approx(
        12.4 + 35 + rows["eu-west"]["model_ms"], abs=0.01)
    over = size(scenario, "chat_h100_region_over")
    row = over["regions"][0]
    assert row["verdict"] == "over"  # the RTT fits, RTT + queue + model does not
    assert "move_closer" not in over["actions"]


def test_batch_interference_turns_mixed_into_split(scenario: Scenario) -> None:
    assert size(scenario, "mixed_h100_low_interference")["mode"] == "mixed"
    t = size(scenario, "mixed_h100_interference")
    assert t["mode"] == "split"
    assert "split" in t["actions"]
    reason = next(r for r in t["reasons"] if r["rule"] == "batch_interference")
    assert {"name": "interference", "value": 46.8, "unit": "%",
            "source": "mixed.interference_pct"} in reason["figures"]


def test_mixed_reserves_capacity_for_realtime(scenario: Scenario) -> None:
    t = size(scenario, "mixed_h100")
    assert t["mode"] == "mixed"
    assert t["actions"] == ["reserve_realtime"]
    # reserve = required / (256 seqs × 8 instances) / 0.7
    assert t["reserve_realtime_pct"] == pytest.approx(
        t["required_concurrency"] / 2048 / 0.7 * 100, rel=1e-3)
    assert t["throttle"]["batch_max_concurrency"] < 2048


def test_small_box_scales_out_and_throttles(scenario: Scenario) -> None:
    t = size(scenario, "chat_l4")
    assert t["actions"][:2] == ["scale_out", "throttle"]
    assert t["replicas"] > 1
    assert t["throttle"]["rate_limit_qps_per_key"] == pytest.approx(
        t["throttle"]["rate_limit_qps"] / 50, rel=1e-2)
    assert t["utilisation_peak"] > 1
    nightly = size(scenario, "nightly_l4")
    assert nightly["mode"] == "batch"
    assert "scale_out" in nightly["actions"]
    assert nightly["replicas"] == -(-nightly["batch_hours_needed"] // 6)


def test_strict_sla_keeps_n_plus_one(scenario: Scenario) -> None:
    t = size(scenario, "chat_h100_p99")
    assert t["replicas"] == 2
    assert "scale_out" in t["actions"]
    assert size(scenario, "chat_h100")["replicas"] == 1


def test_reasons_are_complete(scenario: Scenario) -> None:
    for name in ("chat_h100", "70b_l4", "mixed_l4", "nightly_h100", "mixed_h100_interference"):
        for r in size(scenario, name)["reasons"]:
            assert r["rule"] in RULES
            assert r["says"]
            assert r["formula"]
            for f in r["figures"]:
                assert set(f) == {"name", "value", "unit", "source"}, (name, r["rule"], f)
                assert f["unit"]
                assert f["source"]


def test_missing_inputs_lower_confidence_and_are_listed(scenario: Scenario) -> None:
    full = size(scenario, "chat_h100")
    bare = size(scenario, "chat_no_probes")
    assert "missing_inputs" not in full
    assert bare["confidence"] < full["confidence"]
    text = " ".join(bare["missing_inputs"])
    for probe in ("probes.gpu", "probes.disk", "probes.nginx", "probes.latency"):
        assert probe in text
    assert "fits" not in bare
    assert bare["required_concurrency"] == 20 * 8  # 20 QPS × the 8 s E2E budget
