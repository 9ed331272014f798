"""disk probe: fio read tests that tell how fast a model loads from this box's disk.

What it reads, safest first:
(a) ``model_path``: existing model files (a file, or a directory of safetensors),
    opened read-only (``fio --readonly``): the real cold-load path;
(b) ``directory``: a test file the probe creates there and always removes, also
    on cancel, timeout or a lost connection: fio runs under a small remote ``sh``
    wrapper whose traps remove the file, plus a detached watchdog (``setsid``)
    that removes it when the wrapper disappears or a deadline passes.
Never a block device; never a write test unless ``allow_write = true``.
Nothing configured: skipped (nothing is written to a box by default).
"""

from __future__ import annotations

import dataclasses
import posixpath
import secrets
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from inferfit.api import ProbeContext, Progress
from inferfit.findings import ProbeResult, Status
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import ConnectionLostError, Host, sh
from inferfit.probes.disk_target import (
    JOBS,
    MIB,
    NAME,
    SURVEY,
    DiskOptions,
    OptionError,
    Plan,
    Survey,
    gib_text,
    install_hint,
    parse_survey,
    pick_engine,
    plan_target,
    read_options,
)
from inferfit.probes.fio_parse import (
    PERCENTILES,
    FioFailure,
    FioReport,
    FioStream,
    classify,
)

__all__ = ["SURVEY", "DiskProbe", "fio_argv", "install_hint", "parse_survey", "read_options"]

# Runs "$@" (fio) with the test file "$2" removed on every way out. "$1" is WATCHDOG.
WRAPPER = r"""
wd=$1 f=$2 d=$3
shift 3
e=$(mktemp "${TMPDIR:-/tmp}/inferfit-fio.XXXXXX" 2>/dev/null) || e=
fp=
finish() {
  if [ -n "$fp" ]; then kill "$fp" 2>/dev/null; wait "$fp" 2>/dev/null; fp=; fi
  if [ -n "$f" ]; then rm -f -- "$f"; fi
  if [ -n "$e" ]; then rm -f -- "$e" "$e.pid"; fi
}
trap 'finish; exit 143' TERM
trap 'finish; exit 129' HUP
trap 'finish; exit 130' INT
trap 'finish; exit 141' PIPE
if command -v setsid >/dev/null 2>&1; then
  (setsid sh -c "$wd" inferfit-watchdog "$$" "$f" "$e" "$d" </dev/null >/dev/null 2>&1 &)
else
  (sh -c "$wd" inferfit-watchdog "$$" "$f" "$e" "$d" </dev/null >/dev/null 2>&1 &)
fi
if [ -n "$e" ]; then "$@" 2>"$e" & else "$@" 2>/dev/null & fi
fp=$!
if [ -n "$e" ]; then echo "$fp" >"$e.pid"; fi
wait "$fp"
rc=$?
fp=
echo "@@inferfit-fio-exit $rc"
echo '@@inferfit-fio-stderr'
if [ -n "$e" ]; then cat -- "$e" 2>/dev/null; fi
finish
echo '@@inferfit-end'
"""

# Detached (own session, parent gone): when the wrapper "$1" is gone (even as a
# zombie) or "$4" seconds passed, stop fio and remove the test file "$2".
WATCHDOG = r"""
w=$1 f=$2 e=$3 d=$4 n=0
trap '' HUP INT PIPE
alive() {
  if [ -d /proc/self ]; then
    s=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    case $s in Z*|X*|'') return 1 ;; esac
    return 0
  fi
  kill -0 "$1" 2>/dev/null
}
while alive "$w" && [ "$n" -lt "$d" ]; do sleep 1; n=$((n + 1)); done
fp=
if [ -n "$e" ]; then fp=$(cat "$e.pid" 2>/dev/null); fi
if [ -n "$fp" ] && alive "$fp" && [ "$(cat "/proc/$fp/comm" 2>/dev/null)" = fio ]; then
  kill "$fp" 2>/dev/null
  m=0
  while alive "$fp" && [ "$m" -lt 10 ]; do sleep 1; m=$((m + 1)); done
  alive "$fp" && kill -9 "$fp" 2>/dev/null
fi
if [ -n "$f" ]; then rm -f -- "$f"; fi
if [ -n "$e" ]; then rm -f -- "$e" "$e.pid"; fi
"""


