"""Interference A/B against a real nginx whose upstream shares a CPU with the batch."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import uuid

import pytest

from inferfit.plugins.interference import (
    Phase,
    ProbeSettings,
    parse_gpu_util,
    parse_probe,
    percentile,
    summarize,
)

# A realtime upstream: every request burns ~8 ms of CPU (like a small model step).
UPSTREAM = """\
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        end = time.thread_time() + 0.008
        x = 0
        while time.thread_time() < end:
            x += 1
        body = b"ok\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 128; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream realtime {{ server 127.0.0.1:{up}; keepalive 8; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://realtime;
        }}
    }}
}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def realtime(tmp_path, mx):
    """nginx on 127.0.0.1 proxying to a CPU-bound upstream pinned to CPU 0."""
    d = tmp_path / "nginx"
    d.mkdir()
    up_port, port = _free_port(), _free_port()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(up_port)])
    os.sched_setaffinity(upstream.pid, {0})
    conf = d / "nginx.conf"
    conf.write_text(NGINX_CONF.format(d=d, up=up_port, port=port))
    nginx = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", str(d),
                              "-c", str(conf), "-e", str(d / "error.log")])
    try:
        assert mx.wait_for(lambda: _listening(up_port) and _listening(port), 20), \
            (d / "error.log").read_text() if (d / "error.log").exists() else "no nginx"
        yield f"http://127.0.0.1:{port}/infer"
    finally:
        _stop(nginx)
        _stop(upstream)


def test_ab_cycle_reports_higher_p95_with_batch_on(box, inferfit_cli, realtime, workers,
                                                   lease_dir, tmp_path, mx):
    hogs = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2, busy=True)
    for hog in hogs:
        os.sched_setaffinity(hog.pid, {0})  # the batch shares the upstream's CPU
    cfg = mx.config(tmp_path / "mixed.toml", controller="signal",
                    pidfile=str(workers.pidfile("hogs.pid", hogs)), lease_s=60,
                    lease_dir=str(lease_dir), measure_url=realtime, measure_requests=40,
                    measure_concurrency=2, measure_settle_s=0.3)
    out = tmp_path / "findings.toml"
    r = inferfit_cli("check", "--probe", "system", "--export", str(out), *box.cli())
    assert out.exists(), r.stderr  # measure merges [mixed] into these findings
    t0 = time.monotonic()
    r = inferfit_cli("batch", "measure", "--yes", "--export", str(out), "--config", str(cfg),
                     *box.cli(), timeout=300)
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(out.read_text())
    assert "system" in doc["probes"]  # the check's findings are kept
    mixed = doc["mixed"]
    assert mixed["method"] == "http_probe"
    assert mixed["samples"] == 120
    assert mixed["samples_batch_on"] == 80
    assert mixed["samples_batch_off"] == 40
    assert mixed["p95_ms_batch_on"] > mixed["p95_ms_batch_off"], mixed
    assert mixed["p99_ms_batch_on"] >= mixed["p95_ms_batch_on"]
    assert mixed["p99_ms_batch_off"] >= mixed["p95_ms_batch_off"]
    assert mixed["interference_pct"] > 0
    assert "p95" in r.stdout
    # the batch runs again afterwards, and nothing is left paused
    assert all(h.state() != "T" for h in hogs)
    assert time.monotonic() - t0 < 300
    # measuring again merges into the same findings file
    r = inferfit_cli("batch", "measure", "--yes", "--export", str(out), "--config", str(cfg),
                     "--requests", "10", *box.cli(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert tomllib.loads(out.read_text())["mixed"]["samples"] == 30


def test_measure_refuses_without_endpoint_or_when_paused(box, inferfit_cli, workers, lease_dir,
                                                         tmp_path, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    cfg = mx.config(tmp_path / "m.toml", controller="signal",
                    pidfile=str(workers.pidfile("b.pid", batch)), lease_dir=str(lease_dir))
    r = inferfit_cli("batch", "measure", "--yes", "--config", str(cfg), *box.cli())
    assert r.returncode == 2
    assert "measure_url" in r.stderr
    r = inferfit_cli("batch", "pause", "--yes", "--config", str(cfg), *box.cli())
    assert r.returncode == 0, r.stderr
    r = inferfit_cli("batch", "measure", "--yes", "--url", "http://127.0.0.1:9/x",
                     "--config", str(cfg), *box.cli())
    assert r.returncode == 2
    assert "not running" in r.stderr
    r = inferfit_cli("batch", "resume", "--config", str(cfg), *box.cli())
    assert r.returncode == 0
    # an endpoint nobody answers: refused with the probe's error, batch left running
    port = _free_port()
    r = inferfit_cli("batch", "measure", "--yes", "--url", f"http://127.0.0.1:{port}/",
                     "--requests", "3", "--config", str(cfg), *box.cli())
    assert r.returncode == 2
    assert "no request" in r.stderr
    assert batch[0].state() != "T"


def test_percentiles_and_section_are_pure_arithmetic():
    assert percentile([], 95) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    settings = ProbeSettings("http://127.0.0.1:1/", 4, 2, 1.0, 0.0)
    phases = [Phase("on", [10, 20, 30, 40]), Phase("off", [5, 5, 6, 6], gpu_util_pct=10.0),
              Phase("on", [10, 20, 30, 40], gpu_util_pct=90.0)]
    sec = summarize(phases, settings, "signal")
    assert sec["samples"] == 12
    assert sec["p95_ms_batch_off"] == 6.0
    assert sec["p95_ms_batch_on"] == 40.0
    assert sec["interference_pct"] == pytest.approx((40 - 6) / 6 * 100, abs=0.1)
    assert sec["gpu_util_pct_batch_on"] == 90.0
    assert sec["gpu_util_pct_batch_off"] == 10.0
    assert parse_probe('noise\n{"lat_ms": [1.5], "errors": 0}\n')["lat_ms"] == [1.5]
    with pytest.raises(ValueError, match="no result"):
        parse_probe("Traceback ...\n")
    assert parse_gpu_util("37\n63\n") == 50.0
    assert parse_gpu_util("[N/A]\n") is None
    with pytest.raises(Exception, match="measure_url"):
        ProbeSettings.from_options({"measure_url": "127.0.0.1:80"})
    with pytest.raises(Exception, match="measure_requests"):
        ProbeSettings.from_options({"measure_url": "http://127.0.0.1/", "measure_requests": 0})

