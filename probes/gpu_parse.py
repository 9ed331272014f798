"""Pure parsers for nvidia-smi output: ``-q -x`` XML, ``--query-gpu`` CSV, the plain table, ``-L``.

Every parser returns plain dicts whose keys are the findings keys of docs/gpu.md
(units in the names). A value nvidia-smi does not know (``N/A``, ``[Not Supported]``,
``Requested functionality has been deprecated``...) becomes None, which the findings
writer drops. Nothing here runs a command; everything is tested on recorded output.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from typing import Any

Device = dict[str, Any]

# Values nvidia-smi prints when it has nothing to report (compared case-insensitively,
# with surrounding brackets removed).
_UNKNOWN = {
    "n/a", "na", "not supported", "unknown error", "requested functionality has been deprecated",
    "insufficient permissions", "gpu is lost", "err!", "unknown", "not available", "",
}
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")
# Throttle / clock-event reasons that mean the GPU is being held back.
SLOWDOWN_REASONS = (
    "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


class ParseError(ValueError):
    """Output that is not what the parser expects (the probe says so, never crashes)."""


# -- value helpers --------------------------------------------------------------------------
def clean_text(raw: str | None) -> str | None:
    if raw is None:
        return None
    text = " ".join(raw.split())
    if text.strip("[]").strip().lower() in _UNKNOWN:
        return None
    return text


def number(raw: str | None) -> float | None:
    """Leading number of '67.03 W', '81559 MiB', '16x', '0 %'; None for N/A and friends."""
    text = clean_text(raw)
    if text is None:
        return None
    m = _NUM.search(text)
    return float(m.group()) if m else None


def integer(raw: str | None) -> int | None:
    value = number(raw)
    return None if value is None else int(value)


def flag(raw: str | None) -> bool | None:
    """Enabled/Yes/Active/On -> True, Disabled/No/Not Active/Off -> False, else None."""
    text = clean_text(raw)
    if text is None:
        return None
    low = text.lower()
    if low in {"enabled", "yes", "active", "on", "true", "1"}:
        return True
    if low in {"disabled", "no", "not active", "off", "false", "0", "none"}:
        return False
    return None


def memory_class_gb(total_mib: float | None) -> int | None:
    """The marketing size class (80 for an 81559 MiB H100, 16 for a 15360 MiB T4)."""
    if not total_mib:
        return None
    gib = total_mib / 1024
    classes = (1, 2, 3, 4, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 128,
               141, 144, 180, 192, 256, 288)
    best = min(classes, key=lambda c: abs(c - gib))
    return best if abs(best - gib) <= 0.08 * best else round(gib)


def normalize_bus_id(raw: str | None) -> str | None:
    """'00000000:3B:00.0' / '0000:3b:00' / 'PCI:0000:3b:00' -> '0000:3b:00' (domain:bus:device)."""
    if not raw:
        return None
    m = re.search(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})", raw)
    if not m:
        return None
    domain = int(m.group(1), 16)
    return f"{domain:04x}:{m.group(2).lower()}:{m.group(3).lower()}"


# -- nvidia-smi -q -x -----------------------------------------------------------------------
def _text(el: ET.Element | None, *paths: str) -> str | None:
    """First known value among ``paths`` below ``el``."""
    if el is None:
        return None
    for path in paths:
        node = el.find(path)
        if node is not None and node.text is not None:
            value = clean_text(node.text)
            if value is not None:
                return value
    return None


def _num(el: ET.Element | None, *paths: str) -> float | None:
    return number(_text(el, *paths))


def _int(el: ET.Element | None, *paths: str) -> int | None:
    return integer(_text(el, *paths))


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ecc_counts(block: ET.Element | None) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) from one <volatile> or <aggregate> block of any DTD."""
    if block is None:
        return None, None
    if block.find("single_bit") is not None or block.find("double_bit") is not None:
        # DTD v10 and older: single_bit = corrected, double_bit = uncorrected.
        return _int(block, "single_bit/total"), _int(block, "double_bit/total")
    corrected = _sum_known([_int(block, "sram_correctable"), _int(block, "dram_correctable")])
    sram_unc = _int(block, "sram_uncorrectable")
    if sram_unc is None:  # v13 splits SRAM uncorrectable into parity and SEC-DED
        sram_unc = _sum_known([_int(block, "sram_uncorrectable_parity"),
                               _int(block, "sram_uncorrectable_secded")])
    uncorrected = _sum_known([sram_unc, _int(block, "dram_uncorrectable")])
    return corrected, uncorrected


