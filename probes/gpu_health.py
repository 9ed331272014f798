"""Health verdicts for the GPU probe: per GPU and for the box, each with its reasons in words.

Pure functions of the parsed values and the ``[probes.gpu]`` options; see docs/gpu.md
for every rule and the threshold keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferfit.findings import Status, worst

from .gpu_parse import SLOWDOWN_REASONS, normalize_bus_id

DEFAULT_FAIL_XIDS = (48, 63, 64, 74, 79, 94, 95, 119, 120)
# Below this utilisation a GPU counts as idle (power-cap throttling then is suspicious).
_IDLE_UTIL_PCT = 10.0


def _is_idle(dev: Mapping[str, Any]) -> bool:
    util = dev.get("util_gpu_pct")
    if util is not None:
        return bool(util < _IDLE_UTIL_PCT)
    if "gpu_idle" in (dev.get("throttle_reasons") or []):
        return True
    pstate = str(dev.get("performance_state") or "")
    return pstate[1:].isdigit() and int(pstate[1:]) >= 8


def judge_device(dev: dict[str, Any], options: Mapping[str, Any]) -> tuple[Status, list[str],
                                                                          list[str]]:
    """(health, reasons for warn/fail, informational notes) for one GPU."""
    if dev.get("detail") and not dev.get("error_kind"):
        return "skipped", [], []  # listed by nvidia-smi -L only: nothing to judge
    fail, warn, info = _device_findings(dev, options)
    status: Status = "fail" if fail else "warn" if warn else "ok"
    return status, fail + warn, info


def _device_findings(dev: dict[str, Any], options: Mapping[str, Any]
                     ) -> tuple[list[str], list[str], list[str]]:
    """(fail reasons, warn reasons, informational notes) for one GPU."""
    fail: list[str] = []
    warn: list[str] = []
    info: list[str] = []
    if dev.get("detail"):
        if dev.get("error_kind"):  # unreadable through NVML (e.g. GPU lost)
            fail.append(str(dev["detail"]))
        return fail, warn, info
    # Memory errors: any uncorrectable error, pending retirement/remap, remap failure.
    unc = dev.get("ecc_errors_uncorrected")
    if unc:
        fail.append(f"{unc} uncorrectable ECC error(s) (volatile "
                    f"{dev.get('ecc_errors_uncorrected_volatile', 'n/a')}, aggregate "
                    f"{dev.get('ecc_errors_uncorrected_aggregate', 'n/a')})")
    if dev.get("retired_pages_pending"):
        fail.append("page retirement pending: the GPU needs a reset to retire bad memory")
    if dev.get("remapped_rows_pending"):
        fail.append("row remapping pending: the GPU needs a reset to remap bad memory rows")
    if dev.get("remapped_rows_failure"):
        fail.append("row remapping failed: the GPU ran out of spare memory rows (RMA)")
    if dev.get("remapped_rows_uncorrectable"):
        warn.append(f"{dev['remapped_rows_uncorrectable']} memory row(s) already remapped "
                    "after uncorrectable errors")
    if dev.get("retired_pages_dbe"):
        warn.append(f"{dev['retired_pages_dbe']} page(s) already retired after double-bit errors")
    if dev.get("reset_required"):
        fail.append("the driver reports that the GPU needs a reset")
    action = dev.get("recovery_action")
    if action and action.lower() != "none":
        fail.append(f"the driver asks for recovery action: {action}")
    for mig in dev.get("mig_devices") or []:
        if mig.get("ecc_errors_uncorrected"):
            fail.append(f"MIG device {mig.get('index')}: {mig['ecc_errors_uncorrected']} "
                        "uncorrectable SRAM ECC error(s)")
    # Clocks held down.
    idle = _is_idle(dev)
    active = [r for r in dev.get("throttle_reasons") or [] if r in SLOWDOWN_REASONS]
    hardware = [r for r in active if r != "sw_power_cap"]
    if hardware:
        warn.append(f"clocks slowed by {', '.join(hardware)}: check cooling and power delivery")
    if "sw_power_cap" in active:
        if idle:
            warn.append("held at the software power cap while idle")
        else:
            info.append("at its power cap under load (expected when busy)")
    # Temperature.
    temp = dev.get("temperature_c")
    temp_warn = float(options.get("temperature_warn_c", 85.0))
    slowdown = dev.get("temperature_slowdown_c")
    if temp is not None and (temp >= temp_warn or (slowdown and temp >= slowdown - 5)):
        limit = f"slowdown at {slowdown:g} C" if slowdown else f"warn at {temp_warn:g} C"
        warn.append(f"running hot: {temp:g} C ({limit})")
    # PCIe link.
    width, width_max = dev.get("pcie_width_current"), dev.get("pcie_width_max")
    if width and width_max and width < width_max:
        warn.append(f"PCIe link x{width} of x{width_max}: check the slot, riser and BIOS "
                    "bifurcation")
    gen, gen_max = dev.get("pcie_gen_current"), dev.get("pcie_gen_max")
    if gen and gen_max and gen < gen_max:
        if idle:
            info.append(f"PCIe Gen{gen} of Gen{gen_max} at idle (normal power saving; "
                        "re-check under load)")
        else:
            warn.append(f"PCIe Gen{gen} of Gen{gen_max} while busy: check the slot and BIOS "
                        "link speed")
    # Memory already in use on a box that should be empty.
    procs = [p for p in dev.get("processes") or [] if (p.get("type") or "C") != "G"]
    used = dev.get("memory_used_mib")
    used_warn = float(options.get("memory_used_warn_mib", 512.0))
    if procs:
        listed = ", ".join(f"{p.get('name') or '?'} (pid {p.get('pid')}, "
                           f"{p.get('used_memory_mib', 0):g} MiB)" for p in procs[:3])
        more = f" and {len(procs) - 3} more" if len(procs) > 3 else ""
        warn.append(f"{len(procs)} compute process(es) already use GPU memory: {listed}{more}")
    elif used is not None and used > used_warn:
        warn.append(f"{used:g} MiB of GPU memory already in use with no process listed "
                    "(another container or VM?)")
    # Configuration notes.
    if dev.get("mig_enabled_pending") is not None and dev.get("mig_enabled") is not None \
            and dev["mig_enabled_pending"] != dev["mig_enabled"]:
        warn.append("a MIG mode change is pending until the GPU is reset")
    if dev.get("ecc_enabled_pending") is not None and dev.get("ecc_enabled") is not None \
            and dev["ecc_enabled_pending"] != dev["ecc_enabled"]:
        info.append("an ECC mode change is pending until the next reboot")
    if dev.get("persistence_mode") is False:
        info.append("persistence mode is off (first CUDA call pays the driver init time)")
    return fail, warn, info


def _device_for_pci(devices: list[dict[str, Any]], pci: str) -> dict[str, Any] | None:
    for dev in devices:
        if normalize_bus_id(dev.get("pci_bus_id")) == pci:
            return dev
    return None


def judge(values: dict[str, Any], options: Mapping[str, Any]) -> tuple[Status, str, list[str]]:
    """Set ``health``/``reasons`` on every device; return (status, summary, notes) for the box.

    Notes list the fail reasons first, then warnings, then informational remarks; the
    summary names the GPUs and, when something is wrong, the first worst reason.
    """
    devices: list[dict[str, Any]] = values.get("devices", [])
    issues: list[tuple[Status, str]] = []
    remarks: list[str] = []
    for device in devices:
        health, reasons, _ = judge_device(device, options)
        device["health"] = health
        if reasons:
            device["reasons"] = reasons
        if health == "skipped":
            continue
        fail, warn, info = _device_findings(device, options)
        label = f"GPU {device.get('index')}"
        issues += [("fail", f"{label}: {r}") for r in fail]
        issues += [("warn", f"{label}: {r}") for r in warn]
        remarks += [f"{label}: {r}" for r in info]
    fail_xids = {int(x) for x in options.get("fail_xids", DEFAULT_FAIL_XIDS)}
    for event in values.get("xid_events", []):
        dev: dict[str, Any] | None = _device_for_pci(devices, event["pci"])
        where = f"GPU {dev.get('index')}" if dev else f"PCI {event['pci']}"
        severity: Status = "fail" if event["xid"] in fail_xids else "warn"
        text = (f"XID {event['xid']} ({event['meaning']}) on {where}, "
                f"{event['count']}x in the kernel log")
        if dev is not None:
            dev.setdefault("reasons", []).append(text)
            dev["health"] = worst([dev.get("health", "ok"), severity])
        issues.append((severity, text))
    described = [d for d in devices if not d.get("detail")]
    if values.get("gpu_count") and values["gpu_count"] > len(devices):
        remarks.append(f"{values['gpu_count']} GPUs attached but only {len(described)} "
                       "described by nvidia-smi (normal on some MIG setups; nvidia-smi -L "
                       "lists them all)")
    expected_count = int(options.get("expected_count", 0) or 0)
    count = values.get("gpu_count")
    if expected_count and count != expected_count:
        issues.append(("fail", f"expected {expected_count} GPU(s), found {count}"))
    expected_model = str(options.get("expected_model", "") or "").strip()
    if expected_model:
        wrong = sorted({str(d.get("name")) for d in devices
                        if expected_model.lower() not in str(d.get("name", "")).lower()})
        if wrong:
            issues.append(("fail",
                           f"expected model {expected_model!r}, found {', '.join(wrong)}"))
    topo = values.get("topology")
    if isinstance(topo, dict) and topo.get("interconnect") == "mixed":
        issues.append(("warn", f"NVLink links only {topo['nvlink_pairs']} of "
                               f"{topo['nvlink_pairs'] + topo['pcie_pairs']} GPU pairs; the "
                               "others go over PCIe (missing or down NVLink?)"))
    elif isinstance(topo, dict) and topo.get("nvlinks_per_pair_min") != \
            topo.get("nvlinks_per_pair_max"):
        issues.append(("warn", f"uneven NVLink bonding: {topo['nvlinks_per_pair_min']} to "
                               f"{topo['nvlinks_per_pair_max']} links per GPU pair (a link is "
                               "down?)"))
    status = worst([s for s, _ in issues]) if issues else "ok"
    ordered = [t for s, t in issues if s == "fail"] + [t for s, t in issues if s == "warn"]
    summary = summarize(values)
    if ordered:
        more = f" (+{len(ordered) - 1} more)" if len(ordered) > 1 else ""
        summary = f"{summary} — {status}: {ordered[0]}{more}"
    return status, summary, ordered + remarks


def summarize(values: Mapping[str, Any]) -> str:
    devices = [d for d in values.get("devices", []) if d.get("name")]
    names: dict[str, int] = {}
    for dev in devices:
        names[str(dev["name"])] = names.get(str(dev["name"]), 0) + 1
    count = values.get("gpu_count", len(devices))
    parts = []
    if names:
        parts.append(" + ".join(f"{n}x {name}" for name, n in names.items()))
    else:
        parts.append(f"{count} GPU(s)")
    classes = {d.get("memory_class_gb") for d in devices if d.get("memory_class_gb")}
    if len(classes) == 1:
        parts.append(f"{classes.pop()} GB class" + (" each" if len(devices) > 1 else ""))
    mig = [d for d in devices if d.get("mig_enabled")]
    if mig:
        n = sum(len(d.get("mig_devices") or []) for d in mig)
        parts.append(f"MIG on {len(mig)} GPU(s) with {n} instance(s)")
    if values.get("driver_version"):
        parts.append(f"driver {values['driver_version']}")
    if values.get("cuda_version"):
        parts.append(f"CUDA {values['cuda_version']}")
    return ", ".join(parts)
