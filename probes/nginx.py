"""nginx probe: what the box's own access log says about tail latency, queueing and upstreams.

* Discovery: ``nginx -T`` (of each running master's ``-c``/``-p``, else the
  default config) maps every ``access_log`` to its file and ``log_format``;
  or ``probes.nginx.log_path`` / ``log_format`` from the config.
* The log is aggregated where it lies: a script built from ``nginx_format`` and
  ``nginx_agg`` runs on the box's ``python3`` (stdin) and returns JSON. Without
  python3 the window's bytes are read in chunks and aggregated here.
* ``watch()`` follows the log with ``tail -F`` (survives rotation) and yields
  one Sample a second: per-second QPS and 5xx, rolling one-minute percentiles.

Privacy: findings carry routes (query strings cut, ids folded), never client
addresses, full URIs or bodies; samples of bad lines are redacted and truncated.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from inferfit.api import ProbeContext, Progress, Sample
from inferfit.findings import ProbeResult, Status
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host, sh
from inferfit.probes import nginx_native, nginx_remote
from inferfit.probes.nginx_agg import SLACK_S, Aggregator
from inferfit.probes.nginx_conf import NginxConf, parse_masters, parse_nginx_t, unreadable_reason
from inferfit.probes.nginx_format import COMBINED, FormatError, LogFormat
from inferfit.probes.nginx_scan import aggregate_file, last_time, window_bounds
from inferfit.probes.nginx_values import BadChunk, epoch, parse_when, parse_window, time_ms

NAME = "nginx"
FIX_CONFIG = ("set probes.nginx.log_path to the access log and probes.nginx.log_format to its "
              "format string (or 'combined')")
ALWAYS_CODES = ("499", "500", "502", "503", "504")

FIND_SCRIPT = r"""
n=$(command -v nginx 2>/dev/null)
if [ -z "$n" ]; then
  for c in /usr/sbin/nginx /usr/local/sbin/nginx /usr/local/nginx/sbin/nginx /opt/nginx/sbin/nginx
  do [ -x "$c" ] && n=$c && break; done
fi
echo '@@bin'; echo "$n"
echo '@@version'; [ -n "$n" ] && "$n" -V 2>&1
echo '@@masters'
(ps -ww -eo args= 2>/dev/null || for p in /proc/[0-9]*/cmdline; do
  tr '\0' ' ' < "$p" 2>/dev/null; echo; done) | grep '^nginx: master process' || true
echo '@@end'
"""
SIZES_SCRIPT = r"""for f in "$@"; do if [ -r "$f" ]; then echo "$(wc -c < "$f") $f"; fi; done"""
READ_SCRIPT = r"""tail -c +"$1" -- "$2" | head -c "$3" """
SIZE_SCRIPT = r"""wc -c < "$1" """
TAIL_SCRIPT = r"""
if sed -u q </dev/null >/dev/null 2>&1; then
  exec tail -F -n 0 -- "$1" 2>/dev/null | LC_ALL=C sed -u 's/[^ -~	]/?/g'
fi
exec tail -F -n 0 -- "$1" 2>/dev/null
"""


class Trouble(Exception):
    """A failure that becomes the probe's result (error or skipped)."""

    def __init__(self, result: ProbeResult) -> None:
        super().__init__(result.summary)
        self.result = result


@dataclass
class Target:
    """The log the probe reads and how its lines look."""

    path: str
    lf: LogFormat
    format_name: str
    notes: list[str] = field(default_factory=list)
    access_logs: list[dict[str, str]] = field(default_factory=list)
    bytes_crossed: int = 0


