"""NVML source for the GPU probe: the same findings as ``nvidia-smi -q -x``, read through pynvml.

Only for the machine inferfit runs on (NVML is a local library). ``read_nvml`` takes
the pynvml module, or any stand-in object with the same functions, so the mapping is
tested with recorded values on machines without a GPU. Every per-device call that
raises (Not Supported, an older driver without the function) leaves its key out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .gpu_events import Failure, failure, failure_for_code
from .gpu_parse import memory_class_gb

MIB = 1024 * 1024
# NVML constants (stable across NVML versions; spelled here so a stand-in needs none).
TEMPERATURE_GPU = 0
THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN = 0, 1
CLOCK_SM, CLOCK_MEM = 1, 2
ERROR_CORRECTED, ERROR_UNCORRECTED = 0, 1
VOLATILE_ECC, AGGREGATE_ECC = 0, 1
RETIRED_SBE, RETIRED_DBE = 0, 1
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
REASON_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


class NvmlFailed(Exception):
    """nvmlInit (or the device count) failed: carries the classified failure."""

    def __init__(self, failure: Failure, code: int | None) -> None:
        super().__init__(failure.summary)
        self.failure = failure
        self.code = code


def _call(nvml: Any, name: str, *args: Any) -> Any:
    fn: Callable[..., Any] | None = getattr(nvml, name, None)
    if fn is None:
        return None
    try:
        value = fn(*args)
    except Exception:  # NVMLError_NotSupported & co: the key is simply unknown
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _mib(value: Any) -> float | None:
    return None if value is None else round(float(value) / MIB, 1)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(float(milliwatts) / 1000, 2)


def _attr(obj: Any, name: str) -> Any:
    return None if obj is None else getattr(obj, name, None)


def _cuda_version(raw: Any) -> str | None:
    if not isinstance(raw, int) or raw <= 0:
        return None
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def _pair(value: Any) -> tuple[Any, Any]:
    if isinstance(value, list | tuple) and len(value) >= 2:
        return value[0], value[1]
    return None, None


def _device(nvml: Any, index: int) -> dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    mem = _call(nvml, "nvmlDeviceGetMemoryInfo", h)
    util = _call(nvml, "nvmlDeviceGetUtilizationRates", h)
    pci = _call(nvml, "nvmlDeviceGetPciInfo", h)
    ecc_cur, ecc_pend = _pair(_call(nvml, "nvmlDeviceGetEccMode", h))
    mig_cur, mig_pend = _pair(_call(nvml, "nvmlDeviceGetMigMode", h))
    remap = _call(nvml, "nvmlDeviceGetRemappedRows", h)
    reasons = _call(nvml, "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None:
        reasons = _call(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    pstate = _call(nvml, "nvmlDeviceGetPerformanceState", h)
    persistence = _call(nvml, "nvmlDeviceGetPersistenceMode", h)
    retired_pending = _call(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", h)
    sbe = _call(nvml, "nvmlDeviceGetRetiredPages", h, RETIRED_SBE)
    dbe = _call(nvml, "nvmlDeviceGetRetiredPages", h, RETIRED_DBE)
    total = _mib(_attr(mem, "total"))
    unc_v = _call(nvml, "nvmlDeviceGetTotalEccErrors", h, ERROR_UNCORRECTED, VOLATILE_ECC)
    unc_a = _call(nvml, "nvmlDeviceGetTotalEccErrors", h, ERROR_UNCORRECTED, AGGREGATE_ECC)
    bus = _attr(pci, "busId")
    dev: dict[str, Any] = {
        "index": index,
        "name": _call(nvml, "nvmlDeviceGetName", h),
        "uuid": _call(nvml, "nvmlDeviceGetUUID", h),
        "serial": _call(nvml, "nvmlDeviceGetSerial", h),
        "pci_bus_id": bus.decode() if isinstance(bus, bytes) else bus,
        "vbios_version": _call(nvml, "nvmlDeviceGetVbiosVersion", h),
        "memory_total_mib": total,
        "memory_class_gb": memory_class_gb(total),
        "memory_used_mib": _mib(_attr(mem, "used")),
        "memory_free_mib": _mib(_attr(mem, "free")),
        "util_gpu_pct": _attr(util, "gpu"),
        "util_memory_pct": _attr(util, "memory"),
        "temperature_c": _call(nvml, "nvmlDeviceGetTemperature", h, TEMPERATURE_GPU),
        "temperature_slowdown_c": _call(nvml, "nvmlDeviceGetTemperatureThreshold", h,
                                        THRESHOLD_SLOWDOWN),
        "temperature_shutdown_c": _call(nvml, "nvmlDeviceGetTemperatureThreshold", h,
                                        THRESHOLD_SHUTDOWN),
        "fan_pct": _call(nvml, "nvmlDeviceGetFanSpeed", h),
        "power_draw_w": _watts(_call(nvml, "nvmlDeviceGetPowerUsage", h)),
        "power_limit_w": _watts(_call(nvml, "nvmlDeviceGetEnforcedPowerLimit", h)),
        "performance_state": f"P{pstate}" if isinstance(pstate, int) else None,
        "clock_sm_mhz": _call(nvml, "nvmlDeviceGetClockInfo", h, CLOCK_SM),
        "clock_sm_max_mhz": _call(nvml, "nvmlDeviceGetMaxClockInfo", h, CLOCK_SM),
        "clock_mem_mhz": _call(nvml, "nvmlDeviceGetClockInfo", h, CLOCK_MEM),
        "clock_mem_max_mhz": _call(nvml, "nvmlDeviceGetMaxClockInfo", h, CLOCK_MEM),
        "persistence_mode": None if persistence is None else persistence == 1,
        "compute_mode": COMPUTE_MODES.get(_call(nvml, "nvmlDeviceGetComputeMode", h)),
        "pcie_gen_current": _call(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", h),
        "pcie_gen_max": _call(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", h),
        "pcie_width_current": _call(nvml, "nvmlDeviceGetCurrPcieLinkWidth", h),
        "pcie_width_max": _call(nvml, "nvmlDeviceGetMaxPcieLinkWidth", h),
        "ecc_enabled": None if ecc_cur is None else ecc_cur == 1,
        "ecc_enabled_pending": None if ecc_pend is None else ecc_pend == 1,
        "ecc_errors_corrected_volatile": _call(nvml, "nvmlDeviceGetTotalEccErrors", h,
                                               ERROR_CORRECTED, VOLATILE_ECC),
        "ecc_errors_corrected_aggregate": _call(nvml, "nvmlDeviceGetTotalEccErrors", h,
                                                ERROR_CORRECTED, AGGREGATE_ECC),
        "ecc_errors_uncorrected_volatile": unc_v,
        "ecc_errors_uncorrected_aggregate": unc_a,
        "ecc_errors_uncorrected": max((v for v in (unc_v, unc_a) if v is not None),
                                      default=None),
        "retired_pages_sbe": len(sbe) if isinstance(sbe, list) else None,
        "retired_pages_dbe": len(dbe) if isinstance(dbe, list) else None,
        "retired_pages_pending": None if retired_pending is None else retired_pending == 1,
        "throttle_reasons": None if not isinstance(reasons, int) else
        [name for bit, name in REASON_BITS.items() if reasons & bit],
        "mig_enabled": None if mig_cur is None else mig_cur == 1,
        "mig_enabled_pending": None if mig_pend is None else mig_pend == 1,
        "mig_devices": _mig_devices(nvml, h) if mig_cur == 1 else [],
        "processes": _processes(nvml, h),
    }
    if isinstance(remap, list | tuple) and len(remap) >= 4:
        dev["remapped_rows_correctable"] = remap[0]
        dev["remapped_rows_uncorrectable"] = remap[1]
        dev["remapped_rows_pending"] = bool(remap[2])
        dev["remapped_rows_failure"] = bool(remap[3])
    return dev


def _mig_devices(nvml: Any, h: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    count = _call(nvml, "nvmlDeviceGetMaxMigDeviceCount", h) or 0
    for i in range(int(count)):
        mh = _call(nvml, "nvmlDeviceGetMigDeviceHandleByIndex", h, i)
        if mh is None:
            continue
        mem = _call(nvml, "nvmlDeviceGetMemoryInfo", mh)
        name = _call(nvml, "nvmlDeviceGetName", mh) or ""
        attrs = _call(nvml, "nvmlDeviceGetAttributes", mh)
        out.append({
            "index": len(out),
            "profile": name.rsplit("MIG ", 1)[1].strip() if "MIG " in name else None,
            "uuid": _call(nvml, "nvmlDeviceGetUUID", mh),
            "gpu_instance_id": _call(nvml, "nvmlDeviceGetGpuInstanceId", mh),
            "compute_instance_id": _call(nvml, "nvmlDeviceGetComputeInstanceId", mh),
            "multiprocessor_count": _attr(attrs, "multiprocessorCount"),
            "memory_total_mib": _mib(_attr(mem, "total")),
            "memory_used_mib": _mib(_attr(mem, "used")),
            "memory_free_mib": _mib(_attr(mem, "free")),
        })
    return out


def _processes(nvml: Any, h: Any) -> list[dict[str, Any]]:
    procs = _call(nvml, "nvmlDeviceGetComputeRunningProcesses", h) or []
    return [{"pid": _attr(p, "pid"), "type": "C",
             "used_memory_mib": _mib(_attr(p, "usedGpuMemory"))} for p in procs]


def read_nvml(nvml: Any) -> dict[str, Any]:
    """Init NVML, read every GPU, shut down. Raises NvmlFailed with the failure class."""
    try:
        nvml.nvmlInit()
    except Exception as exc:
        code = getattr(exc, "value", None)
        raise NvmlFailed(failure_for_code(code, str(exc)), code) from None
    try:
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            code = getattr(exc, "value", None)
            raise NvmlFailed(failure_for_code(code, str(exc)), code) from None
        if count == 0:
            raise NvmlFailed(failure("no_devices", "NVML counts 0 GPUs"), 6)
        devices = []
        for i in range(count):
            try:
                devices.append(_device(nvml, i))
            except Exception as exc:  # e.g. GPU is lost: keep the others
                code = getattr(exc, "value", None)
                lost = failure_for_code(code, str(exc))
                devices.append({"index": i, "detail": f"unreadable: {lost.summary}",
                                "error_kind": lost.kind})
        return {
            "driver_version": _call(nvml, "nvmlSystemGetDriverVersion"),
            "cuda_version": _cuda_version(
                _call(nvml, "nvmlSystemGetCudaDriverVersion_v2")
                or _call(nvml, "nvmlSystemGetCudaDriverVersion")),
            "gpu_count": count,
            "devices": devices,
            "warnings": [],
        }
    finally:
        _call(nvml, "nvmlShutdown")


def read_local_nvml() -> dict[str, Any]:
    """read_nvml with the real pynvml (nvidia-ml-py); blocking, call it in a thread."""
    import pynvml  # deferred: the module loads the library lazily, but keep imports cheap

    return read_nvml(pynvml)


def nvml_sample(nvml: Any) -> list[dict[str, Any]]:
    """One live reading per GPU (the console's Sample values); NVML must be initialised."""
    gpus = []
    for i in range(int(nvml.nvmlDeviceGetCount())):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        mem = _call(nvml, "nvmlDeviceGetMemoryInfo", h)
        entry = {
            "index": i,
            "util_gpu_pct": _attr(_call(nvml, "nvmlDeviceGetUtilizationRates", h), "gpu"),
            "memory_used_mib": _mib(_attr(mem, "used")),
            "memory_total_mib": _mib(_attr(mem, "total")),
            "power_draw_w": _watts(_call(nvml, "nvmlDeviceGetPowerUsage", h)),
        }
        gpus.append({k: v for k, v in entry.items() if v is not None})
    return gpus