def fio_argv(plan: Plan, opts: DiskOptions, *, direct: bool, engine: str) -> list[str]:
    """fio's argv (global options, then one stonewalled job per test)."""
    names = ":".join(f.replace(":", "\\:") for f in plan.files)
    argv = [
        "fio", f"--output-format={'json+' if opts.latency_bins else 'json'}",
        "--status-interval=1", "--eta=never", "--thread", "--group_reporting",
        f"--filename={names}", f"--direct={1 if direct else 0}", f"--ioengine={engine}",
        f"--runtime={max(1, round(opts.runtime_s * 1000))}ms", "--time_based", "--invalidate=1",
    ]
    argv += ["--readonly"] if plan.mode == "model" else [f"--size={plan.size_bytes}"]
    for i, job in enumerate(plan.jobs):
        rw, bs, _ = JOBS[job]
        argv += [f"--name={job}", *(["--stonewall"] if i else []), f"--rw={rw}", f"--bs={bs}",
                 f"--iodepth={opts.iodepth}",
                 f"--numjobs={opts.numjobs if rw in ('read', 'write') else 1}"]
        if plan.mode == "model" and len(plan.files) > 1:
            argv.append(f"--file_service_type={'sequential' if bs == '1M' else 'random'}")
    return argv


# -- results -----------------------------------------------------------------------


def _pct_key(p: float) -> str:
    return f"p{p:g}".replace(".", "_")


