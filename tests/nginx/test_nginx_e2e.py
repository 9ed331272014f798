"""The probe against a real nginx, through the real sshd and the real CLI."""

from __future__ import annotations

import json
import subprocess
import tomllib
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from inferfit.probes.nginx_conf import parse_masters, parse_nginx_t

from .conftest import AI_API_TEXT, NGINX, READ_TIMEOUT_S, Nginx

# (path, client timeout, status nginx logs). /slow with a 0.5 s client timeout: 499.
PLAN = (
    [("/ok", 10.0, 200)] * 40
    + [("/v1/chat?user=secret-token", 10.0, 200)] * 3
    + [("/fail", 10.0, 500)] * 8
    + [("/missing", 10.0, 404)] * 6
    + [("/timeout", 10.0, 504)] * 3
    + [("/slow", 0.5, 499)] * 3
)


def _get(url: str, timeout: float) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (TimeoutError, urllib.error.URLError):
        return 0  # the client gave up: nginx logs 499


def send_load(ng: Nginx) -> Counter[str]:
    with ThreadPoolExecutor(8) as pool:
        seen = list(pool.map(lambda p: _get(ng.url(p[0]), p[1]), PLAN))
    expected = Counter(str(code) for _, _, code in PLAN)
    client = Counter(str(c) for c in seen)
    assert client == Counter({k if k != "499" else "0": v for k, v in expected.items()})
    ng.wait_lines(len(PLAN))
    return expected


def _config(tmp_path: Path, **keys: str) -> Path:
    cfg = tmp_path / "nginx.toml"
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items())
    # a loaded CI machine can make each SSH exec slow: give the probe room
    cfg.write_text(f"[check]\nprobe_timeout_s = 600.0\n\n[probes.nginx]\n{body}\n")
    return cfg


def test_counts_match_what_was_sent_through_sshd(nginx, sshd, inferfit_cli, tmp_path):
    expected = send_load(nginx)
    for log, fmt in ((nginx.ai_log, "ai_api"), (nginx.combined_log, "combined")):
        cfg = _config(tmp_path, log_path=str(log), window="all")
        out = tmp_path / f"{fmt}.toml"
        r = inferfit_cli("check", "--probe", "nginx", "--config", str(cfg), "--export",
                         str(out), *sshd.cli())
        assert r.returncode in (0, 1, 2), r.stderr
        text = out.read_text()
        ng = tomllib.loads(text)["probes"]["nginx"]
        assert ng["log_format_name"] == fmt  # found by nginx -T for this path
        assert ng["lines"] == len(PLAN)
        assert ng["bad_lines"] == 0
        for code, count in expected.items():
            assert ng["status_counts"][code] == count, (code, ng["status_counts"])
        assert ng["status_counts"]["5xx"] == expected["500"] + expected["504"]
        assert ng["aggregated_on"] == "box"
        assert 0 < ng["bytes_transferred"] < 200_000
        # privacy: no query strings, no client addresses
        assert "secret-token" not in text
        assert "127.0.0.1" not in text
        if fmt == "ai_api":
            assert ng["upstream_retries"] >= 1  # the dead first server: "502, 200"
            assert ng["request_time_ms_max"] >= READ_TIMEOUT_S * 1000  # proxy_read_timeout
            assert ng["upstream_time_ms_p99"] >= READ_TIMEOUT_S * 900
            routes = {r["route"]: r for r in ng["routes"]}
            assert routes["GET /fail"]["status_5xx"] == 8
            assert "GET /v1/chat" in routes


def test_nginx_t_discovery_finds_both_logs_and_formats(nginx):
    done = subprocess.run([NGINX, "-T", "-p", f"{nginx.dir}/", "-c", str(nginx.conf)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    conf = parse_nginx_t(done.stdout, f"{nginx.dir}/")
    logs = {a.path: a.format for a in conf.readable_logs()}
    assert logs == {str(nginx.ai_log): "ai_api", str(nginx.combined_log): "combined"}
    assert conf.formats["ai_api"].text == AI_API_TEXT
    assert conf.formats["jsonish"].escape == "json"
    assert conf.off  # the included server's `access_log off;`
    assert any(f.endswith("extra.conf") for f in conf.files)
    ps = subprocess.run(["ps", "-ww", "-eo", "args="], capture_output=True, text=True).stdout
    masters = parse_masters(ps.splitlines())
    assert any(m.conf == str(nginx.conf) for m in masters), (masters, ps)


def test_probe_discovers_the_running_nginx(nginx, sshd, inferfit_cli, tmp_path):
    send_load(nginx)
    out = tmp_path / "f.json"
    cfg = _config(tmp_path, window="all")
    r = inferfit_cli("check", "--probe", "nginx", "--config", str(cfg), "--export", str(out),
                     *sshd.cli())
    assert r.returncode in (0, 1, 2), r.stderr
    ng = json.loads(out.read_text())["probes"]["nginx"]
    paths = {a["path"] for a in ng["access_logs"]}
    assert {str(nginx.ai_log), str(nginx.combined_log)} <= paths
    assert ng["lines"] >= len(PLAN)
