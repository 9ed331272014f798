"""Health verdicts per GPU and for the box, each with its reason in words."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from inferfit.probes.gpu_events import parse_topology, parse_xid
from inferfit.probes.gpu_health import judge, judge_device
from inferfit.probes.gpu_parse import parse_query_csv, parse_smi_xml

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def snap(name: str) -> dict[str, Any]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return parse_query_csv(text) if name.endswith(".csv") else parse_smi_xml(text)


def a100() -> dict[str, Any]:
    return copy.deepcopy(snap("influxdata__telegraf__a100-sxm4-v12.xml")["devices"][0])


def test_healthy_a100_is_ok():
    health, reasons, info = judge_device(a100(), {})
    assert health == "ok"
    assert reasons == []
    assert any("persistence mode is off" in i for i in info)


def test_uncorrectable_ecc_fails():
    dev = a100()
    dev["ecc_errors_uncorrected"] = 2
    dev["ecc_errors_uncorrected_aggregate"] = 2
    health, reasons, _ = judge_device(dev, {})
    assert health == "fail"
    assert "2 uncorrectable ECC error(s)" in reasons[0]


def test_pending_retirement_and_remap_fail():
    for key in ("retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure",
                "reset_required"):
        dev = a100()
        dev[key] = True
        health, reasons, _ = judge_device(dev, {})
        assert health == "fail", key
        assert reasons


def test_mig_instance_sram_error_fails():
    dev = a100()
    dev["mig_devices"][2]["ecc_errors_uncorrected"] = 1
    health, reasons, _ = judge_device(dev, {})
    assert health == "fail"
    assert "MIG device 2" in reasons[0]


def test_power_cap_while_idle_warns_but_not_under_load():
    idle = snap("utkuozdemir__h100-590.48.01.idle.query.csv")["devices"][0]
    idle["throttle_reasons"] = ["sw_power_cap"]
    health, reasons, _ = judge_device(idle, {})
    assert health == "warn"
    assert "power cap while idle" in reasons[0]
    busy = snap("utkuozdemir__h100-590.48.01.load.query.csv")["devices"][0]
    busy["throttle_reasons"] = ["sw_power_cap"]
    busy["processes"] = []
    busy["memory_used_mib"] = 0.0
    health, reasons, info = judge_device(busy, {})
    assert health == "ok"
    assert any("power cap under load" in i for i in info)


def test_thermal_slowdown_warns():
    dev = a100()
    dev["throttle_reasons"] = ["hw_thermal_slowdown"]
    health, reasons, _ = judge_device(dev, {})
    assert health == "warn"
    assert "hw_thermal_slowdown" in reasons[0]


def test_pcie_width_below_max_warns_gen_only_when_busy():
    t4 = snap("influxdata__telegraf__tesla-t4.xml")["devices"][0]
    health, reasons, _ = judge_device(t4, {})
    assert health == "warn"
    assert any("x8 of x16" in r for r in reasons)
    dev = a100()
    dev["pcie_gen_current"] = 3  # Gen4 card at Gen3 ...
    dev["util_gpu_pct"] = 90.0  # ... while busy
    health, reasons, _ = judge_device(dev, {})
    assert health == "warn"
    assert "Gen3 of Gen4 while busy" in reasons[0]
    dev["util_gpu_pct"] = 0.0
    health, _, info = judge_device(dev, {})
    assert health == "ok"
    assert any("at idle" in i for i in info)


def test_memory_in_use_warns():
    dev = a100()
    dev["memory_used_mib"] = 30000.0
    health, reasons, _ = judge_device(dev, {"memory_used_warn_mib": 512})
    assert health == "warn"
    assert "30000 MiB" in reasons[0]


def test_hot_gpu_warns():
    dev = a100()
    dev["temperature_c"] = 86.0
    health, reasons, _ = judge_device(dev, {"temperature_warn_c": 85.0})
    assert health == "warn"
    assert "86 C" in reasons[0]


def test_box_xid_fail_and_warn():
    values = snap("influxdata__telegraf__dual-a5000-v13.excerpt.xml")
    values["xid_events"] = parse_xid(
        "NVRM: Xid (PCI:0000:81:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
        "NVRM: Xid (PCI:0000:c1:00): 31, pid=2, name=y, Ch 00000010\n")
    status, _, notes = judge(values, {})
    assert status == "fail"
    assert values["devices"][0]["health"] == "fail"
    assert any("XID 79 (GPU has fallen off the bus) on GPU 0" in n for n in notes)
    assert values["devices"][1]["health"] == "warn"
    values["xid_events"] = parse_xid("NVRM: Xid (PCI:0000:c1:00): 31, pid=2, name=y, Ch 1\n")
    for dev in values["devices"]:
        dev.pop("reasons", None)
    status, _, _ = judge(values, {"fail_xids": [31]})
    assert status == "fail"


def test_expected_count_and_model():
    values = snap("influxdata__telegraf__a100-sxm4-v12.xml")
    status, _, notes = judge(values, {"expected_count": 8, "expected_model": "H100"})
    assert status == "fail"
    assert "expected 8 GPU(s), found 4" in notes
    assert any("expected model 'H100'" in n for n in notes)
    values = snap("influxdata__telegraf__a100-sxm4-v12.xml")
    status, summary, notes = judge(values, {"expected_count": 4, "expected_model": "a100"})
    assert status == "ok"
    assert any("4 GPUs attached but only 1 described" in n for n in notes)
    assert summary.startswith("1x NVIDIA A100-SXM4-80GB, 80 GB class, MIG on 1 GPU(s)")


def test_mixed_nvlink_topology_warns():
    values = snap("influxdata__telegraf__dual-a5000-v13.excerpt.xml")
    for dev in values["devices"]:
        dev["processes"] = []
        dev["memory_used_mib"] = 0.0
    values["topology"] = parse_topology(
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tNV4\tSYS\t0-7\nGPU1\tNV4\t X \tNV4\t0-7\nGPU2\tSYS\tNV4\t X \t0-7\n")
    status, _, notes = judge(values, {})
    assert status == "warn"
    assert any("NVLink links only 2 of 3 GPU pairs" in n for n in notes)
