"""inferfit's nginx log parser against goaccess, on the same generated files, in one run.

Builds an access log of --lines lines (default 2,000,000) in the ``ai_api``
format (DESIGN.md / tests/fixtures/nginx) and in ``combined``, then for each
file runs, as separate processes, interleaved:

* inferfit's aggregation (``aggregate_file``) as it runs in the console's process,
  with the C scanner (``_nginx_native``): one worker (CPU-time lines/s, the
  single-core figure) and ``--workers`` forked workers (default: every CPU;
  wall-clock lines/s, at nice 0 like goaccess);
* the same code as the script sent to a box's python3 (pure Python, no C scanner),
  one worker and ``--workers`` workers (on a box they run at nice 10);
* ``goaccess`` (single-threaded) with only the panels that match what inferfit
  reports (requests, status codes): its fastest reasonable setting; and with
  ``--goaccess-all-panels``, its default too.

It prints wall and CPU time, lines/s, the ratios (single core: CPU time against
goaccess's CPU time; parallel: wall time against goaccess's wall time), peak RSS
of the largest process (``wait4``), the load average before each run (other
work on the machine skews wall times), and whether the status counts agree.

    .venv/bin/python benchmarks/nginx_parse.py --lines 200000
    .venv/bin/python benchmarks/nginx_parse.py            # the full 2M-line run

Target (issue 4): >= 10x goaccess's lines/s, peak RSS <= 64 MB, equal status counts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

AI_API = (
    '$remote_addr $time_iso8601 "$request" $status req_bytes=$request_length '
    "resp_bytes=$bytes_sent request_time=$request_time upstream_time=$upstream_response_time "
    "upstream_status=$upstream_status request_id=$request_id"
)
# Panels goaccess may skip and still report what inferfit reports (requests with
# their times, status codes). GEO_LOCATION etc. are listed for builds that have them.
GOACCESS_SKIP = ("VISITORS", "REQUESTS_STATIC", "NOT_FOUND", "HOSTS", "OS", "BROWSERS",
                 "VISIT_TIMES", "VIRTUAL_HOSTS", "REFERRERS", "REFERRING_SITES", "KEYPHRASES",
                 "REMOTE_USER", "CACHE_STATUS", "GEO_LOCATION", "MIME_TYPE", "TLS_TYPE")
GOACCESS_FORMATS = {
    "ai_api": ["--log-format", '%h %dT%t+%^ "%r" %s req_bytes=%^ resp_bytes=%b request_time=%T %^',
               "--date-format", "%Y-%m-%d", "--time-format", "%H:%M:%S"],
    "combined": ["--log-format", "COMBINED"],
}
ROUTES = [
    ("POST", "/v1/chat/completions", 60), ("POST", "/v1/chat/completions?stream=true", 15),
    ("POST", "/v1/embeddings", 10), ("GET", "/v1/models", 5), ("GET", "/healthz", 4),
    ("GET", "/v1/files/", 3), ("GET", "/static/app.js", 2), ("GET", "/.env", 1),
]
STATUSES = [(200, 900), (404, 30), (499, 12), (500, 20), (502, 8), (503, 5), (504, 15),
            (400, 10)]
AGENTS = ["openai-python/1.54.0", "python-requests/2.32.3",
          "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "curl/8.5.0"]


def generate(n: int, out: Path, seed: int = 4) -> tuple[Path, Path]:
    """The same n requests written in both formats, about 400 per second, in time order."""
    rng = random.Random(seed)
    ai_path, comb_path = out / f"ai_api-{n}.log", out / f"combined-{n}.log"
    if ai_path.exists() and comb_path.exists():
        return ai_path, comb_path
    start = dt.datetime(2026, 11, 30, 4, 0, 0, tzinfo=dt.UTC)
    routes = [r for r in ROUTES for _ in range(r[2])]
    statuses = [s for s, w in STATUSES for _ in range(w)]
    times = [f"{min(rng.lognormvariate(-2.3, 1.1), 30.0):.3f}" for _ in range(5000)]
    with ai_path.open("w") as ai, comb_path.open("w") as comb:
        ai_buf: list[str] = []
        comb_buf: list[str] = []
        sec = -1
        iso = local = ""
        for i in range(n):
            s = i * 10 // 4000  # 400 requests a second
            if s != sec:
                sec = s
                t = start + dt.timedelta(seconds=s)
                iso = t.isoformat()
                local = t.strftime("%d/%b/%Y:%H:%M:%S +0000")
            method, path, _ = rng.choice(routes)
            if path.endswith("/files/"):
                path += f"file-{rng.randrange(10**9):09d}"
            status = rng.choice(statuses)
            if path in ("/static/app.js", "/.env"):
                status = 404
            rt = rng.choice(times)
            addr = f"127.0.0.{rng.randrange(1, 255)}"
            if status in (404, 400):
                up_t = up_s = "-"
            elif status == 499:
                up_t, up_s = rt, "-"
            elif rng.random() < 0.03:
                up_t, up_s = f"0.000, {rt}", f"502, {status}"
            else:
                up_t, up_s = rt, str(status)
            body = rng.randrange(0, 4000) if status != 499 else 0
            ai_buf.append(
                f'{addr} {iso} "{method} {path} HTTP/1.1" {status} '
                f"req_bytes={rng.randrange(100, 5000)} resp_bytes={body + 250} "
                f"request_time={rt} upstream_time={up_t}"
                f" upstream_status={up_s} request_id={rng.getrandbits(128):032x}\n"
            )
            comb_buf.append(f'{addr} - - [{local}] "{method} {path} HTTP/1.1" {status} {body} '
                            f'"-" "{rng.choice(AGENTS)}"\n')
            if len(ai_buf) >= 20000:
                ai.write("".join(ai_buf))
                comb.write("".join(comb_buf))
                ai_buf.clear()
                comb_buf.clear()
        ai.write("".join(ai_buf))
        comb.write("".join(comb_buf))
    return ai_path, comb_path


INFERFIT_CODE = r"""
import json, sys, time
from inferfit.probes import nginx_native, nginx_scan
from inferfit.probes.nginx_scan import aggregate_file
from inferfit.probes.nginx_format import COMBINED, LogFormat
nginx_scan.WORKER_NICE = 0  # the probe's workers yield to the box's work; goaccess runs at 0
fmt = COMBINED if sys.argv[2] == "combined" else sys.argv[3]
started = time.perf_counter()
native = nginx_native.feeder if sys.argv[5] == "native" else None
if native and not nginx_native.available():
    raise SystemExit("the C scanner is not built (pip install -e . with a C compiler)")
