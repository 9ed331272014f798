"""Pure parsers for the GPU probe's side channels, and the failure classes of nvidia-smi/NVML.

- ``parse_topology``: ``nvidia-smi topo -m`` (NVLink vs PCIe between GPUs).
- ``parse_xid``: NVIDIA XID errors in ``dmesg`` / ``journalctl -k`` text.
- ``classify_failure`` / ``failure_for_code``: an nvidia-smi exit status and output, or an
  NVML error code, -> a named failure class with a one-sentence fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .gpu_parse import normalize_bus_id

# -- topology ----------------------------------------------------------------------------------
_LINK = re.compile(r"^(X|NV\d+|SYS|NODE|PHB|PXB|PIX|SOC|PSB|CNS|NS|N/A)$")


def parse_topology(text: str) -> dict[str, Any] | None:
    """``nvidia-smi topo -m`` -> {gpus, matrix, interconnect, nvlink_pairs, pcie_pairs, ...}.

    ``matrix[i][j]`` is the link between GPU i and GPU j as printed (``NV18``, ``SYS``...).
    ``interconnect`` is "nvlink" (every GPU pair on NVLink), "pcie" (none), or "mixed".
    Returns None when there is no GPU matrix (one GPU, or unreadable output).
    """
    lines = [ln.rstrip() for ln in text.splitlines()]
    header_at = next((i for i, ln in enumerate(lines) if re.search(r"\bGPU0\b", ln)
                      and not re.match(r"\s*GPU0\s+X\b", ln)), None)
    if header_at is None:
        return None
    header = [h for h in re.split(r"\t+|\s{2,}", lines[header_at].strip()) if h]
    devices: list[str] = []
    for name in header:
        if "Affinity" in name or "NUMA" in name:
            break
        devices.append(name)
    extras = header[len(devices):]
    gpus = [d for d in devices if re.fullmatch(r"GPU\d+", d)]
    matrix: list[list[str]] = []
    cpu_affinity: list[str] = []
    numa_affinity: list[str] = []
    for line in lines[header_at + 1:]:
        tokens = line.split()
        if not tokens or not re.fullmatch(r"GPU\d+", tokens[0]):
            if matrix and (not tokens or tokens[0].startswith("Legend")):
                break
            continue
        cells = tokens[1:1 + len(devices)]
        if len(cells) < len(devices) or not all(_LINK.match(c) for c in cells):
            continue
        row = [c for c, name in zip(cells, devices, strict=True) if name in gpus]
        matrix.append(row)
        rest = dict(zip(extras, tokens[1 + len(devices):], strict=False))
        cpu_affinity.append(rest.get("CPU Affinity", ""))
        numa_affinity.append(rest.get("NUMA Affinity", ""))
    if len(gpus) < 2 or not matrix:
        return None
    nvlink = pcie = 0
    counts: list[int] = []
    for i, row in enumerate(matrix):
        for j, link in enumerate(row):
            if j <= i:
                continue
            if link.startswith("NV"):
                nvlink += 1
                counts.append(int(link[2:]))
            elif link != "X":
                pcie += 1
    topo: dict[str, Any] = {
        "gpus": gpus[:len(matrix)],
        "matrix": matrix,
        "nvlink_pairs": nvlink,
        "pcie_pairs": pcie,
        "interconnect": "nvlink" if nvlink and not pcie else "pcie" if not nvlink else "mixed",
    }
    if counts:
        topo["nvlinks_per_pair_min"] = min(counts)
        topo["nvlinks_per_pair_max"] = max(counts)
    if any(cpu_affinity):
        topo["cpu_affinity"] = cpu_affinity
    if any(numa_affinity):
        topo["numa_affinity"] = numa_affinity
    if len(matrix) < len(gpus):
        topo["truncated"] = True
    return topo


# -- XID errors ---------------------------------------------------------------------------------
# Meanings from NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors), shortened.
XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing (driver timeout)",
    13: "graphics engine exception (usually an application fault)",
    31: "GPU memory page fault (usually an application fault)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (application fault)",
    44: "graphics engine fault during context switch",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error (uncorrectable memory error)",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (application affected)",
    95: "uncontained ECC error (all applications affected)",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    140: "unrecovered ECC error",
}
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)"
    r"(?:, pid=(?P<pid>'[^']*'|[^,]*))?(?:, name=(?P<name>[^,]*))?,?\s*(?P<msg>.*)$"
)
_FELL_OFF = re.compile(r"NVRM: The NVIDIA GPU (?P<pci>[0-9A-Fa-f:.]+)")


def parse_xid(text: str) -> list[dict[str, Any]]:
    """Kernel log text -> XID events grouped by (xid, pci): count, meaning, last message.

    Also counts the multi-line "fallen off the bus" report newer drivers print without
    an ``Xid`` line, as XID 79.
    """
    events: dict[tuple[int, str], dict[str, Any]] = {}

    def add(xid: int, pci: str, message: str) -> None:
        key = (xid, pci)
        entry = events.setdefault(key, {
            "xid": xid, "pci": pci, "count": 0,
            "meaning": XID_MEANINGS.get(xid, "see NVIDIA's XID catalogue"),
        })
        entry["count"] += 1
        entry["message"] = message[:240]

    lines = text.splitlines()
    for i, line in enumerate(lines):
        if m := _XID.search(line):
            pci = normalize_bus_id(m.group("pci")) or m.group("pci")
            add(int(m.group("xid")), pci, m.group("msg").strip())
        elif m := _FELL_OFF.search(line):
            window = " ".join(lines[i:i + 4])
            if "fallen off the bus" in window:
                pci = normalize_bus_id(m.group("pci")) or m.group("pci")
                add(79, pci, "GPU has fallen off the bus and is not responding (no Xid line)")
    return sorted(events.values(), key=lambda e: (e["xid"], e["pci"]))


# -- failure classes ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Failure:
    kind: str  # error_kind in the findings
    summary: str
    fix: str
    skip: bool = False  # True: "not applicable" (no GPU), not an error


FIXES: dict[str, tuple[str, str]] = {
    "not_installed": (
        "nvidia-smi is not installed",
        "install the NVIDIA driver and its utilities (e.g. nvidia-driver-<branch> or "
        "nvidia-utils-<branch>) for the running kernel, then re-run the check",
    ),
    "driver_not_loaded": (
        "nvidia-smi could not talk to the NVIDIA driver (kernel module not loaded)",
        "load the module with `sudo modprobe nvidia`, or rebuild/reinstall the driver for the "
        "running kernel (DKMS after a kernel update) and reboot",
    ),
    "driver_library_mismatch": (
        "the loaded NVIDIA kernel module and the installed NVML library have different versions",
        "reboot (or unload and reload the nvidia kernel modules) so the running driver matches "
        "the upgraded user-space libraries",
    ),
    "inforom_corrupted": (
        "a GPU's infoROM is corrupted",
        "ask the vendor to reflash the infoROM or replace the board; until then its ECC and "
        "page-retirement records cannot be trusted",
    ),
    "gpu_lost": (
        "a GPU is lost (stopped responding on the PCIe bus)",
        "reboot the box; if the GPU is lost again check power, cooling and seating, look for "
        "XID 79 in the kernel log, and RMA the board",
    ),
    "no_devices": (
        "the NVIDIA driver is loaded but found no GPU",
        "check that the GPU is seated, powered and passed through to this VM or container "
        "(e.g. `--gpus all`), and that `lspci | grep -i nvidia` lists it",
    ),
    "no_supported_gpus": (
        "the installed NVIDIA driver supports none of the GPUs in the box",
        "install a driver branch whose supported-products list includes this GPU model",
    ),
    "no_permission": (
        "nvidia-smi was refused access to the GPU devices",
        "give the SSH user access to /dev/nvidia* (usually the video group) or run the check "
        "as root",
    ),
    "nvml_library_not_found": (
        "the NVML library (libnvidia-ml.so.1) is not installed",
        "install the NVIDIA driver's user-space libraries, or set probes.gpu.source = "
        '"nvidia-smi"',
    ),
    "nvml_unknown_error": (
        "NVML reported an unknown error",
        "run `nvidia-smi -q` on the box and check the kernel log for XID errors; a reboot "
        "usually clears a wedged driver",
    ),
    "nvidia_smi_hung": (
        "nvidia-smi did not answer in time",
        "a hung nvidia-smi usually means a wedged driver or GPU: check the kernel log for XID "
        "errors and reboot the box",
    ),
    "nvidia_smi_failed": (
        "nvidia-smi failed",
        "run the same command on the box to see the full error",
    ),
    "unparseable": (
        "nvidia-smi printed output inferfit could not read",
        "please report it with the output of `nvidia-smi -q -x` from the box",
    ),
}
# NVML return codes, which nvidia-smi also uses as its exit status.
_CODES = {9: "driver_not_loaded", 18: "driver_library_mismatch", 14: "inforom_corrupted",
          15: "gpu_lost", 6: "no_devices", 4: "no_permission", 12: "nvml_library_not_found",
          999: "nvml_unknown_error"}


def failure(kind: str, detail: str = "", *, skip: bool = False) -> Failure:
    summary, fix = FIXES[kind]
    if detail:
        summary = f"{summary}: {detail}"
    return Failure(kind, summary, fix, skip)


def failure_for_code(code: int | None, detail: str = "") -> Failure:
    """An NVML error code (``NVMLError.value``) -> its failure class."""
    return failure(_CODES.get(code or 0, "nvml_unknown_error"), detail)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def classify_failure(returncode: int, stdout: str, stderr: str) -> Failure | None:
    """A failed nvidia-smi run -> its failure class; None when nothing matches.

    Messages are matched on stdout and stderr together (nvidia-smi prints the version
    mismatch on stdout) and with typographic apostrophes folded to ASCII.
    """
    text = f"{stdout}\n{stderr}"
    low = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    detail = _first_line(text.replace("\u2019", "'"))
    if returncode == 127 or "command not found" in low:
        return failure("not_installed")
    if "couldn't communicate with the nvidia driver" in low or returncode == 9:
        return failure("driver_not_loaded", detail)
    if "driver/library version mismatch" in low or returncode == 18:
        lib = re.search(r"NVML library version:\s*(\S+)", text)
        extra = f" (NVML library {lib.group(1)})" if lib else ""
        return failure("driver_library_mismatch", detail + extra)
    if "inforom is corrupted" in low or returncode == 14:
        return failure("inforom_corrupted", detail)
    if "gpu is lost" in low or returncode == 15:
        return failure("gpu_lost", detail)
    if "no devices were found" in low or returncode == 6:
        return failure("no_devices", detail)
    if "no supported gpus were found" in low:
        return failure("no_supported_gpus", detail)
    if "insufficient permissions" in low or returncode == 4:
        return failure("no_permission", detail)
    if returncode == 255:
        return failure("nvml_unknown_error", detail)
    return None