def _reasons(gpu: ET.Element) -> list[str] | None:
    block = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if block is None:
        block, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if block is None:
        return None
    active = []
    for child in block:
        if flag(child.text) and child.tag.startswith(prefix):
            active.append(child.tag[len(prefix):])
    return active


def _processes(gpu: ET.Element) -> list[dict[str, Any]]:
    out = []
    for proc in gpu.findall("processes/process_info"):
        out.append({
            "pid": _int(proc, "pid"),
            "type": _text(proc, "type"),
            "name": _text(proc, "process_name"),
            "used_memory_mib": _num(proc, "used_memory"),
            "gpu_instance_id": _int(proc, "gpu_instance_id"),
            "compute_instance_id": _int(proc, "compute_instance_id"),
        })
    return out


def _mig_devices(gpu: ET.Element) -> list[dict[str, Any]]:
    out = []
    for mig in gpu.findall("mig_devices/mig_device"):
        out.append({
            "index": _int(mig, "index"),
            "gpu_instance_id": _int(mig, "gpu_instance_id"),
            "compute_instance_id": _int(mig, "compute_instance_id"),
            "multiprocessor_count": _int(mig, "device_attributes/shared/multiprocessor_count"),
            "memory_total_mib": _num(mig, "fb_memory_usage/total"),
            "memory_used_mib": _num(mig, "fb_memory_usage/used"),
            "memory_free_mib": _num(mig, "fb_memory_usage/free"),
            "ecc_errors_uncorrected": _int(
                mig, "ecc_error_count/volatile_count/sram_uncorrectable"),
        })
    return out


def parse_gpu_element(gpu: ET.Element, index: int) -> Device:
    """One <gpu> element of any DTD version (v9-v13) -> a device dict."""
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    link = gpu.find("pci/pci_gpu_link_info")
    ecc_mode = flag(_text(gpu, "ecc_mode/current_ecc"))
    corr_v, unc_v = _ecc_counts(gpu.find("ecc_errors/volatile"))
    corr_a, unc_a = _ecc_counts(gpu.find("ecc_errors/aggregate"))
    mig_text = _text(gpu, "mig_mode/current_mig")
    has_mig_mode = gpu.find("mig_mode") is not None
    total = _num(gpu, "fb_memory_usage/total")
    remapped = gpu.find("remapped_rows")
    dev: Device = {
        "index": index,
        "name": _text(gpu, "product_name"),
        "brand": _text(gpu, "product_brand"),
        "architecture": _text(gpu, "product_architecture"),
        "uuid": _text(gpu, "uuid"),
        "serial": _text(gpu, "serial"),
        "pci_bus_id": gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
        "vbios_version": _text(gpu, "vbios_version"),
        "memory_total_mib": total,
        "memory_class_gb": memory_class_gb(total),
        "memory_used_mib": _num(gpu, "fb_memory_usage/used"),
        "memory_free_mib": _num(gpu, "fb_memory_usage/free"),
        "memory_reserved_mib": _num(gpu, "fb_memory_usage/reserved"),
        "util_gpu_pct": _num(gpu, "utilization/gpu_util"),
        "util_memory_pct": _num(gpu, "utilization/memory_util"),
        "temperature_c": _num(gpu, "temperature/gpu_temp"),
        "temperature_memory_c": _num(gpu, "temperature/memory_temp"),
        "temperature_slowdown_c": _num(gpu, "temperature/gpu_temp_slow_threshold"),
        "temperature_shutdown_c": _num(gpu, "temperature/gpu_temp_max_threshold"),
        "fan_pct": _num(gpu, "fan_speed"),
        "power_draw_w": _num(power, "power_draw", "instant_power_draw", "average_power_draw"),
        "power_limit_w": _num(power, "current_power_limit", "enforced_power_limit",
                              "power_limit"),
        "power_limit_max_w": _num(power, "max_power_limit"),
        "performance_state": _text(gpu, "performance_state"),
        "clock_sm_mhz": _num(gpu, "clocks/sm_clock"),
        "clock_sm_max_mhz": _num(gpu, "max_clocks/sm_clock"),
        "clock_mem_mhz": _num(gpu, "clocks/mem_clock"),
        "clock_mem_max_mhz": _num(gpu, "max_clocks/mem_clock"),
        "persistence_mode": flag(_text(gpu, "persistence_mode")),
        "compute_mode": _text(gpu, "compute_mode"),
        "pcie_gen_current": _int(link, "pcie_gen/current_link_gen"),
        "pcie_gen_max": _int(link, "pcie_gen/max_link_gen"),
        "pcie_width_current": _int(link, "link_widths/current_link_width"),
        "pcie_width_max": _int(link, "link_widths/max_link_width"),
        "ecc_enabled": ecc_mode,
        "ecc_enabled_pending": flag(_text(gpu, "ecc_mode/pending_ecc")),
        "ecc_errors_corrected_volatile": corr_v,
        "ecc_errors_corrected_aggregate": corr_a,
        "ecc_errors_uncorrected_volatile": unc_v,
        "ecc_errors_uncorrected_aggregate": unc_a,
        "retired_pages_sbe": _int(
            gpu, "retired_pages/multiple_single_bit_retirement/retired_count"),
        "retired_pages_dbe": _int(gpu, "retired_pages/double_bit_retirement/retired_count"),
        "retired_pages_pending": flag(_text(gpu, "retired_pages/pending_retirement")),
        "remapped_rows_correctable": _int(remapped, "remapped_row_corr"),
        "remapped_rows_uncorrectable": _int(remapped, "remapped_row_unc"),
        "remapped_rows_pending": flag(_text(remapped, "remapped_row_pending")),
        "remapped_rows_failure": flag(_text(remapped, "remapped_row_failure")),
        "throttle_reasons": _reasons(gpu),
        "reset_required": flag(_text(gpu, "gpu_reset_status/reset_required")),
        "recovery_action": _text(gpu, "gpu_recovery_action"),
        "mig_enabled": (mig_text or "").lower() == "enabled" if has_mig_mode else None,
        "mig_enabled_pending": flag(_text(gpu, "mig_mode/pending_mig")),
        "mig_devices": _mig_devices(gpu),
        "processes": _processes(gpu),
    }
    dev["ecc_errors_uncorrected"] = _max_known(unc_v, unc_a)
    return dev