out = aggregate_file(sys.argv[1], LogFormat(fmt), None, workers=int(sys.argv[4]), native=native)
out["parse_s"] = time.perf_counter() - started
print(json.dumps(out))
"""


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system of the process and its workers
    rss: int  # peak resident set of the largest process, bytes
    out: str
    load: float  # 1-minute load average just before the run


GNU_TIME = "/usr/bin/time"


def run_measured(argv: list[str], cwd: Path) -> Run:
    """Run a command alone; wall and CPU time, peak RSS, stdout.

    Linux carries a process's pre-exec RSS into its ru_maxrss, so a command
    forked from this (larger) Python would report this process's size. GNU time
    is small and forks the command itself; without it, wait4's figure is kept.
    """
    timed = os.access(GNU_TIME, os.X_OK)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errf, tempfile.NamedTemporaryFile("r") as usef:
        cmd = [GNU_TIME, "-f", "%U %S %M", "-o", usef.name, *argv] if timed else argv
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, cwd=cwd)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        errf.seek(0)
        err = errf.read()
        cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024
        if timed:
            user, system, kb = usef.read().split()[-3:]
            cpu, rss = float(user) + float(system), int(kb) * 1024
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{argv[0]} failed ({code}): {err.decode()[-2000:]}")
    return Run(wall, cpu, rss, out.decode(), load)


def goaccess_status(report: Path) -> dict[str, int]:
    doc = json.loads(report.read_text())
    counts: dict[str, int] = {}
    for group in doc["status_codes"]["data"]:
        for item in group.get("items", []):
            code = item["data"].split(" ", 1)[0]
            counts[code] = counts.get(code, 0) + int(item["hits"]["count"])
    return counts


def row(fmt: str, tool: str, r: Run, lines: int, rate: float, ratio: str, note: str) -> None:
    print(f"{fmt:9} {tool:27} {r.wall_s:7.2f} {r.cpu_s:7.2f} {rate:11,.0f} "
          f"{r.rss / 2**20:7.1f}MB {r.load:5.2f} {ratio:>7}  {note}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--skip-goaccess", action="store_true")
    ap.add_argument("--goaccess-all-panels", action="store_true",
                    help="also time goaccess with its default panels")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="workers for the parallel run (default: every CPU; 1: skip it)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tool; the best counts")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    goaccess = shutil.which("goaccess") or ""
    if not goaccess and not args.skip_goaccess:
        raise SystemExit("goaccess not found (apt-get install goaccess), or pass --skip-goaccess")
    t0 = time.perf_counter()
    files = dict(zip(("ai_api", "combined"), generate(args.lines, args.out), strict=True))
    print(f"generated {args.lines:,} lines per format in {time.perf_counter() - t0:.1f} s "
          f"({', '.join(f'{p.stat().st_size / 1e6:.0f} MB' for p in files.values())}); "
          f"{os.cpu_count()} CPUs; best of {args.repeat}")
    print("single core: lines/s by CPU time, ratio against goaccess's CPU time; "
          "parallel: lines/s by wall time, ratio against goaccess's wall time")
    print(f"{'format':9} {'tool':27} {'wall s':>7} {'cpu s':>7} {'lines/s':>11} {'peak RSS':>9} "
          f"{'load':>5} {'ratio':>7}  status counts")
    tools: list[tuple[str, list[str]]] = []
    for kind, label in (("native", "inferfit"), ("python", "box script")):
        tools.append((f"{label} 1 worker", ["1", kind]))
        if args.workers > 1:
            tools.append((f"{label} {args.workers} workers", [str(args.workers), kind]))
    ok = True
    for name, path in files.items():
        report = args.out / f"goaccess-{name}.json"
        runs: dict[str, list[Run]] = {}
        for _ in range(args.repeat):  # interleaved, so all see the same machine
            for tool, extra in tools:
                runs.setdefault(tool, []).append(run_measured(
                    [sys.executable, "-c", INFERFIT_CODE, str(path), name, AI_API, *extra],
                    args.out))
            if args.skip_goaccess:
                continue
            base = [goaccess, str(path), *GOACCESS_FORMATS[name], "--no-global-config",
                    "--no-progress", "-o", str(report)]
            lean = [*base, *(f"--ignore-panel={p}" for p in GOACCESS_SKIP)]
            runs.setdefault("goaccess", []).append(run_measured(lean, args.out))
            if args.goaccess_all_panels:
                runs.setdefault("goaccess all panels", []).append(run_measured(base, args.out))
        theirs: dict[str, int] = {}
        if not args.skip_goaccess:
            theirs = goaccess_status(report)
            report.unlink()
        ga_cpu = min(runs["goaccess"], key=lambda r: r.cpu_s) if theirs else None
        ga_wall = min(runs["goaccess"], key=lambda r: r.wall_s) if theirs else None
        for tool, _ in tools:
            single = tool.endswith(" 1 worker")
            mine = min(runs[tool], key=lambda r: r.cpu_s if single else r.wall_s)
            ours = json.loads(mine.out)
            rate = ours["lines"] / (mine.cpu_s if single else mine.wall_s)
            ratio, note = "", f"lines={ours['lines']:,} bad={ours['bad_lines']}"
            if theirs and ga_cpu and ga_wall:
                g_rate = args.lines / (ga_cpu.cpu_s if single else ga_wall.wall_s)
                ratio = f"{rate / g_rate:5.1f}x"
                same = theirs == ours["status_counts"]["by_code"]
                ok = ok and same and ours["bad_lines"] == 0
                note += " identical" if same else f" DIFFER: {ours['status_counts']['by_code']}"
            if not single:
                note += f" ({ours.get('workers', 1)} workers ran)"
            row(name, tool, mine, ours["lines"], rate, ratio, note)
        for tool in ("goaccess", "goaccess all panels"):
            if tool not in runs or not theirs:
                continue
            by_cpu = min(runs[tool], key=lambda r: r.cpu_s)
            row(name, tool + " (cpu)", by_cpu, args.lines, args.lines / by_cpu.cpu_s, "",
                ", ".join(f"{k}={v}" for k, v in sorted(theirs.items())))
            by_wall = min(runs[tool], key=lambda r: r.wall_s)
            row(name, tool + " (wall)", by_wall, args.lines, args.lines / by_wall.wall_s, "", "")
    if not args.keep:
        for path in files.values():
            path.unlink()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
