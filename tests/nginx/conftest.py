"""A real nginx on 127.0.0.1 proxying to a small upstream the test starts.

nginx runs with its own prefix, config, pid file and logs in a temp dir, in the
foreground (``daemon off``), and is stopped by PID. The upstream answers by
path: ``/ok`` 200, ``/slow`` after 3 s, ``/fail`` 500, ``/timeout`` after 6 s
(nginx gives up after 2 s: 504). The upstream group lists a dead port first
(``max_fails=0``), so about half the proxied requests are retried (``502, 200``).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# Roomy on purpose: a loaded CI box must not turn a quick /ok into a 504.
READ_TIMEOUT_S = 2
SLOW_S = 3.0
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nginx"

AI_API = (
    "'$remote_addr $time_iso8601 \"$request\" $status '\n"
    "                      'req_bytes=$request_length resp_bytes=$bytes_sent '\n"
    "\t\t      'request_time=$request_time upstream_time=$upstream_response_time '\n"
    "                      'upstream_status=$upstream_status request_id=$request_id'"
)
AI_API_TEXT = (
    '$remote_addr $time_iso8601 "$request" $status req_bytes=$request_length '
    "resp_bytes=$bytes_sent request_time=$request_time upstream_time=$upstream_response_time "
    "upstream_status=$upstream_status request_id=$request_id"
)

JSON_MSEC = ('{"ts":"$msec","req":"$request","status":"$status","bytes":"$bytes_sent",'
             '"rt":"$request_time","ut":"$upstream_response_time","us":"$upstream_status"}')


def json_lines() -> list[bytes]:
    """The ai_api fixture as a JSON log with $msec times, a few ms out of order."""
    rx = re.compile(rb'\S+ \S+ "([^"]*)" (\d+) req_bytes=\d+ resp_bytes=(\d+) '
                    rb"request_time=(\S+) upstream_time=(.+?) upstream_status=(.+?) request_id")
    out = []
    for i, line in enumerate((FIXTURES / "ai_api-sample.log").read_bytes().splitlines()):
        m = rx.match(line)
        assert m, line
        ms = 1796000000000 + i * 7 + (i * 7919) % 5
        out.append(b'{"ts":"%d.%03d","req":"%s","status":"%s","bytes":"%s","rt":"%s","ut":"%s",'
                   b'"us":"%s"}' % (ms // 1000, ms % 1000, *m.groups()))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        delay = {"/slow": SLOW_S, "/timeout": 3 * READ_TIMEOUT_S}.get(path, 0.0)
        code = 500 if path == "/fail" else 200
        if delay:
            time.sleep(delay)
        body = b'{"ok": true}\n' if code == 200 else b"upstream failure\n"
        with contextlib.suppress(OSError):
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        return None


@dataclass
class Nginx:
    dir: Path
    port: int
    conf: Path
    ai_log: Path
    combined_log: Path
    proc: subprocess.Popen[bytes]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_lines(self, want: int, timeout: float = 15.0) -> None:
        """Wait (bounded) until both logs hold ``want`` lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = [p.read_bytes().count(b"\n") if p.exists() else 0
                      for p in (self.ai_log, self.combined_log)]
            if min(counts) >= want:
                return
            time.sleep(0.1)
        raise AssertionError(f"nginx logged {counts} lines, expected {want}")


def write_conf(base: Path, port: int, up_port: int, dead_port: int) -> Path:
    user = f"user {getpass.getuser()};\n" if os.geteuid() == 0 else ""
    conf = base / "nginx.conf"
    (base / "logs").mkdir(exist_ok=True)
    (base / "conf.d").mkdir(exist_ok=True)
    # An included file: nginx -T must follow it; its access_log is commented out.
    (base / "conf.d" / "extra.conf").write_text(
        "# an extra server, included\n"
        "log_format jsonish escape=json '{\"status\":\"$status\",\"rt\":\"$request_time\"}';\n"
        f"server {{\n    listen 127.0.0.1:{free_port()};\n"
        "    # access_log /nonexistent.invalid/x.log;\n    access_log off;\n    return 204;\n}\n"
    )
    conf.write_text(f"""{user}worker_processes 1;
pid {base}/nginx.pid;
error_log {base}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {base}/tmp_body;
    proxy_temp_path {base}/tmp_proxy;
    fastcgi_temp_path {base}/tmp_fastcgi;
    uwsgi_temp_path {base}/tmp_uwsgi;
    scgi_temp_path {base}/tmp_scgi;
    log_format ai_api {AI_API};
    upstream app {{
        server 127.0.0.1:{dead_port} max_fails=0;
        server 127.0.0.1:{up_port} max_fails=0;
    }}
    include conf.d/*.conf;
    server {{
        listen 127.0.0.1:{port};
        access_log logs/ai_api.log ai_api;
        access_log {base}/logs/combined.log;
        proxy_connect_timeout 2s;
        proxy_read_timeout {READ_TIMEOUT_S}s;
        proxy_next_upstream error;
        location = /missing {{ return 404; }}
        location / {{ proxy_pass http://app; }}
    }}
}}
""")
    return conf


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default 5 drops SYNs under load: nginx would see timeouts


@pytest.fixture
def upstream() -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def nginx(tmp_path: Path, upstream: int) -> Iterator[Nginx]:
    base = tmp_path / "nginx"
    base.mkdir()
    port = free_port()
    conf = write_conf(base, port, upstream, free_port())
    log = (base / "stdout.log").open("wb")
    proc = subprocess.Popen(
        [NGINX, "-p", f"{base}/", "-c", str(conf), "-g", "daemon off;"],
        stdout=log, stderr=log,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited: {(base / 'stdout.log').read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("nginx did not listen within 10 s")
    yield Nginx(base, port, conf, base / "logs" / "ai_api.log", base / "logs" / "combined.log",
                proc)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
