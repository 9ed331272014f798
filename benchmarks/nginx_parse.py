"""inferfit's nginx log parser against goaccess, on the same generated files, in one run.

Builds an access log of --lines lines (default 2,000,000) in the ``ai_api``
format (DESIGN.md / tests/fixtures/nginx) and in ``combined``, then for each
file runs inferfit's aggregation (``aggregate_file``, the code sent to the box)
and ``goaccess`` as separate processes, and prints wall and CPU time, lines/s
and the ratio (by CPU time: robust when other work shares the machine), peak
RSS (``wait4``) and whether the status counts agree.

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
from inferfit.probes.nginx_scan import aggregate_file
from inferfit.probes.nginx_format import COMBINED, LogFormat
fmt = COMBINED if sys.argv[2] == "combined" else sys.argv[3]
started = time.perf_counter()
out = aggregate_file(sys.argv[1], LogFormat(fmt), None)
out["parse_s"] = time.perf_counter() - started
print(json.dumps(out))
"""


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system of the process (and anything it waited for)
    rss: int  # peak resident set, bytes
    out: str


def run_measured(argv: list[str], cwd: Path) -> Run:
    """Run a command alone; wall and CPU time, peak RSS from wait4, stdout."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errf:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errf, cwd=cwd)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        errf.seek(0)
        err = errf.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, out.decode())


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.cpu_s)


def goaccess_status(report: Path) -> dict[str, int]:
    doc = json.loads(report.read_text())
    counts: dict[str, int] = {}
    for group in doc["status_codes"]["data"]:
        for item in group.get("items", []):
            code = item["data"].split(" ", 1)[0]
            counts[code] = counts.get(code, 0) + int(item["hits"]["count"])
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--skip-goaccess", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tool; the best counts")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    goaccess = shutil.which("goaccess")
    if not goaccess and not args.skip_goaccess:
        raise SystemExit("goaccess not found (apt-get install goaccess), or pass --skip-goaccess")
    t0 = time.perf_counter()
    files = dict(zip(("ai_api", "combined"), generate(args.lines, args.out), strict=True))
    print(f"generated {args.lines:,} lines per format in {time.perf_counter() - t0:.1f} s "
          f"({', '.join(f'{p.stat().st_size / 1e6:.0f} MB' for p in files.values())})")
    print("lines/s and the ratio use CPU time (user + system), robust on a shared machine; "
          f"best of {args.repeat}")
    print(f"{'format':9} {'tool':9} {'wall s':>7} {'cpu s':>7} {'lines/s':>11} {'peak RSS':>9} "
          f"{'ratio':>6}  status counts")
    ok = True
    for name, path in files.items():
        ours_runs: list[Run] = []
        theirs_runs: list[Run] = []
        report = args.out / f"goaccess-{name}.json"
        for _ in range(args.repeat):  # interleaved, so both see the same machine
            ours_runs.append(run_measured(
                [sys.executable, "-c", INFERFIT_CODE, str(path), name, AI_API], args.out))
            if not args.skip_goaccess:
                theirs_runs.append(run_measured(
                    [goaccess, str(path), *GOACCESS_FORMATS[name], "--no-global-config",
                     "--no-progress", "-o", str(report)], args.out))
        mine = best(ours_runs)
        ours = json.loads(mine.out)
        ours_rate = ours["lines"] / mine.cpu_s
        print(f"{name:9} {'inferfit':9} {mine.wall_s:7.2f} {mine.cpu_s:7.2f} {ours_rate:11,.0f} "
              f"{mine.rss / 2**20:7.1f}MB {'':>6}  lines={ours['lines']:,} bad={ours['bad_lines']}")
        if args.skip_goaccess:
            continue
        ga = best(theirs_runs)
        g_rate = args.lines / ga.cpu_s
        theirs = goaccess_status(report)
        same = theirs == ours["status_counts"]["by_code"]
        ok = ok and same and ours["bad_lines"] == 0
        print(f"{name:9} {'goaccess':9} {ga.wall_s:7.2f} {ga.cpu_s:7.2f} {g_rate:11,.0f} "
              f"{ga.rss / 2**20:7.1f}MB {ours_rate / g_rate:5.1f}x  "
              f"{'identical' if same else 'DIFFER'}: "
              + ", ".join(f"{k}={v}" for k, v in sorted(theirs.items())))
        if not same:
            print(f"{'':30} inferfit: {ours['status_counts']['by_code']}")
        report.unlink()
    if not args.keep:
        for path in files.values():
            path.unlink()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