# -- discovery ----------------------------------------------------------------
async def discover(host: Host) -> tuple[NginxConf | None, str, int]:
    """The effective config (or None), why not when None, and the bytes that crossed."""
    done = await host.run(sh(FIND_SCRIPT), timeout=90)
    crossed = len(done.stdout) + len(done.stderr)
    sec: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in done.stdout.splitlines():
        if line.startswith("@@"):
            cur = sec.setdefault(line[2:], [])
        elif cur is not None and line.strip():
            cur.append(line)
    binary = (sec.get("bin") or [""])[0].strip()
    masters = parse_masters(sec.get("masters", []))
    # Relative access_log paths are relative to the compiled-in prefix (nginx -V).
    default_prefix = "/etc/nginx/"
    conf_default_log = ""
    for word in " ".join(sec.get("version", [])).split():
        if word.startswith("--prefix="):
            default_prefix = word.split("=", 1)[1].rstrip("/") + "/"
        elif word.startswith("--http-log-path="):
            conf_default_log = word.split("=", 1)[1]
    if not binary and not masters:
        return None, "not_installed", crossed
    runs = [(m.binary if m.binary.startswith("/") else binary or m.binary, m.conf, m.prefix)
            for m in masters]
    if binary and ("", "") not in [(c, p) for _, c, p in runs]:
        runs.append((binary, "", ""))  # the default config: read when the masters' log nothing
    conf = NginxConf()
    why = ""
    ok = False
    for i, (exe, cfile, prefix) in enumerate(runs):
        if i == len(masters) and i and conf.readable_logs():
            break
        argv = [exe or "nginx", "-T"]
        if cfile:
            argv += ["-c", cfile]
        if prefix:
            argv += ["-p", prefix]
        got = await host.run(argv, timeout=90)
        crossed += len(got.stdout) + len(got.stderr)
        if not got.ok or "# configuration file" not in got.stdout:
            why = unreadable_reason(got.stderr + "\n" + got.stdout)
            continue
        ok = True
        part = parse_nginx_t(got.stdout, prefix or default_prefix)
        conf.formats.update(part.formats)
        conf.files.extend(part.files)
        conf.access_logs.extend(a for a in part.access_logs if a not in conf.access_logs)
        conf.off = conf.off or part.off
    if conf_default_log and not conf_default_log.startswith("/"):
        conf_default_log = default_prefix + conf_default_log
    conf.default_log = conf_default_log
    return (conf if ok else None), why, crossed


def _format_for(conf: NginxConf | None, wanted: str) -> tuple[LogFormat, str]:
    if "$" in wanted:
        return LogFormat(wanted, "default", "custom"), "custom"
    name = wanted or "combined"
    if conf is not None and name in conf.formats:
        d = conf.formats[name]
        return LogFormat(d.text, d.escape, d.name), d.name
    if name == "combined":
        return LogFormat(COMBINED, "default", "combined"), "combined"
    raise Trouble(ProbeResult.error(
        NAME, f"log_format {name!r} is not defined in the nginx config", kind="unknown_log_format",
        fix="set probes.nginx.log_format to the format string itself"))