def job_values(report: FioReport, jobs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in jobs:
        job = report.job(name)
        if job is None:
            continue
        d = job.write if JOBS[name][2] else job.read
        if d.io_bytes == 0:
            continue
        out[f"{name}_mib_s"] = round(d.mib_s, 1)
        if name.startswith("seq"):
            out[f"{name}_gb_s"] = round(d.bw_bytes_s / 1e9, 3)
        out[f"{name}_iops"] = round(d.iops)
        if d.clat.mean_us is not None:
            out[f"{name}_clat_mean_us"] = round(d.clat.mean_us, 1)
        for p in PERCENTILES:
            value = d.clat.pct(p)
            if value is not None:
                out[f"{name}_clat_{_pct_key(p)}_us"] = round(value, 1)
    return out


def judge(values: dict[str, Any], opts: DiskOptions) -> tuple[Status, str, list[str]]:
    status: Status = "ok"
    notes: list[str] = []
    parts = []
    if "seq_read_mib_s" in values:
        parts.append(f"seq read {values['seq_read_mib_s']:.0f} MiB/s "
                     f"({values['seq_read_gb_s']:.2f} GB/s)")
    if "rand_read_iops" in values:
        p99 = values.get("rand_read_clat_p99_us")
        parts.append(f"4k random read {values['rand_read_iops']:,} IOPS"
                     + (f", p99 {p99:,.0f} µs" if p99 is not None else ""))
    for name in ("seq_write", "rand_write"):
        if f"{name}_mib_s" in values:
            parts.append(f"{name.replace('_', ' ')} {values[f'{name}_mib_s']:.0f} MiB/s")
    where = values.get("device", "")
    if values.get("filesystem"):
        where = f"{where} ({values['filesystem']})".strip()
    summary = ", ".join(parts) + (f" on {where}" if where else "")
    load = values.get("model_load_s")
    if load is not None:
        summary += f"; model {gib_text(values['model_bytes'])} loads in ≥ {load:.1f} s"
        if load >= opts.model_load_fail_s:
            status = "fail"
            notes.append(f"model cold load ≥ {load:.0f} s (fail at {opts.model_load_fail_s:g} s): "
                         "every restart is an outage this long")
        elif load >= opts.model_load_warn_s:
            status = "warn"
            notes.append(f"model cold load ≥ {load:.0f} s (warn at {opts.model_load_warn_s:g} s)")
        notes.append("the cold-load figure is model bytes / sequential read; a loader "
                     "(deserialising, copying to the GPU) can be slower than the disk, so it is "
                     "a lower bound")
    if values.get("direct_io") is False:
        status = "warn" if status == "ok" else status
        notes.append("O_DIRECT was refused on this filesystem, so fio read through the page "
                     "cache: the figures include page cache and overstate a cold load")
    if values.get("filesystem") in ("tmpfs", "ramfs"):
        notes.append(f"{values['filesystem']} is memory, not a disk: these figures say nothing "
                     "about the disks")
    return status, summary, notes


def build_values(report: FioReport, plan: Plan, opts: DiskOptions, s: Survey, *, direct: bool,
                 engine: str) -> dict[str, Any]:
    values: dict[str, Any] = {
        "target_path": plan.target_path,
        "target_kind": plan.mode,
        "filesystem": s.fstype or None,
        "device": s.device or None,
        "mount": s.mount or None,
        "direct_io": direct,
        "runtime_s": opts.runtime_s,
        "fio_version": report.version or s.fio_version or None,
        "fio_json": report.generation,
        "ioengine": engine,
        "iodepth": opts.iodepth,
        "numjobs": opts.numjobs,
    }
    if plan.mode == "test_file":
        values["test_file_bytes"] = plan.size_bytes
    else:
        values["model_files"] = len(plan.files)
    values.update(job_values(report, plan.jobs))
    if report.disk_util:
        values["disk_util_pct"] = round(max(u for _, u in report.disk_util), 1)
    seq = report.job("seq_read")
    if plan.model_bytes:
        values["model_bytes"] = plan.model_bytes
        if seq is not None and seq.read.bw_bytes_s > 0:
            values["model_load_s"] = round(plan.model_bytes / seq.read.bw_bytes_s, 2)
    return {k: v for k, v in values.items() if v is not None}


# -- running -----------------------------------------------------------------------


@dataclass
class RunOutcome:
    report: FioReport | None
    failure: FioFailure | None
    stderr: list[str] = field(default_factory=list)


def live_progress(report: FioReport, prev: dict[str, tuple[int, int]], total_s: float
                  ) -> Progress:
    """One status document -> a Progress (fraction done, current job's live MiB/s)."""
    done_ms = 0.0
    current, rate = None, 0.0
    for job in report.jobs:
        runtime = job.runtime_ms
        done_ms += min(runtime, total_s * 1000 / max(1, len(report.jobs)))
        before = prev.get(job.name)
        if before and runtime > before[1]:
            current = job
            rate = (job.io_bytes - before[0]) / ((runtime - before[1]) / 1000)
        elif not before and runtime > 0 and current is None:
            current, rate = job, (job.io_bytes / (runtime / 1000))
        prev[job.name] = (job.io_bytes, runtime)
    fraction = min(1.0, done_ms / (total_s * 1000)) if total_s > 0 else None
    if current is None:
        return Progress(NAME, "fio is starting (laying out the test file if needed)", fraction)
    mib_s = rate / MIB
    d = current.write if current.write.io_bytes > current.read.io_bytes else current.read
    key = "write_mib_s" if d is current.write else "read_mib_s"
    iops = rate / (4096 if current.name.startswith("rand") else MIB)
    text = (f"{current.name}: {iops:,.0f} IOPS ({mib_s:,.0f} MiB/s)"
            if current.name.startswith("rand") else f"{current.name}: {mib_s:,.0f} MiB/s")
    return Progress(NAME, text, fraction, {key: round(mib_s, 1), "iops": round(iops)})


def test_file_name() -> str:
    """A fresh hidden name for the probe's test file (unique per fio run)."""
    return f".inferfit-fio-{secrets.token_hex(6)}.tmp"


class DiskProbe:
    name = NAME
    title = "Disk"

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        started = time.monotonic()

        def result(status: Status, summary: str, values: dict[str, Any] | None = None,
                   notes: list[str] | None = None, kind: str | None = None,
                   fix: str | None = None) -> ProbeResult:
            return ProbeResult(NAME, status, summary, time.monotonic() - started,
                               values or {}, notes or [], kind, fix)

        try:
            opts = read_options(ctx.options)
        except OptionError as exc:
            return result("error", exc.message, kind=exc.kind, fix=exc.fix)
        budget = float(ctx.options.get("timeout_s", ctx.config.get("check.probe_timeout_s", 120.0)))
        needed = opts.runtime_s * len(opts.jobs) + 15
        if needed > budget:
            return result(
                "error", f"{len(opts.jobs)} fio job(s) of {opts.runtime_s:g} s do not fit in the "
                f"probe's time limit of {budget:g} s", kind="bad_config",
                fix=f"raise probes.disk.timeout_s to at least {needed:.0f} or lower runtime_s")
        if not opts.model_path and not opts.directory:
            return result(
                "skipped", "no disk target configured: set probes.disk.model_path (model files, "
                "read-only) or probes.disk.directory (a test file is created there and removed)",
                kind="not_configured",
                fix="set probes.disk.model_path = '/path/to/model' or probes.disk.directory = "
                "'/var/tmp' in the config")
        path = opts.model_path or opts.directory
        done = await host.run(sh(SURVEY, path), timeout=60)
        if "@@end" not in done.stdout:
            return result("error", f"the disk survey script did not complete: {done.describe()}",
                          kind="script_failed", fix="check that the box has a POSIX sh")
        survey = parse_survey(done.stdout)
        if not survey.fio_path:
            hint = install_hint(survey.os_release)
            return result("skipped", f"fio is not installed on the box; install it: {hint}",
                          kind="fio_missing", fix=hint)
        plan = plan_target(opts, survey, test_file_name())
        base = {"target_path": path, "filesystem": survey.fstype or None,
                "device": survey.device or None}
        if isinstance(plan, OptionError):
            return result("error", plan.message, {k: v for k, v in base.items() if v},
                          kind=plan.kind, fix=plan.fix)
        engine = pick_engine(opts.ioengine, survey.engines)
        direct = True
        notes: list[str] = []
        outcome = await self._run(host, ctx, plan, opts, direct, engine)
        if isinstance(outcome, ProbeResult):
            return outcome
        if outcome.failure and outcome.failure.kind == "odirect_refused":
            direct = False
            ctx.progress(Progress(NAME, "O_DIRECT refused; rerunning buffered", 0.0))
            if plan.test_file:  # a fresh name: the first run's watchdog removes the old one
                fresh = posixpath.join(plan.target_path, test_file_name())
                plan = dataclasses.replace(plan, test_file=fresh, files=(fresh,))
            outcome = await self._run(host, ctx, plan, opts, direct, engine)
            if isinstance(outcome, ProbeResult):
                return outcome
        if outcome.failure or outcome.report is None:
            failure = outcome.failure or FioFailure("fio_no_json", "fio printed no report")
            return result("error", failure.message, {k: v for k, v in base.items() if v},
                          notes + [f"fio: {ln}" for ln in outcome.stderr[:5]],
                          kind=failure.kind, fix=failure.fix)
        notes += [f"fio said: {ln}" for ln in outcome.report.preamble[:3]]
        values = build_values(outcome.report, plan, opts, survey, direct=direct, engine=engine)
        status, summary, judged = judge(values, opts)
        if plan.mode == "test_file":
            notes.append(f"measured a {gib_text(plan.size_bytes)} test file created in "
                         f"{plan.target_path} and removed afterwards")
            if not direct and survey.mem_total_bytes and plan.size_bytes < survey.mem_total_bytes:
                notes.append(f"the test file ({gib_text(plan.size_bytes)}) is smaller than RAM "
                             f"({gib_text(survey.mem_total_bytes)}): repeated passes hit the cache")
        else:
            notes.append(f"read {len(plan.files)} model file(s) read-only (fio --readonly)")
        return result(status, summary, values, judged + notes)

    async def _run(self, host: Host, ctx: ProbeContext, plan: Plan, opts: DiskOptions,
                   direct: bool, engine: str) -> RunOutcome | ProbeResult:
        argv = fio_argv(plan, opts, direct=direct, engine=engine)
        total_s = opts.runtime_s * len(plan.jobs)
        layout_s = 60 + plan.size_bytes / (50 * MIB)  # laying out at >= 50 MiB/s
        timeout = total_s + layout_s
        what = (f"laying out a {gib_text(plan.size_bytes)} test file in {plan.target_path}"
                if plan.mode == "test_file" else f"reading {len(plan.files)} model file(s)")
        ctx.progress(Progress(NAME, f"fio: {what}, then {', '.join(plan.jobs)} "
                              f"for {opts.runtime_s:g} s each", 0.0))
        stream = FioStream()
        prev: dict[str, tuple[int, int]] = {}
        lines = cast(AsyncGenerator[str, None], host.stream(
            sh(WRAPPER, WATCHDOG, plan.test_file, str(int(timeout + 30)), *argv),
            timeout=timeout))
        try:
            async for line in lines:
                report = stream.feed(line)
                if report is not None and not report.finished:
                    ctx.progress(live_progress(report, prev, total_s))
        except ConnectionLostError as exc:
            left = (f"; the box removes the test file {plan.test_file} by itself "
                    "(remote watchdog)" if plan.test_file else "")
            return ProbeResult.error(NAME, exc.message + left, kind=exc.kind, fix=exc.fix,
                                     duration_s=0.0)
        finally:
            await lines.aclose()
        stream.finish()
        if not stream.ended:
            return RunOutcome(stream.last, FioFailure(
                "fio_timeout", f"fio did not finish within {timeout:.0f} s (stopped; the test "
                "file is removed on the box)", "lower probes.disk.runtime_s or probes.disk.size"),
                stream.stderr)
        failure = classify(stream.last, stream.exit_code, stream.stderr, stream.preamble)
        return RunOutcome(stream.last, failure, stream.stderr)


@hookimpl
def inferfit_register_probes(register: Callable[[DiskProbe], None]) -> None:
    register(DiskProbe())
