"""system probe: OS, kernel, CPU, memory, swap, load, free disk, uptime, tools.

One round trip: a fixed shell script prints tagged sections; the paths to
check travel as positional parameters, never pasted into the script.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from inferfit.api import ProbeContext
from inferfit.findings import ProbeResult, Status
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host, sh

TOOLS = ("python3", "fio", "nvidia-smi", "nginx", "curl", "ping", "systemctl", "docker")

SCRIPT = r"""
echo '@@hostname'; (hostname 2>/dev/null || cat /etc/hostname 2>/dev/null)
echo '@@os-release'; cat /etc/os-release 2>/dev/null
echo '@@uname'; uname -s -r -m 2>/dev/null
echo '@@cpuinfo'; grep -m1 -E '^(model name|Hardware|Processor|cpu model)' /proc/cpuinfo 2>/dev/null
echo '@@nproc'; (nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null)
echo '@@meminfo'; grep -E '^(MemTotal|MemAvailable|SwapTotal|SwapFree):' /proc/meminfo 2>/dev/null
echo '@@loadavg'; cat /proc/loadavg 2>/dev/null
echo '@@uptime'; cat /proc/uptime 2>/dev/null
echo '@@df'; df -P -k -- "$@" 2>/dev/null
echo '@@net'
for d in /sys/class/net/*; do
  [ -e "$d/device" ] || continue
  speed=$(cat "$d/speed" 2>/dev/null || echo -)
  printf '%s %s %s\n' "${d##*/}" "$speed" "$(cat "$d/operstate" 2>/dev/null)"
done
echo '@@tools'
for t in python3 fio nvidia-smi nginx curl ping systemctl docker; do
  p=$(command -v "$t" 2>/dev/null) && echo "$t $p"
done
echo '@@end'
"""


def split_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.rstrip())
    return sections


def _kib_line(lines: list[str], key: str) -> int | None:
    for line in lines:
        name, _, rest = line.partition(":")
        if name.strip() == key:
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0])
    return None


def _gib(kib: int | None) -> float | None:
    return None if kib is None else round(kib / 1024 / 1024, 2)


def parse_system(text: str) -> dict[str, Any]:
    """Turn the probe script's output into findings values (pure; tested on recordings)."""
    sec = split_sections(text)
    out: dict[str, Any] = {}
    if sec.get("hostname"):
        out["hostname"] = sec["hostname"][0].strip()
    osr: dict[str, str] = {}
    for line in sec.get("os-release", []):
        key, sep, value = line.partition("=")
        if sep:
            osr[key.strip()] = value.strip().strip('"')
    if osr:
        plain = f"{osr.get('NAME', '')} {osr.get('VERSION', '')}".strip()
        out["os"] = osr.get("PRETTY_NAME") or plain
        if "ID" in osr:
            out["os_id"] = osr["ID"]
        if "VERSION_ID" in osr:
            out["os_version_id"] = osr["VERSION_ID"]
        if osr.get("ID_LIKE"):
            out["os_id_like"] = osr["ID_LIKE"]
    if sec.get("uname"):
        parts = sec["uname"][0].split()
        if len(parts) >= 3:
            out["kernel"] = f"{parts[0]} {parts[1]}"
            out["arch"] = parts[2]
    if sec.get("cpuinfo"):
        out["cpu_model"] = sec["cpuinfo"][0].partition(":")[2].strip()
    if sec.get("nproc") and sec["nproc"][0].strip().isdigit():
        out["cpu_cores"] = int(sec["nproc"][0].strip())
    mem = sec.get("meminfo", [])
    total, avail = _kib_line(mem, "MemTotal"), _kib_line(mem, "MemAvailable")
    swap_total, swap_free = _kib_line(mem, "SwapTotal"), _kib_line(mem, "SwapFree")
    out["memory_gib"] = _gib(total)
    out["memory_available_gib"] = _gib(avail)
    out["swap_gib"] = _gib(swap_total)
    if swap_total is not None and swap_free is not None:
        out["swap_used_mib"] = round((swap_total - swap_free) / 1024, 1)
    if sec.get("loadavg"):
        parts = sec["loadavg"][0].split()
        if len(parts) >= 3:
            out["load_1m"], out["load_5m"], out["load_15m"] = (float(p) for p in parts[:3])
    if sec.get("uptime"):
        with contextlib.suppress(ValueError, IndexError):
            out["uptime_s"] = round(float(sec["uptime"][0].split()[0]))
    filesystems = []
    seen: set[str] = set()
    for line in sec.get("df", [])[1:]:
        parts = line.split()
        if len(parts) < 6 or not parts[1].isdigit() or not parts[3].isdigit():
            continue
        mount = " ".join(parts[5:])
        if mount in seen:
            continue
        seen.add(mount)
        size_k, avail_k = int(parts[1]), int(parts[3])
        filesystems.append({
            "mount": mount,
            "device": parts[0],
            "size_gib": round(size_k / 1024 / 1024, 2),
            "free_gib": round(avail_k / 1024 / 1024, 2),
            "used_pct": float(parts[4].rstrip("%")) if parts[4].rstrip("%").isdigit() else None,
        })
    if filesystems:
        out["filesystems"] = filesystems
    nics = []
    for line in sec.get("net", []):
        parts = line.split()
        if len(parts) >= 2:
            nic: dict[str, Any] = {"name": parts[0], "state": parts[2] if len(parts) > 2 else ""}
            # speed is -1 or unreadable on a link that is down or virtual
            if parts[1].lstrip("-").isdigit() and int(parts[1]) > 0:
                nic["speed_mbit"] = int(parts[1])
            nics.append(nic)
    if nics:
        out["nics"] = nics
        speeds = [n["speed_mbit"] for n in nics if "speed_mbit" in n and n["state"] == "up"]
        if speeds:
            out["link_mbit"] = max(speeds)
    tools = {}
    for line in sec.get("tools", []):
        name, _, path = line.partition(" ")
        if name:
            tools[name] = path.strip()
    out["tools"] = {t: t in tools for t in TOOLS}
    out["tool_paths"] = tools
    return {k: v for k, v in out.items() if v is not None}