async def resolve(host: Host, options: dict[str, Any]) -> Target:
    """Which log to read and with which format; raises Trouble with the result otherwise."""
    log_path = str(options.get("log_path", "") or "")
    wanted = str(options.get("log_format", "") or "")
    conf: NginxConf | None = None
    crossed = 0
    notes: list[str] = []
    if not log_path or ("$" not in wanted and wanted not in ("", "combined")) or not wanted:
        conf, why, crossed = await discover(host)
        if conf is None and not log_path:
            if why == "not_installed":
                raise Trouble(ProbeResult.skipped(
                    NAME, "nginx is not installed on the box and probes.nginx.log_path is not set",
                    kind="not_installed"))
            raise Trouble(ProbeResult.error(
                NAME, f"cannot read the nginx configuration (nginx -T): {why}",
                kind="config_unreadable", fix=FIX_CONFIG))
        if conf is None and why == "not_installed":
            notes.append("no nginx binary found on the box; reading the configured log_path")
        elif conf is None:
            notes.append(f"nginx -T failed ({why}); reading the configured log_path")
    logs = [{"path": a.path, "format": a.format} for a in (conf.readable_logs() if conf else [])]
    if not log_path:
        assert conf is not None
        candidates = conf.readable_logs()
        if not candidates:
            why = "access logging is off" if conf.off else "no access_log writes to a file"
            raise Trouble(ProbeResult.skipped(NAME, f"nginx found, but {why}",
                                              kind="no_access_log"))
        sizes = await host.run(sh(SIZES_SCRIPT, *[a.path for a in candidates]), timeout=90)
        crossed += len(sizes.stdout)
        readable: dict[str, int] = {}
        for line in sizes.stdout.splitlines():
            size, _, path = line.strip().partition(" ")
            if size.isdigit():
                readable[path] = int(size)
        pick = [a for a in candidates if a.path in readable]
        if not pick:
            raise Trouble(ProbeResult.error(
                NAME, "no access log is readable: " + ", ".join(a.path for a in candidates),
                kind="permission_denied",
                fix="run as a user in the log's group (often adm) or " + FIX_CONFIG))
        best = max(pick, key=lambda a: readable[a.path])
        log_path = best.path
        wanted = wanted or best.format
        if len(pick) > 1:
            notes.append(f"{len(pick)} access logs found; read the largest, {log_path} "
                         "(set probes.nginx.log_path to choose)")
    elif not wanted and conf is not None:
        match = [a for a in conf.access_logs if a.path == log_path]
        wanted = match[0].format if match else "combined"
    try:
        lf, fname = _format_for(conf, wanted)
    except FormatError as exc:
        raise Trouble(ProbeResult.error(NAME, f"log_format unusable: {exc}", kind="bad_format",
                                        fix=FIX_CONFIG)) from None
    if "status" not in lf.needed:
        raise Trouble(ProbeResult.error(
            NAME, f"log_format {fname!r} has no $status: nothing to count", kind="bad_format",
            fix="add $status to the log_format, or point log_format at one that has it"))
    return Target(log_path, lf, fname, notes, logs, crossed)


