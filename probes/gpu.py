"""gpu probe: is this the hardware we ordered, and is it healthy?

Reads every NVIDIA GPU through ``nvidia-smi -q -x`` over the host (or NVML when inferfit
runs on the box itself), adds ``nvidia-smi -L`` (MIG profiles), ``nvidia-smi topo -m``
(NVLink vs PCIe) and XID errors from the kernel log, then judges each GPU and the box.
Parsing lives in gpu_parse / gpu_events, verdicts in gpu_health, NVML in gpu_nvml;
this module only runs commands and maps failures to findings. Read-only.

Live mode (``watch``) streams ``nvidia-smi --query-gpu=... -lms 1000`` over one channel
and yields one :class:`~inferfit.api.Sample` per reading of all GPUs::

    Sample(probe="gpu", values={"gpus": [
        {"index": 0, "util_gpu_pct": 97.0, "memory_used_mib": 19818.0,
         "memory_total_mib": 81559.0, "power_draw_w": 631.95},
        ...]})

A key is left out when the GPU does not report it (``[N/A]``). The stream ends when the
caller closes the iterator (the remote nvidia-smi is stopped) or nvidia-smi exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from inferfit.api import ProbeContext, Sample
from inferfit.findings import ProbeResult, Status, worst
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import CommandTimeoutError, Completed, Host, sh

from .gpu_events import (
    Failure,
    classify_failure,
    failure,
    parse_topology,
    parse_xid,
)
from .gpu_health import judge, summarize
from .gpu_nvml import NvmlFailed, nvml_sample, read_local_nvml
from .gpu_parse import (
    QUERY_FIELDS,
    ParseError,
    merge_list,
    parse_list,
    parse_query_csv,
    parse_smi_table,
    parse_smi_xml,
    parse_stream_line,
)

SMI = "nvidia-smi"
STREAM_FIELDS = "index,utilization.gpu,memory.used,memory.total,power.draw"
SOURCES = ("auto", "nvidia-smi", "nvml")

# Is there an NVIDIA GPU at all? Device nodes, and NVIDIA (0x10de) display-class PCI devices.
PRESENCE_SCRIPT = r"""
echo '@@devnodes'
for f in /dev/nvidia*; do [ -e "$f" ] && echo "$f"; done
echo '@@pci'
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/vendor" ] && [ -r "$d/class" ] || continue
  read -r v < "$d/vendor"; read -r c < "$d/class"
  [ "$v" = 0x10de ] && case "$c" in 0x03*) echo "${d##*/}";; esac
done
echo '@@end'
"""
# XID lines from the kernel ring buffer, else the journal; says so when neither is readable.
KERNEL_LOG_SCRIPT = r"""
pat='NVRM: (Xid|The NVIDIA GPU)'
if out=$(dmesg 2>&1); then
  echo '@@source dmesg'
  printf '%s\n' "$out" | grep -E -A3 "$pat" | tail -n 400
  exit 0
fi
echo "@@dmesg-error $(printf '%s\n' "$out" | head -n 1)"
if command -v journalctl >/dev/null 2>&1; then
  out=$(journalctl -k -b --no-pager 2>&1)
  head=$(printf '%s\n' "$out" | head -n 3)
  case "$head" in
    *"No journal files"*|*"insufficient permissions"*|*"No entries"*|*"not seeing messages"*)
      echo "@@journalctl-error $(printf '%s\n' "$head" | head -n 1)";;
    *) echo '@@source journalctl -k'
       printf '%s\n' "$out" | grep -E -A3 "$pat" | tail -n 400
       exit 0;;
  esac
fi
echo '@@unreadable'
"""


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = out.setdefault(line[2:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return out


def parse_kernel_log(text: str) -> tuple[str | None, list[dict[str, Any]], str | None]:
    """The kernel-log script's output -> (source, XID events, why it was not readable)."""
    source = None
    problems = []
    for line in text.splitlines():
        if line.startswith("@@source "):
            source = line[len("@@source "):].strip()
            break
        if line.startswith(("@@dmesg-error", "@@journalctl-error")):
            tool, _, why = line[2:].partition(" ")
            problems.append(f"{tool.split('-')[0]}: {why.strip() or 'failed'}")
    if source is None:
        return None, [], "; ".join(problems) or "no dmesg or journalctl output"
    body = text.split(f"@@source {source}", 1)[1]
    return source, parse_xid(body), None