def _max_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def parse_smi_xml(text: str) -> dict[str, Any]:
    """``nvidia-smi -q -x`` -> {driver_version, cuda_version, gpu_count, devices, warnings}.

    Text before the XML (warnings such as a corrupted infoROM) is returned in
    ``warnings``. Raises ParseError when there is no readable <nvidia_smi_log>.
    """
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        raise ParseError("no <nvidia_smi_log> element in the output")
    warnings = [line.strip() for line in text[:start].splitlines() if line.strip()]
    end = text.rfind("</nvidia_smi_log>")
    body = text[start:end + len("</nvidia_smi_log>")] if end >= 0 else text[start:]
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ParseError(f"the XML does not parse: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"unexpected root element <{root.tag}>")
    devices = [parse_gpu_element(g, i) for i, g in enumerate(root.findall("gpu"))]
    attached = _int(root, "attached_gpus")
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpu_count": attached if attached is not None else len(devices),
        "devices": devices,
        "warnings": warnings,
    }


# -- nvidia-smi --query-gpu=... --format=csv --------------------------------------------------
QUERY_FIELDS = (
    "index,name,uuid,serial,pci.bus_id,driver_version,memory.total,memory.used,memory.free,"
    "utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit,clocks.sm,"
    "clocks.max.sm,clocks.mem,clocks.max.mem,persistence_mode,compute_mode,pstate,"
    "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
    "ecc.mode.current,ecc.errors.uncorrected.volatile.total,"
    "ecc.errors.uncorrected.aggregate.total"
)
# CSV column (unit suffix removed) -> (findings key, converter).
_CSV_MAP: dict[str, tuple[str, str]] = {
    "index": ("index", "int"), "name": ("name", "text"), "uuid": ("uuid", "text"),
    "serial": ("serial", "text"), "pci.bus_id": ("pci_bus_id", "text"),
    "memory.total": ("memory_total_mib", "num"), "memory.used": ("memory_used_mib", "num"),
    "memory.free": ("memory_free_mib", "num"), "memory.reserved": ("memory_reserved_mib", "num"),
    "utilization.gpu": ("util_gpu_pct", "num"), "utilization.memory": ("util_memory_pct", "num"),
    "temperature.gpu": ("temperature_c", "num"), "temperature.memory": ("temperature_memory_c",
                                                                        "num"),
    "fan.speed": ("fan_pct", "num"), "power.draw": ("power_draw_w", "num"),
    "power.limit": ("power_limit_w", "num"), "enforced.power.limit": ("power_limit_w", "num"),
    "power.max_limit": ("power_limit_max_w", "num"),
    "clocks.sm": ("clock_sm_mhz", "num"), "clocks.current.sm": ("clock_sm_mhz", "num"),
    "clocks.max.sm": ("clock_sm_max_mhz", "num"), "clocks.mem": ("clock_mem_mhz", "num"),
    "clocks.current.memory": ("clock_mem_mhz", "num"),
    "clocks.max.mem": ("clock_mem_max_mhz", "num"),
    "clocks.max.memory": ("clock_mem_max_mhz", "num"),
    "persistence_mode": ("persistence_mode", "flag"), "compute_mode": ("compute_mode", "text"),
    "pstate": ("performance_state", "text"),
    "pcie.link.gen.current": ("pcie_gen_current", "int"),
    "pcie.link.gen.max": ("pcie_gen_max", "int"),
    "pcie.link.width.current": ("pcie_width_current", "int"),
    "pcie.link.width.max": ("pcie_width_max", "int"),
    "ecc.mode.current": ("ecc_enabled", "flag"),
    "ecc.errors.corrected.volatile.total": ("ecc_errors_corrected_volatile", "int"),
    "ecc.errors.corrected.aggregate.total": ("ecc_errors_corrected_aggregate", "int"),
    "ecc.errors.uncorrected.volatile.total": ("ecc_errors_uncorrected_volatile", "int"),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_errors_uncorrected_aggregate", "int"),
    "retired_pages.single_bit_ecc.count": ("retired_pages_sbe", "int"),
    "retired_pages.double_bit.count": ("retired_pages_dbe", "int"),
    "retired_pages.pending": ("retired_pages_pending", "flag"),
    "remapped_rows.correctable": ("remapped_rows_correctable", "int"),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", "int"),
    "remapped_rows.pending": ("remapped_rows_pending", "flag"),
    "remapped_rows.failure": ("remapped_rows_failure", "flag"),
    "mig.mode.current": ("mig_enabled", "flag"),
    "mig.mode.pending": ("mig_enabled_pending", "flag"),
}
_CONVERT = {"int": integer, "num": number, "text": clean_text, "flag": flag}
_REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")


