"""Mixed-mode benchmark: how long `p` takes, and how late the lease watchdog resumes.

    .venv/bin/python benchmarks/mixed_pause.py [--cycles 10] [--workers 4] [--ttl 3]
                                               [--target box -F ssh_config]

Starts ``--workers`` sleeping Python workers on this machine (they are the batch),
then times, over ``--cycles`` cycles through the real controller (LocalHost, or an
SSH target that reaches this machine):

1. pause: from calling ``BatchSession.pause()`` until it returns with every worker
   in state T (the returned state is read back from /proc, so this is the real latency of
   the console key, lease + watchdog start included);
2. resume: the same for ``resume()``;
3. lease expiry: after one pause that nobody renews, the delay between the lease's expiry
   (``--ttl``) and every worker running again (the watchdog polls once a second).

Workers are killed by PID at the end; nothing is left stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inferfit.hosts import Host, LocalHost, SSHHost, SSHOptions, SSHTarget
from inferfit.plugins.batch_session import BatchSession
from inferfit.plugins.batch_signal import CONTROLLER

WORKER = "import time\nwhile True:\n    time.sleep(0.05)\n"


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


async def run(args: argparse.Namespace, tmp: Path) -> None:
    script = tmp / "worker.py"
    script.write_text(WORKER)
    procs = [subprocess.Popen([sys.executable, str(script)]) for _ in range(args.workers)]
    pidfile = tmp / "batch.pid"
    pidfile.write_text("".join(f"{p.pid}\n" for p in procs))
    host: Host = (SSHHost(SSHTarget.parse(args.target), SSHOptions(config_file=args.F))
                  if args.target else LocalHost())
    opts = {"controller": "signal", "pidfile": str(pidfile), "lease_s": args.ttl,
            "lease_dir": str(tmp / "leases")}
    pause_s, resume_s = [], []
    try:
        session = BatchSession(host, CONTROLLER, opts, renew_every_s=3600)
        await session.refresh()  # connect outside the timings
        for _ in range(args.cycles):
            t0 = time.perf_counter()
            st = await session.pause()
            pause_s.append(time.perf_counter() - t0)
            assert st.state == "paused"
            assert all(state(p.pid) == "T" for p in procs)
            t0 = time.perf_counter()
            st = await session.resume()
            resume_s.append(time.perf_counter() - t0)
            assert st.state == "running"
        st = await CONTROLLER.pause(host, opts)  # no session: nobody renews
        t_paused = time.monotonic()
        while any(state(p.pid) == "T" for p in procs):
            await asyncio.sleep(0.02)
        late = time.monotonic() - t_paused - args.ttl
    finally:
        await host.close()
        for p in procs:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()
    where = args.target or "local"
    print(f"mixed pause benchmark ({where}, {args.workers} workers, {args.cycles} cycles)")
    for name, vals in (("pause", pause_s), ("resume", resume_s)):
        print(f"  {name:7s} median {statistics.median(vals) * 1000:7.1f} ms   "
              f"max {max(vals) * 1000:7.1f} ms")
    print(f"  lease expiry -> all running: {late:+.2f} s after the {args.ttl} s TTL")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--ttl", type=int, default=3)
    ap.add_argument("--target", help="SSH target reaching this machine (default: local)")
    ap.add_argument("-F", help="ssh config file for --target")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="inferfit-mixed-") as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
