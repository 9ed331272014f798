"""NVML source: the mapping on a stand-in with recorded values, and the real pynvml here
(no NVIDIA driver on this machine: LibraryNotFound -> skipped)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.hosts.local import LocalHost
from inferfit.probes.gpu import GpuProbe
from inferfit.probes.gpu_health import judge
from inferfit.probes.gpu_nvml import NvmlFailed, nvml_sample, read_nvml


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class StandInNVML:
    """Answers like pynvml with the values of the A100-SXM4-80GB capture (driver 535.54.03,
    MIG on, 4x 1g.20gb) for GPU 0; functions listed in ``unsupported`` raise Not Supported."""

    def __init__(self, init_error: int | None = None, unsupported: tuple[str, ...] = ()) -> None:
        self.init_error = init_error
        self.unsupported = set(unsupported)
        self.shutdown = False

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "unsupported"):
            def raise_not_supported(*_: Any) -> Any:
                raise NVMLError(3)
            return raise_not_supported
        return object.__getattribute__(self, name)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return "535.54.03"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12020

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"gpu{i}"

    def nvmlDeviceGetName(self, h: str) -> bytes:
        return b"NVIDIA A100-SXM4-80GB MIG 1g.20gb" if "mig" in h else b"NVIDIA A100-SXM4-80GB"

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return f"MIG-{h}" if "mig" in h else "GPU-513536b6-7d19-9063-b049-1e69664bb298"

    def nvmlDeviceGetSerial(self, h: str) -> str:
        return "1650522003820"

    def nvmlDeviceGetPciInfo(self, h: str) -> Any:
        return SimpleNamespace(busId=b"00000000:01:00.0")

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        mib = 1024 * 1024
        if "mig" in h:
            return SimpleNamespace(total=19968 * mib, used=12 * mib, free=19955 * mib)
        return SimpleNamespace(total=81920 * mib, used=50 * mib, free=80999 * mib)

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        return SimpleNamespace(gpu=0, memory=0)

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        return 27

    def nvmlDeviceGetTemperatureThreshold(self, h: str, kind: int) -> int:
        return {0: 92, 1: 89}[kind]

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return 67030

    def nvmlDeviceGetEnforcedPowerLimit(self, h: str) -> int:
        return 500000

    def nvmlDeviceGetPerformanceState(self, h: str) -> int:
        return 0

    def nvmlDeviceGetClockInfo(self, h: str, clock: int) -> int:
        return {1: 1275, 2: 1593}[clock]

    def nvmlDeviceGetMaxClockInfo(self, h: str, clock: int) -> int:
        return {1: 1410, 2: 1593}[clock]

    def nvmlDeviceGetPersistenceMode(self, h: str) -> int:
        return 0

    def nvmlDeviceGetComputeMode(self, h: str) -> int:
        return 0

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: str) -> int:
        return 4

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: str) -> int:
        return 4

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: str) -> int:
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: str) -> int:
        return 16

    def nvmlDeviceGetEccMode(self, h: str) -> list[int]:
        return [1, 1]

    def nvmlDeviceGetTotalEccErrors(self, h: str, kind: int, counter: int) -> int:
        return 0

    def nvmlDeviceGetRetiredPages(self, h: str, cause: int) -> list[int]:
        raise NVMLError(3)  # A100 uses row remapping instead: Not Supported

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: str) -> int:
        raise NVMLError(3)

    def nvmlDeviceGetRemappedRows(self, h: str) -> tuple[int, int, int, int]:
        return (0, 0, 0, 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        return 0

    def nvmlDeviceGetMigMode(self, h: str) -> list[int]:
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: str) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: str, i: int) -> str:
        if i >= 4:
            raise NVMLError(6)  # NOT_FOUND: slot empty
        return f"{h}-mig{i}"

    def nvmlDeviceGetGpuInstanceId(self, h: str) -> int:
        return 3 + int(h[-1])

    def nvmlDeviceGetComputeInstanceId(self, h: str) -> int:
        return 0

    def nvmlDeviceGetAttributes(self, h: str) -> Any:
        return SimpleNamespace(multiprocessorCount=14)

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any]:
        return []


def test_stand_in_maps_like_the_xml():
    snap = read_nvml(StandInNVML())
    assert snap["driver_version"] == "535.54.03"
    assert snap["cuda_version"] == "12.2"
    assert snap["gpu_count"] == 1
    (dev,) = snap["devices"]
    assert dev["name"] == "NVIDIA A100-SXM4-80GB"
    assert dev["pci_bus_id"] == "00000000:01:00.0"
    assert dev["memory_total_mib"] == 81920
    assert dev["memory_class_gb"] == 80
    assert dev["power_draw_w"] == 67.03
    assert dev["power_limit_w"] == 500.0
    assert dev["clock_sm_max_mhz"] == 1410
    assert dev["temperature_slowdown_c"] == 89
    assert dev["performance_state"] == "P0"
    assert dev["compute_mode"] == "Default"
    assert dev["persistence_mode"] is False
    assert dev["ecc_enabled"] is True
    assert dev["ecc_errors_uncorrected"] == 0
    assert dev["retired_pages_dbe"] is None  # Not Supported -> unknown
    assert dev["remapped_rows_pending"] is False
    assert dev["throttle_reasons"] == []
    assert dev["mig_enabled"] is True
    assert [(m["profile"], m["gpu_instance_id"], m["memory_total_mib"])
            for m in dev["mig_devices"]] == [("1g.20gb", 3 + i, 19968) for i in range(4)]
    status, summary, _ = judge(snap, {})
    assert status == "ok"
    assert "MIG on 1 GPU(s) with 4 instance(s)" in summary


def test_unsupported_calls_leave_keys_out_and_reasons_decode():
    nvml = StandInNVML(unsupported=("nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature"))
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x1 | 0x4  # type: ignore[method-assign]
    (dev,) = read_nvml(nvml)["devices"]
    assert dev["power_draw_w"] is None
    assert dev["temperature_c"] is None
    assert dev["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert nvml.shutdown is True


@pytest.mark.parametrize(("code", "kind"), [
    (12, "nvml_library_not_found"), (9, "driver_not_loaded"), (18, "driver_library_mismatch"),
    (14, "inforom_corrupted"), (15, "gpu_lost"), (999, "nvml_unknown_error"),
])
def test_init_errors_are_classified(code, kind):
    with pytest.raises(NvmlFailed) as info:
        read_nvml(StandInNVML(init_error=code))
    assert info.value.failure.kind == kind


def test_lost_gpu_is_kept_as_a_failing_entry():
    nvml = StandInNVML(unsupported=("nvmlDeviceGetHandleByIndex",))
    snap = read_nvml(nvml)
    assert snap["devices"][0]["detail"].startswith("unreadable")
    status, _, _ = judge(snap, {})
    assert status == "fail"


def test_nvml_sample_keys():
    assert nvml_sample(StandInNVML()) == [
        {"index": 0, "util_gpu_pct": 0, "memory_used_mib": 50.0, "memory_total_mib": 81920.0,
         "power_draw_w": 67.03}]


def test_real_pynvml_has_no_library_here():
    import pynvml

    assert not any(Path("/dev").glob("nvidia*"))
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()
    with pytest.raises(NvmlFailed) as info:
        read_nvml(pynvml)
    assert info.value.failure.kind == "nvml_library_not_found"


@pytest.mark.parametrize("source", ["nvml", "auto"])
def test_local_check_without_driver_is_skipped(source):
    probe = GpuProbe()
    ctx = ProbeContext(options={"source": source, "read_kernel_log": False}, config=Config())
    result = asyncio.run(probe.check(LocalHost(), ctx))
    assert result.status == "skipped"
    assert result.error_kind == "no_gpu"
    assert "no NVIDIA GPU" in result.summary


def test_nvml_watch_yields_and_shuts_down():
    from inferfit.probes.gpu import _watch_nvml

    nvml = StandInNVML()

    async def take() -> list[Any]:
        out = []
        stream = _watch_nvml(nvml, 100)
        async for sample in stream:
            out.append(sample)
            if len(out) == 2:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return out

    samples = asyncio.run(take())
    assert [s.values["gpus"][0]["power_draw_w"] for s in samples] == [67.03, 67.03]
    assert nvml.shutdown is True


def test_local_watch_without_nvml_or_nvidia_smi_ends():
    async def take() -> list[Any]:
        return [s async for s in GpuProbe().watch(LocalHost(), ProbeContext(options={},
                                                                         config=Config()))]

    assert asyncio.run(take()) == []
