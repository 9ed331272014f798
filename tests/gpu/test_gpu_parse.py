"""nvidia-smi parsers on real captures: -q -x across DTD versions, --query-gpu CSV, the
plain table, -L, the live stream line; and no fixture crashes any parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferfit.findings import clean
from inferfit.probes.gpu_parse import (
    ParseError,
    clean_text,
    flag,
    memory_class_gb,
    merge_list,
    normalize_bus_id,
    number,
    parse_list,
    parse_query_csv,
    parse_smi_table,
    parse_smi_xml,
    parse_stream_line,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


A100 = "influxdata__telegraf__a100-sxm4-v12.xml"
T4 = "influxdata__telegraf__tesla-t4.xml"
P400 = "influxdata__telegraf__quadro-p400-418.excerpt.xml"
A5000 = "influxdata__telegraf__dual-a5000-v13.excerpt.xml"


def test_unknown_values_become_none():
    for raw in ("N/A", "[N/A]", "[Not Supported]", "Requested functionality has been deprecated",
                "[Requested functionality has been deprecated]", "  ", "[Unknown Error]"):
        assert clean_text(raw) is None
        assert number(raw) is None
    assert number("67.03 W") == 67.03
    assert number("16x") == 16
    assert flag("Not Active") is False
    assert flag("Enabled") is True
    assert flag("N/A") is None


def test_memory_class_and_bus_id():
    assert memory_class_gb(81559) == 80  # H100 80GB HBM3
    assert memory_class_gb(81920) == 80  # A100 80GB
    assert memory_class_gb(15360) == 16  # T4
    assert memory_class_gb(24564) == 24  # A5000
    assert memory_class_gb(143771) == 141  # H200
    assert memory_class_gb(None) is None
    assert normalize_bus_id("00000000:3B:00.0") == "0000:3b:00"
    assert normalize_bus_id("PCI:0000:3b:00") == "0000:3b:00"
    assert normalize_bus_id("nonsense") is None


def test_a100_v12_mig():
    snap = parse_smi_xml(text(A100))
    assert snap["driver_version"] == "535.54.03"
    assert snap["cuda_version"] == "12.2"
    assert snap["gpu_count"] == 4  # attached_gpus exceeds the one <gpu> entry
    (dev,) = snap["devices"]
    assert dev["name"] == "NVIDIA A100-SXM4-80GB"
    assert dev["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert dev["memory_total_mib"] == 81920
    assert dev["memory_used_mib"] == 50
    assert dev["util_gpu_pct"] is None  # N/A under MIG
    assert dev["power_draw_w"] == 67.03  # gpu_power_readings (v12)
    assert dev["power_limit_w"] == 500.0
    assert dev["clock_sm_mhz"] == 1275
    assert dev["clock_sm_max_mhz"] == 1410
    assert dev["temperature_c"] == 27
    assert dev["ecc_enabled"] is True
    assert dev["ecc_errors_uncorrected"] == 0
    assert dev["throttle_reasons"] == []  # clocks_event_reasons, none active
    assert dev["mig_enabled"] is True
    assert dev["reset_required"] is False
    assert len(dev["mig_devices"]) == 4
    assert dev["mig_devices"][0] == {
        "index": 0, "gpu_instance_id": 3, "compute_instance_id": 0, "multiprocessor_count": 14,
        "memory_total_mib": 19968, "memory_used_mib": 12, "memory_free_mib": 19955,
        "ecc_errors_uncorrected": 0,
    }


def test_a100_list_adds_profiles_and_missing_gpus():
    snap = parse_smi_xml(text(A100))
    listing = parse_list(text("influxdata__telegraf__issue-5812.a100-mig.list.txt"))
    assert [g["index"] for g in listing] == [0, 1, 2, 3]
    assert len(listing[0]["mig"]) == 4
    notes = merge_list(snap, listing)
    assert [m["profile"] for m in snap["devices"][0]["mig_devices"]] == ["1g.20gb"] * 4
    assert snap["devices"][0]["mig_devices"][3]["uuid"] == \
        "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b"
    assert len(snap["devices"]) == 4
    assert snap["devices"][2]["detail"] == "listed by nvidia-smi -L only"
    assert "GPU 1, 2, 3" in notes[0]


def test_t4_v11_power_readings_and_processes():
    (dev,) = parse_smi_xml(text(T4))["devices"]
    assert dev["name"] == "Tesla T4"
    assert dev["power_draw_w"] == 26.78  # power_readings (v11)
    assert dev["power_limit_w"] == 70.0
    assert dev["pcie_width_current"] == 8
    assert dev["pcie_width_max"] == 16
    assert dev["pcie_gen_current"] == dev["pcie_gen_max"] == 3
    assert dev["mig_enabled"] is False  # N/A: not MIG-capable
    assert dev["retired_pages_sbe"] == 0
    assert dev["retired_pages_pending"] is False
    assert dev["throttle_reasons"] == []  # clocks_throttle_reasons (v11)
    assert [(p["pid"], p["type"], p["used_memory_mib"]) for p in dev["processes"]] == [
        (675, "G", 22), (5762, "C", 1005)]


def test_p400_old_dtd_single_double_bit():
    snap = parse_smi_xml(text(P400))
    assert snap["driver_version"] == "418.43"
    (dev,) = snap["devices"]
    assert dev["name"] == "Quadro P400"
    assert dev["ecc_enabled"] is None
    assert dev["ecc_errors_uncorrected"] is None  # every single_bit/double_bit total is N/A
    assert dev["power_draw_w"] is None
    assert dev["throttle_reasons"] == ["gpu_idle"]
    assert "mig_enabled" in dev
    assert dev["mig_enabled"] is None  # no <mig_mode> before MIG existed


def test_old_dtd_ecc_counts_are_read():
    xml = text(P400).replace(
        "<total>N/A</total>\n        </double_bit>\n      </volatile>",
        "<total>2</total>\n        </double_bit>\n      </volatile>", 1)
    (dev,) = parse_smi_xml(xml)["devices"]
    assert dev["ecc_errors_uncorrected_volatile"] == 2
    assert dev["ecc_errors_uncorrected"] == 2


def test_a5000_v13_instant_power_and_remapped_rows():
    snap = parse_smi_xml(text(A5000))
    assert snap["gpu_count"] == 2
    d0, d1 = snap["devices"]
    assert d0["power_draw_w"] == 6.52  # v13 instant_power_draw
    assert d1["power_draw_w"] == 13.59
    assert d0["power_limit_w"] == 230.0
    assert d0["ecc_enabled"] is False
    assert d0["remapped_rows_correctable"] == 0
    assert d0["remapped_rows_pending"] is False
    assert d0["recovery_action"] == "None"
    assert d0["processes"][0]["name"] == "/root/src/llama.cpp/build/bin/llama-server"
    assert d1["pci_bus_id"] == "00000000:C1:00.0"


def test_v13_sram_parity_and_secded_are_summed():
    xml = text(A5000).replace(
        "<sram_uncorrectable_parity>N/A</sram_uncorrectable_parity>",
        "<sram_uncorrectable_parity>1</sram_uncorrectable_parity>", 1).replace(
        "<sram_uncorrectable_secded>N/A</sram_uncorrectable_secded>",
        "<sram_uncorrectable_secded>2</sram_uncorrectable_secded>", 1)
    d0 = parse_smi_xml(xml)["devices"][0]
    assert d0["ecc_errors_uncorrected_volatile"] == 3


def test_xml_with_warning_prefix():
    snap = parse_smi_xml("WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n" + text(T4))
    assert snap["warnings"] == ["WARNING: infoROM is corrupted at gpu 0000:00:1E.0"]
    assert snap["devices"][0]["name"] == "Tesla T4"


def test_xml_errors_are_parse_errors():
    with pytest.raises(ParseError):
        parse_smi_xml("No devices were found")
    with pytest.raises(ParseError):
        parse_smi_xml(text(T4)[:5000])  # cut mid-document


def test_query_csv_h100_full_header():
    snap = parse_query_csv(text("utkuozdemir__h100-590.48.01.load.query.csv"))
    assert snap["driver_version"] == "590.48.01"
    (dev,) = snap["devices"]
    assert dev["name"] == "NVIDIA H100 80GB HBM3"
    assert dev["index"] == 0
    assert dev["power_draw_w"] == 631.95
    assert dev["power_limit_w"] == 700.0
    assert dev["util_gpu_pct"] == 100
    assert dev["memory_used_mib"] == 19818
    assert dev["clock_sm_mhz"] == 1980
    assert dev["clock_sm_max_mhz"] == 1980
    assert dev["pcie_gen_current"] == 5
    assert dev["mig_enabled"] is False
    assert dev["remapped_rows_pending"] is False
    assert dev["throttle_reasons"] == []
    idle = parse_query_csv(text("utkuozdemir__h100-590.48.01.idle.query.csv"))["devices"][0]
    assert idle["throttle_reasons"] == ["gpu_idle"]


def test_query_csv_p100_derives_total():
    (dev,) = parse_query_csv(text("netdata__netdata__tesla-p100.csv"))["devices"]
    assert dev["name"] == "Tesla P100-PCIE-16GB"
    assert dev["memory_total_mib"] == 103 + 0 + 16280
    assert dev["memory_class_gb"] == 16
    assert dev["fan_pct"] is None
    assert dev["power_draw_w"] == 28.16
    assert dev["performance_state"] == "P0"


def test_query_csv_two_gpus_with_index_column():
    snap = parse_query_csv(text("utkuozdemir__nvidia_gpu_exporter__query.txt"))
    assert [d["index"] for d in snap["devices"]] == [0, 1]
    assert snap["devices"][1]["memory_used_mib"] == 1234


def test_table_8x_h100():
    snap = parse_smi_table(text("thamada__nvidia-smi__H100SXMx8_smi.table.txt"))
    assert snap["driver_version"] == "565.57.01"
    assert snap["cuda_version"] == "12.7"
    assert snap["gpu_count"] == 8
    d0 = snap["devices"][0]
    assert d0["name"] == "NVIDIA H100 80GB HBM3"
    assert d0["power_draw_w"] == 100
    assert d0["power_limit_w"] == 700
    assert d0["memory_total_mib"] == 81559
    assert d0["mig_enabled"] is False
    assert d0["ecc_errors_uncorrected"] == 0


def test_table_with_processes():
    snap = parse_smi_table(text("utkuozdemir__h100-590.48.01.load.table.txt"))
    (dev,) = snap["devices"]
    assert dev["util_gpu_pct"] == 100
    assert dev["power_draw_w"] == 629
    assert [p["name"] for p in dev["processes"]] == ["/root/tools/memhog", "/root/tools/memhog",
                                                     "./gpu_burn"]


def test_stream_line():
    assert parse_stream_line("0, 97, 19818, 81559, 631.95") == {
        "index": 0, "util_gpu_pct": 97, "memory_used_mib": 19818, "memory_total_mib": 81559,
        "power_draw_w": 631.95}
    assert parse_stream_line("1, [N/A], 10, 100, [N/A]") == {
        "index": 1, "memory_used_mib": 10, "memory_total_mib": 100}
    assert parse_stream_line("index, utilization.gpu") is None
    assert parse_stream_line("") is None


def _has_none(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_has_none(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_none(v) for v in value)
    return False


ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if p.is_file())


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_no_fixture_crashes_any_parser(name):
    """Every capture through every parser: a result or a ParseError, never a crash; and
    whatever comes out can be written as findings (no None left after clean())."""
    raw = text(name)
    for parser in (parse_smi_xml, parse_query_csv, parse_smi_table):
        for sample in (raw, raw[: len(raw) // 2], raw.replace("\n", "\r\n")):
            try:
                snap = parser(sample)
            except ParseError:
                continue
            assert isinstance(snap["devices"], list)
            assert not _has_none(clean(snap))
    assert isinstance(parse_list(raw), list)


def test_table_older_layout_with_mig():
    snap = parse_smi_table(text("NVIDIA__go-nvml__issue-57.a100-mig.table.excerpt.txt"))
    assert snap["driver_version"] == "520.61.05"
    assert snap["cuda_version"] == "11.8"
    d0, d1 = snap["devices"]
    assert d0["name"] == "NVIDIA A100 80G..."
    assert d0["memory_total_mib"] == 81920
    assert d0["power_draw_w"] == 42
    assert d0["util_gpu_pct"] is None
    assert d0["mig_enabled"] is True
    assert d1["pci_bus_id"] == "00000000:B1:00.0"