def _column(header: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", header.strip()).lower()


def parse_query_csv(text: str) -> dict[str, Any]:
    """``--query-gpu=... --format=csv`` (with header, any field set) -> snapshot dict."""
    body = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").strip()
    try:
        rows = [r for r in csv.reader(io.StringIO(body), skipinitialspace=True) if r]
    except csv.Error as exc:
        raise ParseError(f"not CSV: {exc}") from None
    if len(rows) < 2:
        raise ParseError("no CSV header and data rows")
    columns = [_column(h) for h in rows[0]]
    if "name" not in columns and "uuid" not in columns and "index" not in columns:
        raise ParseError("the CSV header names none of index, name, uuid")
    devices: list[Device] = []
    driver = None
    for position, row in enumerate(rows[1:]):
        if len(row) != len(columns):
            continue
        dev: Device = {"index": position}
        reasons: list[str] = []
        for col, raw in zip(columns, row, strict=True):
            if col == "driver_version":
                driver = driver or clean_text(raw)
            elif col in _CSV_MAP:
                key, kind = _CSV_MAP[col]
                value = _CONVERT[kind](raw)
                if value is not None or key not in dev:
                    dev[key] = value
            elif col.startswith(_REASON_PREFIXES):
                reason = col.split(".", 1)[1]
                if reason not in {"supported", "active"} and flag(raw):
                    reasons.append(reason)
        if any(c.startswith(_REASON_PREFIXES) for c in columns):
            dev["throttle_reasons"] = reasons
        if dev.get("index") is None:
            dev["index"] = position
        parts = [dev.get(k) for k in ("memory_used_mib", "memory_free_mib", "memory_reserved_mib")]
        if dev.get("memory_total_mib") is None and all(p is not None for p in parts):
            dev["memory_total_mib"] = sum(p for p in parts if p is not None)  # used+free+reserved
        dev["memory_class_gb"] = memory_class_gb(dev.get("memory_total_mib"))
        dev["ecc_errors_uncorrected"] = _max_known(dev.get("ecc_errors_uncorrected_volatile"),
                                                   dev.get("ecc_errors_uncorrected_aggregate"))
        devices.append(dev)
    if not devices:
        raise ParseError("no CSV row has as many fields as the header")
    return {"driver_version": driver, "gpu_count": len(devices), "devices": devices,
            "warnings": []}


def parse_stream_line(line: str) -> dict[str, Any] | None:
    """One line of ``--query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw
    --format=csv,noheader,nounits`` -> a Sample entry (None for a line that is not one)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 5 or not parts[0].isdigit():
        return None
    entry: dict[str, Any] = {"index": int(parts[0])}
    for key, raw in zip(("util_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w"),
                        parts[1:], strict=True):
        value = number(raw)
        if value is not None:
            entry[key] = value
    return entry


# -- plain `nvidia-smi` table (last resort) ---------------------------------------------------
_ROW1 = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off)\s*$")
_ROW2 = re.compile(
    r"(?P<temp>\d+)C\s+(?P<perf>P\d+)\s+(?:(?P<pwr>\d+)W|N/A)\s*/\s*(?:(?P<cap>\d+)W|N/A)"
)
_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_PROC = re.compile(r"^\|\s+(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(.+?)\s+(\d+)MiB\s*\|$")


def parse_smi_table(text: str) -> dict[str, Any]:
    """The default ``nvidia-smi`` table -> snapshot dict (fewer keys than the XML)."""
    driver = re.search(r"Driver Version:\s*(\S+)", text)
    cuda = re.search(r"CUDA Version:\s*(\S+)", text)
    devices: list[Device] = []
    current: Device | None = None
    stage = 0
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (m := _ROW1.match(cells[0])):
            current = {"index": int(m.group(1)), "name": m.group(2).strip(),
                       "persistence_mode": m.group(3) == "On",
                       "pci_bus_id": cells[1].split()[0] if cells[1] else None,
                       "ecc_errors_uncorrected": integer(cells[2]), "processes": []}
            devices.append(current)
            stage = 1
        elif current is not None and stage == 1 and len(cells) == 3:
            if m2 := _ROW2.search(cells[0]):
                current["temperature_c"] = float(m2.group("temp"))
                current["performance_state"] = m2.group("perf")
                current["power_draw_w"] = number(m2.group("pwr"))
                current["power_limit_w"] = number(m2.group("cap"))
            if mem := _MEM.search(cells[1]):
                current["memory_used_mib"] = float(mem.group(1))
                current["memory_total_mib"] = float(mem.group(2))
                current["memory_class_gb"] = memory_class_gb(float(mem.group(2)))
            util = cells[2].split()
            if util:
                current["util_gpu_pct"] = number(util[0])
                current["compute_mode"] = util[1] if len(util) > 1 else None
            stage = 2
        elif current is not None and stage == 2 and len(cells) == 3 and not cells[0]:
            current["mig_enabled"] = flag(cells[2])
            stage = 0
        elif (p := _PROC.match(line.strip())) and devices:
            idx = int(p.group(1))
            for dev in devices:
                if dev["index"] == idx:
                    dev["processes"].append({
                        "pid": int(p.group(4)), "type": p.group(5), "name": p.group(6),
                        "used_memory_mib": float(p.group(7)),
                    })
    if not devices:
        raise ParseError("no GPU rows in the nvidia-smi table")
    return {"driver_version": driver.group(1) if driver else None,
            "cuda_version": cuda.group(1) if cuda else None,
            "gpu_count": len(devices), "devices": devices, "warnings": []}


# -- nvidia-smi -L ------------------------------------------------------------------------------
_L_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")
_L_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)")


def parse_list(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -L`` -> [{index, name, uuid, mig: [{profile, index, uuid}]}]."""
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        if m := _L_GPU.match(line):
            gpus.append({"index": int(m.group(1)), "name": m.group(2).strip(),
                         "uuid": m.group(3).strip(), "mig": []})
        elif (m := _L_MIG.match(line)) and gpus:
            gpus[-1]["mig"].append({"profile": m.group(1), "index": int(m.group(2)),
                                    "uuid": m.group(3).strip()})
    return gpus


def merge_list(snapshot: dict[str, Any], listing: list[dict[str, Any]]) -> list[str]:
    """Add MIG profiles from ``-L`` and stub entries for GPUs the XML left out; returns notes."""
    notes: list[str] = []
    devices: list[Device] = snapshot["devices"]
    by_uuid = {d.get("uuid"): d for d in devices if d.get("uuid")}
    for gpu in listing:
        dev = by_uuid.get(gpu["uuid"])
        if dev is None:
            devices.append({"index": gpu["index"], "name": gpu["name"], "uuid": gpu["uuid"],
                            "detail": "listed by nvidia-smi -L only"})
            continue
        dev["index"] = gpu["index"]
        migs = {m["index"]: m for m in gpu["mig"]}
        for mig in dev.get("mig_devices") or []:
            extra = migs.get(mig.get("index"))
            if extra:
                mig["profile"] = extra["profile"]
                mig["uuid"] = extra["uuid"]
    missing = [d for d in devices if d.get("detail")]
    if missing:
        notes.append(
            f"nvidia-smi -q -x described {len(devices) - len(missing)} of {len(devices)} GPUs; "
            f"GPU {', '.join(str(d['index']) for d in missing)} come from nvidia-smi -L only "
            "(name and UUID, no health data)"
        )
    devices.sort(key=lambda d: d.get("index", 0))
    snapshot["gpu_count"] = max(snapshot.get("gpu_count") or 0, len(devices))
    return notes