def judge(values: dict[str, Any], options: dict[str, Any]) -> tuple[Status, str, list[str]]:
    """Status, one-line summary and notes from parsed values and thresholds."""
    notes: list[str] = []
    status: Status = "ok"
    free_warn = float(options.get("free_gib_warn", 20.0))
    swap_warn = float(options.get("swap_used_mib_warn", 256.0))
    for fs in values.get("filesystems", []):
        if fs["free_gib"] < free_warn:
            status = "warn"
            notes.append(
                f"only {fs['free_gib']} GiB free on {fs['mount']} (warn below {free_warn:g})"
            )
    swap_used = values.get("swap_used_mib")
    if swap_used is not None and swap_used > swap_warn:
        status = "warn"
        notes.append(f"{swap_used:g} MiB of swap in use: swapping hurts tail latency")
    load = values.get("load_1m")
    cores = values.get("cpu_cores")
    per_core = float(options.get("load_per_core_warn", 2.0))
    if load is not None and cores and load > per_core * cores:
        status = "warn"
        notes.append(f"load {load:g} on {cores} cores: the box is busy before any test")
    missing = [t for t in ("python3", "fio", "nvidia-smi") if not values.get("tools", {}).get(t)]
    if missing:
        notes.append("not found on the box: " + ", ".join(missing))
    parts = [
        values.get("os", "unknown OS"),
        f"{values['cpu_cores']} cores" if "cpu_cores" in values else None,
        f"{values['memory_gib']:g} GiB RAM" if "memory_gib" in values else None,
        f"swap {values['swap_gib']:g} GiB" if "swap_gib" in values else None,
    ]
    summary = ", ".join(p for p in parts if p)
    if "memory_gib" not in values:
        notes.append("memory unknown: /proc/meminfo was not readable")
    return status, summary, notes


class SystemProbe:
    name = "system"
    title = "System"

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        started = time.monotonic()
        paths = [str(p) for p in ctx.options.get("paths", ["/"])]
        done = await host.run(sh(SCRIPT, *paths), timeout=30)
        if "@@end" not in done.stdout:
            return ProbeResult.error(
                self.name,
                f"the system script did not complete: {done.describe()}",
                kind="script_failed",
                fix="check that the box has a POSIX sh and coreutils",
                duration_s=time.monotonic() - started,
            )
        values = parse_system(done.stdout)
        status, summary, notes = judge(values, dict(ctx.options))
        return ProbeResult(
            self.name, status, summary, time.monotonic() - started, values=values, notes=notes
        )


@hookimpl
def inferfit_register_probes(register: Callable[[SystemProbe], None]) -> None:
    register(SystemProbe())