class GpuProbe:
    name = "gpu"
    title = "GPU"

    # -- one-shot check ------------------------------------------------------------------
    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        started = time.monotonic()
        opts = ctx.options
        source = str(opts.get("source", "auto"))
        if source not in SOURCES:
            return ProbeResult.error(
                self.name, f"probes.gpu.source is {source!r}", kind="bad_config",
                fix=f"set probes.gpu.source to one of {', '.join(SOURCES)}",
            )
        timeout = float(opts.get("command_timeout_s", 30.0))
        notes: list[str] = []
        snapshot: dict[str, Any] | None = None
        used = "nvidia-smi"
        if source == "nvml" and host.transport != "local":
            notes.append("NVML reads only the machine inferfit runs on; used nvidia-smi over SSH")
        elif host.transport == "local" and source in ("auto", "nvml"):
            try:
                snapshot = await asyncio.to_thread(read_local_nvml)
                used = "nvml"
            except NvmlFailed as exc:
                if exc.failure.kind != "nvml_library_not_found" or source == "nvml":
                    if exc.failure.kind == "nvml_library_not_found":
                        present = await self._gpu_present(host, timeout)
                        if present is None:
                            return self._skipped(started, "NVML library not found")
                    return self._error(exc.failure, started, notes)
                notes.append("NVML library not found; read the GPUs with nvidia-smi instead")
        side = asyncio.gather(
            self._run(host, [SMI, "-L"], timeout),
            self._run(host, [SMI, "topo", "-m"], timeout) if opts.get("topology", True)
            else _none(),
            self._run(host, sh(KERNEL_LOG_SCRIPT), timeout)
            if opts.get("read_kernel_log", True) else _none(),
        )
        try:
            if snapshot is None:
                got = await self._smi_snapshot(host, timeout, notes)
                if isinstance(got, Failure):
                    _drop(side)
                    if got.kind == "not_installed":
                        present = await self._gpu_present(host, timeout)
                        if present is None:
                            return self._skipped(started, "nvidia-smi not found")
                        got = failure("not_installed", present)
                    return self._error(got, started, notes)
                snapshot, used = got
            listing, topo, klog = await side
        except BaseException:
            _drop(side)
            raise
        return self._finish(snapshot, used, listing, topo, klog, opts, notes, started)

    async def _run(self, host: Host, argv: list[str], timeout: float) -> Completed | None:
        """A side command: None when it hangs (the main result still stands)."""
        try:
            return await host.run(argv, timeout=timeout)
        except CommandTimeoutError:
            return None

    async def _smi_snapshot(
        self, host: Host, timeout: float, notes: list[str]
    ) -> tuple[dict[str, Any], str] | Failure:
        """``-q -x``, else the ``--query-gpu`` CSV, else the plain table; or the failure."""
        try:
            xml = await host.run([SMI, "-q", "-x"], timeout=timeout)
        except CommandTimeoutError:
            return failure("nvidia_smi_hung", f"`{SMI} -q -x` ran past {timeout:g} s")
        problem = ""
        if "<nvidia_smi_log" in xml.stdout:
            try:
                snap = parse_smi_xml(xml.stdout)
                snap["warnings"] += [ln.strip() for ln in xml.stderr.splitlines() if ln.strip()]
                if not xml.ok:  # XML for the GPUs it could read, and an error for the rest
                    snap["partial_failure"] = classify_failure(
                        xml.returncode, xml.stdout.split("<", 1)[0], xml.stderr
                    ) or failure("nvidia_smi_failed", f"exit status {xml.returncode}")
                return snap, "nvidia-smi -q -x"
            except ParseError as exc:
                problem = f"`{SMI} -q -x`: {exc}"
        if not xml.ok or not problem:
            classified = classify_failure(xml.returncode, xml.stdout, xml.stderr)
            if classified is not None:
                return classified
            problem = problem or xml.describe()
        for argv, parser, label in (
            ([SMI, f"--query-gpu={QUERY_FIELDS}", "--format=csv"], parse_query_csv,
             "nvidia-smi --query-gpu"),
            ([SMI], parse_smi_table, "nvidia-smi (table)"),
        ):
            try:
                done = await host.run(argv, timeout=timeout)
            except CommandTimeoutError:
                continue
            if not done.ok:
                continue
            try:
                snap = parser(done.stdout)
            except ParseError:
                continue
            notes.append(f"{problem}; read the GPUs from {label} instead (fewer details)")
            return snap, label
        kind = "nvidia_smi_failed" if not xml.ok else "unparseable"
        return failure(kind, problem)

    async def _gpu_present(self, host: Host, timeout: float) -> str | None:
        """Why we think there is an NVIDIA GPU (device nodes or PCI devices), or None."""
        try:
            done = await host.run(sh(PRESENCE_SCRIPT), timeout=timeout)
        except CommandTimeoutError:
            return None
        sec = _sections(done.stdout)
        if sec.get("devnodes"):
            return f"the NVIDIA device nodes exist ({', '.join(sec['devnodes'][:3])})"
        if sec.get("pci"):
            return (f"NVIDIA GPU(s) on the PCI bus ({', '.join(sec['pci'][:4])}) but no "
                    "driver tools")
        return None

    def _skipped(self, started: float, why: str) -> ProbeResult:
        result = ProbeResult.skipped(
            self.name,
            f"no NVIDIA GPU on this box ({why}, no /dev/nvidia*, no NVIDIA PCI display device)",
            kind="no_gpu",
        )
        result.duration_s = time.monotonic() - started
        return result

    def _error(self, fail: Failure, started: float, notes: list[str]) -> ProbeResult:
        result = ProbeResult.error(self.name, fail.summary, kind=fail.kind, fix=fail.fix,
                                   duration_s=time.monotonic() - started)
        result.notes = notes
        return result

    def _finish(
        self,
        snapshot: dict[str, Any],
        used: str,
        listing: Completed | None,
        topo: Completed | None,
        klog: Completed | None,
        opts: Mapping[str, Any],
        notes: list[str],
        started: float,
    ) -> ProbeResult:
        values: dict[str, Any] = {
            "source": used,
            "driver_version": snapshot.get("driver_version"),
            "cuda_version": snapshot.get("cuda_version"),
            "gpu_count": snapshot.get("gpu_count"),
        }
        warnings = snapshot.get("warnings") or []
        notes.extend(f"nvidia-smi: {w}" for w in warnings[:5])
        if listing is not None and listing.ok:
            notes.extend(merge_list(snapshot, parse_list(listing.stdout)))
            values["gpu_count"] = snapshot.get("gpu_count")
        if topo is not None and topo.ok:
            matrix = parse_topology(topo.stdout)
            if matrix is not None:
                values["topology"] = matrix
        if klog is not None:
            log_source, events, why = parse_kernel_log(klog.stdout)
            if log_source:
                values["kernel_log_source"] = log_source
                values["xid_events"] = events
            else:
                notes.append(f"kernel log not readable, XID errors not checked ({why}): run as "
                             "root or add the user to the adm/systemd-journal group")
        values["devices"] = snapshot.get("devices", [])
        status, summary, verdicts = judge(values, opts)
        extra: list[tuple[Status, str]] = []
        partial = snapshot.get("partial_failure")
        if isinstance(partial, Failure):
            extra.append(("fail", f"nvidia-smi -q -x exited with an error: {partial.summary} "
                                  f"— fix: {partial.fix}"))
        if any("inforom" in w.lower() for w in warnings):
            extra.append(("warn", "nvidia-smi warns that an infoROM is corrupted: ECC and "
                                  "retirement records may be wrong (reflash or RMA)"))
        for severity, text in extra:
            if severity == "fail":
                verdicts.insert(0, text)
            else:
                verdicts.append(text)
            if worst([status, severity]) != status:  # this is now the worst reason
                status = severity
                summary = f"{summarize(values)} — {severity}: {text.split(' — fix')[0]}"
        if not values["devices"]:
            return self._error(failure("no_devices", f"{used} lists no GPU"), started, notes)
        return ProbeResult(self.name, status, summary, time.monotonic() - started,
                           values=values, notes=verdicts + notes)

    # -- live samples ----------------------------------------------------------------------
    async def watch(self, host: Host, ctx: ProbeContext) -> AsyncIterator[Sample]:
        """Yield one Sample per reading of all GPUs (see the module docstring)."""
        interval_ms = max(100, int(ctx.options.get("sample_interval_ms", 1000)))
        if host.transport == "local" and ctx.options.get("source", "auto") in ("auto", "nvml"):
            nvml = await _nvml_start()
            if nvml is not None:
                async for sample in _watch_nvml(nvml, interval_ms):
                    yield sample
                return
        argv = [SMI, f"--query-gpu={STREAM_FIELDS}", "--format=csv,noheader,nounits",
                "-lms", str(interval_ms)]
        stream = host.stream(argv)
        batch: list[dict[str, Any]] = []
        expected: int | None = None
        try:
            async for line in stream:
                entry = parse_stream_line(line)
                if entry is None:
                    continue
                if any(e["index"] == entry["index"] for e in batch):
                    expected = expected or len(batch)
                    yield Sample(self.name, {"gpus": batch})
                    batch = []
                batch.append(entry)
                if expected and len(batch) >= expected:
                    yield Sample(self.name, {"gpus": batch})
                    batch = []
            if batch:
                yield Sample(self.name, {"gpus": batch})
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


async def _none() -> None:
    return None


def _drop(side: asyncio.Future[Any]) -> None:
    """Cancel the side commands and retrieve their outcome so nothing is left dangling."""
    side.cancel()
    side.add_done_callback(lambda f: f.cancelled() or f.exception())


async def _nvml_start() -> Any:
    """The initialised pynvml module, or None when NVML cannot start here."""
    try:
        import pynvml

        await asyncio.to_thread(pynvml.nvmlInit)
    except Exception:
        return None
    return pynvml


async def _watch_nvml(nvml: Any, interval_ms: int) -> AsyncIterator[Sample]:
    """NVML readings on the local machine until the caller closes the iterator."""
    try:
        while True:
            gpus = await asyncio.to_thread(nvml_sample, nvml)
            yield Sample("gpu", {"gpus": gpus})
            await asyncio.sleep(interval_ms / 1000)
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


@hookimpl
def inferfit_register_probes(register: Callable[[GpuProbe], None]) -> None:
    register(GpuProbe())
