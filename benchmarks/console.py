"""Console benchmark: time to first frame, and the console's own CPU with live panels at 1 Hz.

    .venv/bin/python benchmarks/console.py [--seconds 30] [--glances PATH]

Runs the real `inferfit` binary in a pseudo-terminal (120x40):

1. time to first frame of `inferfit show tests/fixtures/tui/a100-box.toml` (replay) and of a
   live `inferfit` on this machine: spawn until the footer's "re-run" appears on the terminal;
2. the replay's idle CPU (``--idle-seconds``: Textual's floor here), and the live
   console's own CPU (utime+stime of the inferfit process, from /proc) over ``--seconds``
   after a short warm-up, with three live panels at 1 Hz: GPU (a fake nvidia-smi first on
   PATH streams readings every 1000 ms), latency (TCP to a listener on 127.0.0.1) and nginx
   (`tail -F` of a log this script appends to, 20 lines/s).
   Children (nvidia-smi, the latency agent, tail) are not the console and are not counted.

Glances is often quoted at 7–25 % of a core; with ``--glances PATH`` the same measurement
is taken for `glances` in the same terminal, otherwise the quoted figure is printed and
labelled as quoted. Target for the console: ≤ 2 % of one core.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import os
import pty
import shutil
import signal
import socket
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "tui" / "a100-box.toml"
A100_XML = REPO / "tests" / "fixtures" / "gpu" / "influxdata__telegraf__a100-sxm4-v12.xml"
COLS, ROWS = 120, 40
TICK = os.sysconf("SC_CLK_TCK")

FAKE_SMI = r"""#!/bin/sh
d="$(dirname "$0")"
case "$*" in
  "-q -x") cat "$d/a100.xml" ;;
  "-L") echo "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)" ;;
  --query-gpu=*-lms*)
    i=0
    while [ "$i" -lt 3600 ]; do
      echo "0, $(( (i * 37) % 100 )), $(( 40000 + i * 10 )), 81920, $(( 90 + (i * 53) % 300 )).5"
      sleep 1
      i=$((i + 1))
    done ;;
  *) exit 2 ;;
esac
"""


class Term:
    """A process on a pseudo-terminal whose output is drained by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.started = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:  # child
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.buf = bytearray()
        self.first: dict[bytes, float] = {}
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.buf += chunk
                del self.buf[:-200_000]

    def wait_for(self, marker: bytes, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if marker in self.buf:
                    return time.monotonic() - self.started
            time.sleep(0.01)
        return None

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def stop(self, keys: str = "q") -> None:
        for key in keys:
            with contextlib.suppress(OSError):
                self.send(key)
            time.sleep(0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def measure_cpu(term: Term, warmup_s: float, seconds: float) -> float:
    time.sleep(warmup_s)
    c0, t0 = term.cpu_s(), time.monotonic()
    time.sleep(seconds)
    c1, t1 = term.cpu_s(), time.monotonic()
    return 100 * (c1 - c0) / (t1 - t0)


def listener() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, int(srv.getsockname()[1])


def log_writer(path: Path, stop: threading.Event) -> None:
    n = 0
    with path.open("a", buffering=1) as fh:
        while not stop.is_set():
            now = dt.datetime.now(dt.UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
            for _ in range(20):
                n += 1
                status = 502 if n % 97 == 0 else 200
                fh.write(f'127.0.0.1 - - [{now}] "POST /v1/chat/completions HTTP/1.1" {status} '
                         f'{800 + n % 400} "-" "bench"\n')
            stop.wait(1.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0,
                        help="also measure the replay's idle CPU for this long (0: skip)")
    parser.add_argument("--glances", metavar="PATH", help="glances executable to compare with")
    parser.add_argument("--profile", metavar="FILE",
                        help="run the live console under cProfile, stats to FILE")
    args = parser.parse_args()
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent)) or "inferfit"
    tmp = Path(tempfile.mkdtemp(prefix="inferfit-bench-"))
    fake = tmp / "bin"
    fake.mkdir()
    shutil.copy(A100_XML, fake / "a100.xml")
    (fake / "nvidia-smi").write_text(FAKE_SMI)
    (fake / "nvidia-smi").chmod(0o755)
    home = tmp / "home"
    home.mkdir()
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(home),
           "INFERFIT_CONFIG_DIR": str(home / "cfg"), "PATH": f"{fake}:{os.environ['PATH']}",
           "COLUMNS": str(COLS), "LINES": str(ROWS)}
    srv, port = listener()
    log = tmp / "access.log"
    log.touch()
    stop = threading.Event()
    threading.Thread(target=log_writer, args=(log, stop), daemon=True).start()
    config = tmp / "bench.toml"
    config.write_text(
        '[check]\nprobes = ["system", "gpu", "latency", "nginx"]\n\n'
        '[probes.gpu]\nsource = "nvidia-smi"\n\n'
        f'[probes.nginx]\nlog_path = "{log}"\nlog_format = "combined"\n\n'
        f'[[regions]]\nname = "loopback"\ntargets = ["127.0.0.1:{port}"]\nbudget_ms_p95 = 50.0\n'
    )
    print(f"inferfit console benchmark ({COLS}x{ROWS} pty, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f})")
    try:
        replay = Term([exe, "show", str(FIXTURE)], env, tmp)
        first = replay.wait_for(b"re-run", 60)
        idle = measure_cpu(replay, 2.0, args.idle_seconds) if args.idle_seconds else None
        replay.stop("q")
        print(f"  first frame, `inferfit show` (replay):      "
              f"{'timeout' if first is None else f'{first * 1000:,.0f} ms'}")
        if idle is not None:
            print(f"  replay (nothing live) CPU over {args.idle_seconds:g} s:     "
                  f"{idle:.2f} % of one core (Textual's floor here)")
        wrap = [sys.executable, "-m", "cProfile", "-o", args.profile] if args.profile else []
        live = Term([*wrap, exe, "--config", str(config)], env, tmp)
        first = live.wait_for(b"re-run", 60)
        print(f"  first frame, `inferfit` (live, local):        "
              f"{'timeout' if first is None else f'{first * 1000:,.0f} ms'}")
        live_seen = live.wait_for(b"% mean", 30)
        cpu = measure_cpu(live, args.warmup, args.seconds)
        with live.lock:
            screen = bytes(live.buf)
        live.stop("qy")
        print(f"  console CPU over {args.seconds:g} s, live GPU + latency + nginx at 1 Hz: "
              f"{cpu:.2f} % of one core (target ≤ 2 %)")
        print(f"    live GPU readings on screen: {'yes' if live_seen else 'NO'}; "
              f"nginx live: {'yes' if b'now' in screen else 'not seen'}")
        if args.glances:
            glances = Term([args.glances, "-t", "1"], env, tmp)
            glances.wait_for(b"CPU", 30)
            g = measure_cpu(glances, 3.0, args.seconds)
            glances.stop("q")
            print(f"  glances -t 1, measured here, same terminal:   {g:.2f} % of one core")
        else:
            print("  glances: 7–25 % of one core (quoted figure, not measured here; "
                  "pass --glances PATH to measure)")
    finally:
        stop.set()
        srv.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