# -- aggregation --------------------------------------------------------------
def window_options(options: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    try:
        window = parse_window(str(options.get("window", "15m") or "15m"))
        since = parse_when(options["since"]) if options.get("since") else None
        until = parse_when(options["until"]) if options.get("until") else None
    except ValueError as exc:
        raise Trouble(ProbeResult.error(
            NAME, f"bad window settings: {exc}", kind="bad_config",
            fix="window is like '15m', '1h' or 'all'; since/until are ISO 8601 times")) from None
    return window, since, until


def workers_option(options: dict[str, Any]) -> int:
    """``workers``: parallel readers on the box (0 = half its CPUs, at most 16)."""
    value = options.get("workers", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 64:
        raise Trouble(ProbeResult.error(
            NAME, f"bad workers setting: {value!r}", kind="bad_config",
            fix="probes.nginx.workers is a whole number from 0 (half the box's CPUs) to 64"))
    return value


async def aggregate_remote(host: Host, t: Target, window: int | None, since: int | None,
                           until: int | None, workers: int = 0) -> dict[str, Any] | None:
    """Run the script on the box's python3; None when the box has no usable python3."""
    opts = {"path": t.path, "format": t.lf.text, "escape": t.lf.escape, "name": t.format_name,
            "window_s": window, "since": since, "until": until, "workers": workers or None}
    code = nginx_remote.script().encode()
    argv = nginx_remote.argv(opts)
    done = await host.run(argv, timeout=600, stdin=code)
    t.bytes_crossed += len(code) + len(argv[-1]) + len(done.stdout.encode()) + len(done.stderr)
    if done.not_found or "SyntaxError" in done.stderr or "No such file" in done.stderr[:200]:
        t.notes.append("no usable python3 on the box: the window's lines were read over the "
                       f"connection ({done.describe()})")
        return None
    try:
        out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise Trouble(ProbeResult.error(
            NAME, f"the aggregation script failed on the box: {done.describe()}",
            kind="script_failed", fix="this is a bug; please report it with the output")) from None
    return out


async def aggregate_in_process(t: Target, window: int | None, since: int | None,
                               until: int | None) -> dict[str, Any]:
    """The local machine's own log, read in this process with the C scanner (a thread:
    no forked workers inside the console; one core reads ~3M lines/s)."""
    try:
        out = await asyncio.to_thread(aggregate_file, t.path, t.lf, window, since, until, 1,
                                      nginx_native.feeder)
    except PermissionError as exc:
        return {"error": "permission_denied", "message": str(exc)}
    except FileNotFoundError as exc:
        return {"error": "not_found", "message": str(exc)}
    except OSError as exc:
        return {"error": "unreadable", "message": str(exc)}
    return out


async def aggregate_here(host: Host, t: Target, window: int | None, since: int | None,
                         until: int | None) -> dict[str, Any]:
    """Fallback: read the window's bytes in chunks (tail -c | head -c), aggregate locally."""
    async def read(offset: int, size: int) -> bytes:
        done = await host.run(sh(READ_SCRIPT, str(offset + 1), t.path, str(size)), timeout=120)
        if not done.ok and not done.stdout:
            raise Trouble(ProbeResult.error(
                NAME, f"cannot read {t.path}: {done.describe()}", kind="permission_denied",
                fix="run as a user in the log's group (often adm) or " + FIX_CONFIG))
        data = done.stdout.encode("utf-8", "surrogateescape")
        t.bytes_crossed += len(data)
        return data

    size_run = await host.run(sh(SIZE_SCRIPT, t.path), timeout=90)
    if not size_run.ok or not size_run.stdout.strip().isdigit():
        raise Trouble(ProbeResult.error(
            NAME, f"cannot read {t.path}: {size_run.describe()}", kind="permission_denied",
            fix="run as a user in the log's group (often adm) or " + FIX_CONFIG))
    size = int(size_run.stdout.strip())
    lf = t.lf
    start = end = None
    offset = 0
    if lf.time_var:
        last = last_time(lf, await read(max(0, size - 262144), 262144))
        start, end = window_bounds(last, window, since, until)
        if start is not None:
            lo, hi = 0, size
            while hi - lo > 1 << 20:
                mid = (lo + hi) // 2
                when = _first_time(lf, await read(mid, 65536))
                if when is None or when >= start - SLACK_S:
                    hi = mid
                else:
                    lo = mid
            offset = lo
    agg = Aggregator(lf, start, end, nginx_native.feeder)
    # From the byte before offset: the line that offset cuts belongs before the window.
    pos, carry, skipping = max(offset - 1, 0), b"", offset > 0
    while pos < size:
        data = carry + await read(pos, min(4 << 20, size - pos))
        if len(data) == len(carry):
            break
        pos += len(data) - len(carry)
        if skipping:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            data, skipping = data[nl + 1:], False
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        agg.feed(data[:cut])
        carry = data[cut + 1:]
    if carry:
        agg.feed(carry)
    out = agg.result()
    out["file_bytes"] = size
    out["parser"] = "c" if agg.native_stream is not None else "python"  # as aggregate_file
    return out


def _first_time(lf: LogFormat, data: bytes) -> int | None:
    for line in data.split(b"\n")[1:-1]:
        vals = lf.parse_line(line)
        if vals is None:
            continue
        v = vals[lf.needed.index(lf.time_var)]
        if v is not None:
            with contextlib.suppress(BadChunk):
                return epoch(lf.time_var, v, None)
    return None


# -- findings -----------------------------------------------------------------
def findings_values(agg: dict[str, Any], t: Target, where: str) -> dict[str, Any]:
    """The [probes.nginx] values from the aggregates (pure)."""
    v: dict[str, Any] = {"log_path": t.path, "log_format_name": t.format_name}
    for key in ("lines", "bad_lines", "window_s", "qps_mean", "qps_peak"):
        if key in agg:
            v[key] = agg[key]
    sc = agg.get("status_counts", {})
    counts: dict[str, int] = {c: 0 for c in ("2xx", "3xx", "4xx", "5xx", *ALWAYS_CODES)}
    counts.update(sc.get("by_code", {}))
    counts.update(sc.get("by_class", {}))
    v["status_counts"] = dict(sorted(counts.items()))
    for key in ("request_time_ms_p50", "request_time_ms_p95", "request_time_ms_p99",
                "request_time_ms_max", "upstream_time_ms_p50", "upstream_time_ms_p95",
                "upstream_time_ms_p99", "nginx_time_ms_p95", "upstream_retries",
                "bandwidth_mbit_peak", "concurrency_littles_law", "upstream_errors",
                "response_bytes_mean", "request_time_ms_mean", "lines_outside_window",
                "routes_seen", "file_bytes", "bytes_scanned", "workers"):
        if key in agg:
            v[key] = agg[key]
    v["bytes_transferred"] = t.bytes_crossed
    v["aggregated_on"] = where
    v["parser"] = agg.get("parser", "python")
    for key in ("window_start", "window_end"):
        if key in agg:
            v[key] = dt.datetime.fromtimestamp(agg[key], dt.UTC)
    if agg.get("routes"):
        v["routes"] = agg["routes"]
    if agg.get("bad_line_samples"):
        v["bad_line_samples"] = agg["bad_line_samples"]
    if t.access_logs:
        v["access_logs"] = t.access_logs
    return v


def judge(v: dict[str, Any]) -> tuple[Status, str, list[str]]:
    notes: list[str] = []
    lines = int(v.get("lines", 0))
    if not lines:
        return "warn", f"no requests in the window of {v['log_path']}", [
            "widen probes.nginx.window, or check that nginx writes this log"]
    status: Status = "ok"
    c5 = v["status_counts"].get("5xx", 0)
    share5 = c5 / lines
    if share5 >= 0.05:
        status = "fail"
    elif share5 >= 0.01:
        status = "warn"
    if share5 >= 0.01:
        worst = sorted(((c, k) for k, c in v["status_counts"].items()
                        if k.startswith("5") and k != "5xx" and c), reverse=True)[:3]
        notes.append(f"{share5:.1%} of requests ended in 5xx ("
                     + ", ".join(f"{k}: {c}" for c, k in worst) + ")")
    bad = int(v.get("bad_lines", 0))
    if bad and bad / (bad + lines) >= 0.01:
        status = "warn" if status == "ok" else status
        notes.append(f"{bad} lines did not match log_format {v['log_format_name']!r}: "
                     "is it the format this log is written with?")
    if v.get("upstream_retries"):
        notes.append(f"{v['upstream_retries']} upstream retries (proxy_next_upstream)")
    if "nginx_time_ms_p95" in v and v["nginx_time_ms_p95"] >= 100:
        notes.append(f"p95 time spent in nginx itself (queueing, buffering) is "
                     f"{v['nginx_time_ms_p95']:g} ms")
    parts = [f"{lines} requests"]
    if "window_s" in v:
        parts[0] += f" in {v['window_s']} s ({v['qps_mean']:g} QPS, peak {v['qps_peak']})"
    if "request_time_ms_p95" in v:
        parts.append(f"p95 {v['request_time_ms_p95']:g} ms, p99 {v['request_time_ms_p99']:g} ms")
    parts.append(f"5xx {share5:.1%}")
    return status, "; ".join(parts), notes


class NginxProbe:
    name = NAME
    title = "nginx access log"

    async def check(self, host: Host, ctx: ProbeContext) -> ProbeResult:
        started = time.monotonic()
        try:
            window, since, until = window_options(dict(ctx.options))
            workers = workers_option(dict(ctx.options))
            t = await resolve(host, dict(ctx.options))
            got: dict[str, Any] | None
            if host.transport == "local" and nginx_native.can_cut(t.lf):
                ctx.progress(Progress(NAME, f"aggregating {t.path} (C scanner)"))
                got, where = await aggregate_in_process(t, window, since, until), "locally"
            else:
                ctx.progress(Progress(NAME, f"aggregating {t.path} on the box"))
                got = await aggregate_remote(host, t, window, since, until, workers)
                where = "box"
            if got is None:
                got = await aggregate_here(host, t, window, since, until)
                where = "locally"
            agg = got
        except Trouble as exc:
            exc.result.duration_s = time.monotonic() - started
            return exc.result
        if "error" in agg:
            kind = str(agg["error"])
            fix = ("run as a user in the log's group (often adm) or " + FIX_CONFIG
                   if kind in ("permission_denied", "not_found", "unreadable") else FIX_CONFIG)
            return ProbeResult.error(NAME, f"{t.path}: {agg.get('message', kind)}", kind=kind,
                                     fix=fix, duration_s=time.monotonic() - started)
        values = findings_values(agg, t, where)
        if not agg.get("file_bytes"):
            return ProbeResult(NAME, "skipped", f"{t.path} is empty: no requests to measure",
                               time.monotonic() - started, values=values, notes=t.notes,
                               error_kind="empty_log")
        status, summary, notes = judge(values)
        return ProbeResult(NAME, status, summary, time.monotonic() - started, values=values,
                           notes=t.notes + notes)

    async def watch(self, host: Host, ctx: ProbeContext) -> AsyncIterator[Sample]:
        """One Sample a second: qps, 5xx (last second), p95_ms/p99_ms (last minute)."""
        t = await resolve(host, dict(ctx.options))
        live = Live(t.lf)
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=100000)

        async def follow() -> None:
            while True:  # tail -F survives rotation; restart if the stream itself ends
                async for line in host.stream(sh(TAIL_SCRIPT, t.path)):
                    with contextlib.suppress(asyncio.QueueFull):
                        queue.put_nowait(line)
                await asyncio.sleep(1.0)

        task = asyncio.create_task(follow())
        try:
            next_tick = time.monotonic() + 1.0
            while True:
                await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
                next_tick += 1.0
                if task.done() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
                lines = []
                while not queue.empty():
                    lines.append(queue.get_nowait())
                yield Sample(NAME, live.tick(lines))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class Live:
    """Rolling one-minute figures from lines, one tick a second (pure; tested directly)."""

    def __init__(self, lf: LogFormat, seconds: int = 60) -> None:
        self.lf = lf
        self.seconds = seconds
        self.buckets: deque[tuple[int, int, Counter[int]]] = deque(maxlen=seconds)
        self.bad = 0
        self._status = lf.needed.index("status") if "status" in lf.needed else -1
        self._rt = lf.needed.index("request_time") if "request_time" in lf.needed else -1

    def tick(self, lines: list[str]) -> dict[str, Any]:
        n = c5 = 0
        ms: Counter[int] = Counter()
        for line in lines:
            vals = self.lf.parse_line(line.encode("utf-8", "surrogateescape"))
            st = vals[self._status] if vals is not None and self._status >= 0 else None
            if vals is None or st is None or len(st) != 3 or not st.isdigit():
                self.bad += 1
                continue
            n += 1
            if st[:1] == b"5":
                c5 += 1
            if self._rt >= 0 and vals[self._rt] is not None:
                with contextlib.suppress(BadChunk):
                    got = time_ms(vals[self._rt] or b"-")
                    if got is not None:
                        ms[got[0]] += 1
        self.buckets.append((n, c5, ms))
        total: Counter[int] = Counter()
        for _, _, b in self.buckets:
            total.update(b)
        values: dict[str, Any] = {"qps": n, "5xx": c5, "window_s": self.seconds,
                                  "requests_window": sum(b[0] for b in self.buckets),
                                  "bad_lines": self.bad}
        count = sum(total.values())
        if count:
            ordered = sorted(total.items())
            for p in (95, 99):
                rank = max(1, -(-count * p // 100))
                seen = 0
                for v, c in ordered:
                    seen += c
                    if seen >= rank:
                        values[f"p{p}_ms"] = float(v)
                        break
        return values


@hookimpl
def inferfit_register_probes(register: Callable[[NginxProbe], None]) -> None:
    register(NginxProbe())
