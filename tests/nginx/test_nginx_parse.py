"""Parser and aggregates on recorded logs, against an exact computation; fuzzing."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfit.probes.nginx_agg import Aggregator
from inferfit.probes.nginx_conf import parse_masters, parse_nginx_t, tokenize
from inferfit.probes.nginx_format import COMBINED, LogFormat
from inferfit.probes.nginx_scan import aggregate_file
from inferfit.probes.nginx_values import (
    bucket,
    bucket_value,
    parse_when,
    parse_window,
    redact,
    route_of,
)

from .conftest import AI_API_TEXT, FIXTURES

AI_LOG = FIXTURES / "ai_api-sample.log"
COMBINED_LOG = FIXTURES / "combined-sample.log"
# What the client side saw in the recorded run (no response = nginx logged 499).
CLIENT_SAW = {"200": 3228, "404": 145, "500": 61, "504": 49, "499": 36}
AI_RE = re.compile(
    r'^(\S+) (\S+) "([^"]*)" (\d{3}) req_bytes=(\d+) resp_bytes=(\d+) request_time=(\S+) '
    r"upstream_time=(.+?) upstream_status=(.+?) request_id=(\S+)$"
)


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def exact(path: Path) -> dict[str, object]:
    """The same figures computed the slow, obvious way (a regex and sorted lists)."""
    rt, ut, nt, retries = [], [], [], 0
    status: dict[str, int] = {}
    per_sec: dict[str, int] = {}
    for line in path.read_text().splitlines():
        m = AI_RE.match(line)
        assert m, line
        status[m[4]] = status.get(m[4], 0) + 1
        per_sec[m[2]] = per_sec.get(m[2], 0) + 1
        rt.append(float(m[7]) * 1000)
        if m[8] != "-":
            parts = m[8].split(", ")
            retries += len(parts) - 1
            up = sum(float(p) * 1000 for p in parts if p != "-")
            ut.append(up)
            nt.append(max(float(m[7]) * 1000 - up, 0))
    return {"status": status, "rt": rt, "ut": ut, "nt": nt, "retries": retries,
            "qps_peak": max(per_sec.values()), "lines": len(rt)}


def close(a: float, b: float, rel: float = 0.01) -> bool:
    return abs(a - b) <= rel * max(abs(b), 1.0)


@pytest.mark.parametrize(("fmt", "path"), [(AI_API_TEXT, AI_LOG), (COMBINED, COMBINED_LOG)])
def test_fixture_counts_match_what_the_client_saw(fmt, path):
    got = aggregate_file(str(path), LogFormat(fmt), None)
    assert got["lines"] == 3519
    assert got["bad_lines"] == 0
    assert got["status_counts"]["by_code"] == CLIENT_SAW
    assert got["status_counts"]["by_class"] == {"2xx": 3228, "4xx": 181, "5xx": 110}


def test_fixture_percentiles_within_one_percent_of_exact():
    want = exact(AI_LOG)
    got = aggregate_file(str(AI_LOG), LogFormat(AI_API_TEXT), None)
    for p in (50, 95, 99):
        assert close(got[f"request_time_ms_p{p}"], nearest_rank(want["rt"], p)), p
        assert close(got[f"upstream_time_ms_p{p}"], nearest_rank(want["ut"], p)), p
    assert got["request_time_ms_max"] == max(want["rt"])
    assert close(got["nginx_time_ms_p95"], nearest_rank(want["nt"], 95))
    assert got["upstream_retries"] == want["retries"] == 142
    assert got["qps_peak"] == want["qps_peak"]
    assert got["window_s"] == 17  # 04:47:54 .. 04:48:10 inclusive
    assert close(got["qps_mean"], 3519 / 17)
    mean_rt_s = sum(want["rt"]) / len(want["rt"]) / 1000
    assert close(got["concurrency_littles_law"], 3519 / 17 * mean_rt_s)


def test_the_default_window_is_the_last_15_minutes_in_the_log(tmp_path):
    lines = AI_LOG.read_bytes().splitlines()
    old = [ln.replace(b"2026-11-30T04:", b"2026-11-30T03:") for ln in lines[:500]]
    log = tmp_path / "a.log"
    log.write_bytes(b"\n".join(old + lines) + b"\n")
    got = aggregate_file(str(log), LogFormat(AI_API_TEXT), 900)
    assert got["lines"] == 3519  # the hour-old lines fall outside
    since = aggregate_file(str(log), LogFormat(AI_API_TEXT), None, since=0)
    assert since["lines"] == 4019


def test_histogram_relative_error_is_under_half_a_percent():
    for v in [*range(0, 300), *range(300, 10**7, 997)]:
        assert abs(bucket_value(bucket(v)) - v) <= 0.004 * max(v, 1)


def test_retry_lists_escapes_and_non_utf8():
    lf = LogFormat(AI_API_TEXT)
    agg = Aggregator(lf)
    line = (b'127.0.0.1 2026-11-30T04:47:54+00:00 "GET /a\\x22b\xff\xfe HTTP/1.1" 200 '
            b"req_bytes=1 resp_bytes=10 request_time=0.200 upstream_time=0.000, 0.050, 0.100 "
            b"upstream_status=502, 502, 200 request_id=x")
    agg.feed(line)
    got = agg.result()
    assert got["lines"] == 1
    assert got["bad_lines"] == 0
    assert got["upstream_retries"] == 2
    assert got["upstream_errors"] == 2
    assert got["upstream_time_ms_max"] == 150.0  # summed over attempts
    assert got["status_counts"]["by_code"] == {"200": 1}


def test_dash_means_no_value_and_499_has_no_upstream_status():
    agg = Aggregator(LogFormat(AI_API_TEXT))
    agg.feed(b'127.0.0.1 2026-11-30T04:47:55+00:00 "POST /v1/chat HTTP/1.1" 499 req_bytes=1 '
             b"resp_bytes=0 request_time=0.032 upstream_time=- upstream_status=- request_id=-")
    got = agg.result()
    assert got["status_counts"]["by_code"] == {"499": 1}
    assert "upstream_time_ms_p50" not in got
    assert got["upstream_retries"] == 0


def test_fast_and_line_paths_agree_on_every_fixture_line():
    for fmt, path in ((AI_API_TEXT, AI_LOG), (COMBINED, COMBINED_LOG)):
        lf = LogFormat(fmt)
        assert lf.fast
        data = path.read_bytes().rstrip(b"\n")
        data = data.replace(b", ", b",") if lf.fold else data
        lines = data.split(b"\n")
        cols = lf.parse_chunk(data, len(lines))
        assert cols is not None
        for i in range(0, len(lines), 97):
            vals = lf.parse_line(lines[i])
            assert vals is not None
            for name, v in zip(lf.needed, vals, strict=True):
                raw = lf.strip(name, cols[name][i])
                if name == "time_local":
                    assert v == raw + b" " + cols["_tz"]
                else:
                    assert v == raw, (name, i)


def test_one_bad_line_in_a_big_chunk_is_counted_and_redacted():
    lines = AI_LOG.read_bytes().splitlines()
    bad = b"10.1.2.3 garbage GET /secret?token=abc " + b"x" * 500
    agg = Aggregator(LogFormat(AI_API_TEXT))
    agg.feed(b"\n".join([*lines[:2000], bad, *lines[2000:]]))
    got = agg.result()
    assert got["lines"] == 3519
    assert got["bad_lines"] == 1
    sample = got["bad_line_samples"][0]
    assert "10.1.2.3" not in sample
    assert "token=abc" not in sample
    masked = redact(b"fe80::1 at 04:47:54 from 2001:db8:0:0:1:2:3:4")
    assert masked == "x.x.x.x at 04:47:54 from x.x.x.x"
    assert len(sample) <= 121


def test_json_escape_and_custom_formats():
    lf = LogFormat('{"t":"$msec","s":"$status","u":"$request_uri","rt":"$request_time"}', "json")
    agg = Aggregator(lf)
    agg.feed(b'{"t":"1796014074.120","s":"200","u":"/v1/x?q=\\"1\\"","rt":"0.010"}\n'
             b'{"t":"1796014075.500","s":"503","u":"/v1/files/12345","rt":"1.500"}')
    got = agg.result()
    assert got["bad_lines"] == 0
    assert got["status_counts"]["by_code"] == {"200": 1, "503": 1}
    assert got["request_time_ms_max"] == 1500.0
    assert {r["route"] for r in got["routes"]} == {"/v1/x", "/v1/files/{id}"}


def test_routes_drop_queries_and_fold_ids():
    assert route_of(b"GET /v1/files/123?key=secret HTTP/1.1") == "GET /v1/files/{id}"
    assert route_of(b"GET /u/550e8400-e29b-41d4-a716-446655440000/x HTTP/1.1") == "GET /u/{id}/x"
    assert route_of(b"\\x16\\x03\\x01") == "(invalid request)"
    assert route_of(b"GET http://127.0.0.1/a/b HTTP/1.1") == "GET /a/b"


def test_nginx_t_parser_handles_comments_multiline_escape_and_tabs():
    dump = (
        "# configuration file /etc/nginx/nginx.conf:\n"
        "http {\n"
        "  log_format  main  '$remote_addr \"$request\" '\n"
        "\t\t'$status $request_time';  # trailing comment\n"
        "  log_format j escape=json '{\"s\":\"$status\"}';\n"
        "  #access_log /var/log/nginx/commented.log main;\n"
        "  access_log /var/log/nginx/access.log main buffer=32k flush=5s;\n"
        "  include /etc/nginx/sites-enabled/*;\n"
        "}\n"
        "# configuration file /etc/nginx/sites-enabled/default:\n"
        "server { access_log logs/site.log; access_log syslog:server=unix:/dev/log j;"
        " location / { access_log off; } }\n"
    )
    conf = parse_nginx_t(dump, "/usr/share/nginx/")
    assert conf.formats["main"].text == '$remote_addr "$request" $status $request_time'
    assert conf.formats["j"].escape == "json"
    paths = {a.path: a.format for a in conf.readable_logs()}
    assert paths == {"/var/log/nginx/access.log": "main", "/usr/share/nginx/logs/site.log":
                     "combined"}
    assert conf.off
    assert conf.files == ["/etc/nginx/nginx.conf", "/etc/nginx/sites-enabled/default"]
    assert tokenize("a 'b\\'c' \"d\";") == [("a", False), ("b'c", True), ("d", True), (";", False)]
    masters = parse_masters(["nginx: master process /usr/sbin/nginx -c /etc/x.conf -g 'daemon on;'",
                             "nginx: worker process"])
    assert [(m.binary, m.conf) for m in masters] == [("/usr/sbin/nginx", "/etc/x.conf")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20))
def test_fuzz_random_bytes_never_crash(chunks):
    for fmt in (AI_API_TEXT, COMBINED):
        agg = Aggregator(LogFormat(fmt))
        lines = [c.replace(b"\n", b" ") for c in chunks]
        agg.feed(b"\n".join(lines))
        got = agg.result()
        assert got["lines"] + got["bad_lines"] == len(lines)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=3519))
def test_fuzz_truncated_lines_are_bad_not_fatal(cut, which):
    lines = AI_LOG.read_bytes().splitlines()
    line = lines[which % len(lines)]
    truncated = line[: min(cut, len(line) - 1)]
    agg = Aggregator(LogFormat(AI_API_TEXT))
    agg.feed(b"\n".join([*lines[:50], truncated, *lines[50:100]]))
    got = agg.result()
    assert got["lines"] + got["bad_lines"] == 101
    assert got["lines"] >= 100


def test_huge_lines_are_counted_bad(tmp_path):
    lines = AI_LOG.read_bytes().splitlines()
    log = tmp_path / "huge.log"
    log.write_bytes(b"\n".join([*lines[:10], b"A" * (3 << 20), b"x" * 70000, *lines[10:20]])
                    + b"\n")
    got = aggregate_file(str(log), LogFormat(AI_API_TEXT), None)
    assert got["lines"] == 20
    assert got["bad_lines"] == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_fast_path_agrees_with_line_by_line(data):
    """Mutated fixture lines: the chunked fast path and the reference give the same figures."""
    for fmt, path in ((AI_API_TEXT, AI_LOG), (COMBINED, COMBINED_LOG)):
        lines = path.read_bytes().splitlines()[:200]
        for _ in range(data.draw(st.integers(0, 4))):
            i = data.draw(st.integers(0, len(lines) - 1))
            line = lines[i]
            pos = data.draw(st.integers(0, len(line) - 1))
            byte = data.draw(st.sampled_from([b" ", b'"', b"-", b"x", b"9", b",", b"\xff", b""]))
            lines[i] = line[:pos] + byte + line[pos + 1:]
        block = b"\n".join(lines)
        fast, slow = Aggregator(LogFormat(fmt)), Aggregator(LogFormat(fmt))
        fast.feed(block)
        slow._slow(block.replace(b", ", b",") if slow.fold else block)
        a, b = fast.result(), slow.result()
        for key in ("lines", "bad_lines", "status_counts", "request_time_ms_p99",
                    "upstream_retries", "qps_peak", "bandwidth_mbit_peak", "routes"):
            assert a.get(key) == b.get(key), key


def test_since_until_and_local_time_windows(tmp_path):
    lf = LogFormat(COMBINED)
    # 04:47:54 .. 04:48:10 in the fixture; keep 04:48:00 <= t < 04:48:05
    got = aggregate_file(str(COMBINED_LOG), lf, None, since=parse_when("2026-11-30T04:48:00Z"),
                         until=parse_when("2026-11-30T04:48:05+00:00"))
    want = sum(1 for line in COMBINED_LOG.read_text().splitlines()
               if "04:48:00" <= line.split("[", 1)[1][12:20] < "04:48:05")
    assert got["lines"] == want > 0
    assert got["window_s"] == 5
    assert got["lines_outside_window"] == 3519 - want
    assert parse_window("1h") == 3600
    assert parse_window("all") is None
    with pytest.raises(ValueError, match="window"):
        parse_window("soon")


def test_empty_and_all_bad_logs(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    got = aggregate_file(str(empty), LogFormat(COMBINED), 900)
    assert got["lines"] == 0
    assert got["bad_lines"] == 0
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"not a log line\n" * 10 + b"\n")
    got = aggregate_file(str(junk), LogFormat(COMBINED), 900)
    assert got["lines"] == 0
    assert got["bad_lines"] == 11


def test_no_access_log_directive_means_the_compiled_in_default():
    conf = parse_nginx_t("# configuration file /etc/nginx/nginx.conf:\nhttp { server { } }\n")
    conf.default_log = "/var/log/nginx/access.log"
    assert [(a.path, a.format) for a in conf.readable_logs()] == [
        ("/var/log/nginx/access.log", "combined")]
    conf.off = True
    assert conf.readable_logs() == []
