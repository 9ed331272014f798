"""The C scanner (``_nginx_native``) gives exactly the pure-Python path's figures.

Both paths aggregate the same bytes side by side: recorded logs, mutated and
generated lines (odd values, affixes, every time variable), windows, worker
ranges, full value tables, memory-mapped reading. The C readings of times and
routes are held against ``epoch`` and ``route_of`` value by value.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.hosts.local import LocalHost
from inferfit.probes import nginx_native, nginx_scan
from inferfit.probes.nginx import NginxProbe
from inferfit.probes.nginx_agg import Aggregator
from inferfit.probes.nginx_format import COMBINED, LogFormat
from inferfit.probes.nginx_scan import aggregate_file, aggregate_stream
from inferfit.probes.nginx_values import BadChunk, epoch, route_of

from .conftest import AI_API_TEXT, FIXTURES, JSON_MSEC, json_lines

native_mod: Any = nginx_native._nginx_native
AI_LOG = FIXTURES / "ai_api-sample.log"
COMBINED_LOG = FIXTURES / "combined-sample.log"
# affixes on every kept value, method and uri apart, $time_local, a literal-only quoted part
ODD = ('[$time_local] m=$request_method u="$request_uri" "lit" s=$status b=<$body_bytes_sent> '
       'rt=$request_time ut=$upstream_response_time us=$upstream_status x="$http_user_agent"')
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_c_scanner_is_built_here():
    assert nginx_native.available(), (
        "inferfit.probes._nginx_native is not built: scripts/setup.sh installs gcc and builds it")


def _both(fmt: str, blocks: list[bytes], escape: str = "default", since: int | None = None,
          until: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    lf = LogFormat(fmt, escape)
    c, py = Aggregator(lf, since, until, nginx_native.feeder), Aggregator(lf, since, until)
    assert c.native_stream is not None, "the format should take the C path"
    for block in blocks:
        c.feed(block)
        py.feed(block)
    return c.result(), py.result()


@pytest.mark.parametrize("window", [None, 900, 60])
@pytest.mark.parametrize(("fmt", "path"), [(AI_API_TEXT, AI_LOG), (COMBINED, COMBINED_LOG)])
def test_recorded_logs_give_the_same_figures(fmt, path, window):
    lf = LogFormat(fmt)
    c = aggregate_file(str(path), lf, window, workers=1, native=nginx_native.feeder)
    py = aggregate_file(str(path), lf, window, workers=1)
    assert (c.pop("parser"), py.pop("parser")) == ("c", "python")
    assert c == py
    assert c["lines"] > 0
    assert c["bad_lines"] == 0


def test_json_msec_log_and_a_since_until_window_give_the_same_figures():
    lines = json_lines()
    blocks = [b"\n".join(lines[:1000]), b"\n".join(lines[1000:])]
    c, py = _both(JSON_MSEC, blocks, "json", since=1796000005, until=1796000020)
    assert c == py
    assert c["lines_outside_window"] > 0
    assert c["lines"] > 1000


def _mutate(data: st.DataObject, lines: list[bytes]) -> list[bytes]:
    for _ in range(data.draw(st.integers(0, 6))):
        i = data.draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        pos = data.draw(st.integers(0, len(line)))
        byte = data.draw(st.sampled_from(
            [b" ", b'"', b"-", b"x", b"9", b",", b", ", b"\xff", b"", b"\x01", b"\t", b"?"]))
        lines[i] = line[:pos] + byte + line[pos + 1:]
    if data.draw(st.booleans()):
        lines.insert(data.draw(st.integers(0, len(lines))), data.draw(st.binary(max_size=80)))
    return lines


@FUZZ
@given(st.data())
def test_mutated_recorded_lines_give_the_same_figures(data):
    for fmt, path, escape in ((AI_API_TEXT, AI_LOG, "default"), (COMBINED, COMBINED_LOG, "default"),
                              (JSON_MSEC, None, "json")):
        source = json_lines() if path is None else path.read_bytes().splitlines()
        start = data.draw(st.integers(0, len(source) - 150))
        lines = _mutate(data, source[start:start + 150])
        cut = data.draw(st.integers(1, len(lines) - 1))
        blocks = [b"\n".join(lines[:cut]), b"\n".join(lines[cut:])]
        c, py = _both(fmt, blocks, escape)
        assert c == py, fmt


def _mostly(good: list[str], odd: list[str]) -> st.SearchStrategy[str]:
    """A good value about 9 times in 10: most lines must be good for the C path to matter."""
    return st.sampled_from(good * (9 * len(odd) // len(good) + 1) + odd)


STATUS = _mostly(["200", "404", "502", "499"], ["-", "2000", "20", "abc", "", "2 0"])
TIME = _mostly(["0.000", "0.028", "1.5", "12", "-", "0.000, 0.079", "0.1,0.2", "99999.999"],
               ["1e3", "", ".5", "12.3456", "0.00x", "-, 0.004"])
UPSTATUS = _mostly(["200", "-", "502, 200", "502,200"], ["20", "abc", "-, 200", ""])
BYTES = _mostly(["0", "007", "512"], ["18446744073709551616000", "-", "12a", "", "+5"])
METHOD = st.sampled_from(["GET", "POST", "get", "", "M-SEARCH", "G\xc3\xa9T"])
URI = st.sampled_from([
    "/v1/chat/completions", "/v1/files/123", "/v1/files/file-0123456789abcdef", "/a?b=1#c",
    "/deadbeef/x1", "/caf\xc3\xa9/42", "http://h.example/x/9", "", "/", "/x//y/", "/%20a",
    "/" + "s" * 130 + "/7", "/a b", "/v1/models"])
LOCAL = _mostly(["30/Nov/2026:04:47:54 +0000", "30/Nov/2026:04:47:55 +0130",
                 "31/Feb/2026:25:61:61 -0800"],
                ["30/nov/2026:04:47:54 +0000", "30/Nov/0000:04:47:54 +0000",
                 "3O/Nov/2026:04:47:54 +0000", "30/Nov/2026:04:47:54 0000",
                 "30/Nov/2026:04:47:54 +00000"])
AGENT = st.sampled_from(["curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64, like Gecko)", "-", ""])


DAMAGE = _mostly([""], [">", "<", "s=", "[", "]", '"', " ", "m=", "rt="])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(LOCAL, METHOD, URI, STATUS, BYTES, TIME, TIME, UPSTATUS, AGENT, DAMAGE),
                min_size=1, max_size=60), st.integers(0, 3))
def test_generated_odd_values_give_the_same_figures(rows, cuts):
    lines = []
    for t, m, u, s, b, rt, ut, us, a, damage in rows:
        line = f'[{t}] m={m} u="{u}" "lit" s={s} b=<{b}> rt={rt} ut={ut} us={us} x="{a}"'
        lines.append(line.replace(damage, "", 1).encode("latin-1") if damage else
                     line.encode("latin-1"))
    step = max(1, len(lines) // (cuts + 1))
    blocks = [b"\n".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    c, py = _both(ODD, blocks)
    assert c == py


ISO = st.datetimes(min_value=dt.datetime(1960, 1, 1), max_value=dt.datetime(9999, 12, 31))


@FUZZ
@given(ISO, st.integers(-23 * 60 - 59, 23 * 60 + 59), st.booleans())
def test_the_scanner_reads_times_exactly_as_python(when, offset_min, zulu):
    when = when.replace(microsecond=0)
    sign = "+" if offset_min >= 0 else "-"
    zone = f"{sign}{abs(offset_min) // 60:02d}:{abs(offset_min) % 60:02d}"
    iso = when.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if zulu else zone)
    local = when.strftime("%d/%b/%Y:%H:%M:%S")
    cases = [(2, iso.encode(), None, "time_iso8601"),
             (3, local.encode(), zone.replace(":", "").encode(), "time_local"),
             (1, str(abs(offset_min) * 86400 + when.second).encode(), None, "msec")]
    for kind, value, tz, var in cases:
        got = native_mod.epoch(kind, value, tz)
        if got is not None:  # whatever the scanner reads, it reads as Python does
            assert got == epoch(var, value, tz), (var, value, tz)
    if 1970 <= when.year < 9999:
        assert native_mod.epoch(2, iso.encode()) is not None, iso


@pytest.mark.parametrize(("kind", "value", "tz"), [
    (2, b"2000-02-29T12:00:00+00:00", None), (2, b"2100-02-29T12:00:00+00:00", None),
    (2, b"1900-02-29T00:00:00Z", None), (2, b"2024-02-29T23:59:59-23:59", None),
    (2, b"2026-04-31T00:00:00+00:00", None), (2, b"2026-11-30T24:00:00+00:00", None),
    (2, b"2026-11-30T04:47:54+24:00", None), (2, b"2026-11-30 04:47:54+00:00", None),
    (2, b"1970-01-01T00:00:00Z", None), (2, b"1969-12-31T23:59:59Z", None),
    (2, b"2026-11-30T04:47:54.5+00:00", None), (2, b"2026-11-30T04:47:54", None),
    (3, b"29/Feb/2100:00:00:00", b"+0000"), (3, b"99/Dec/2026:99:99:99", b"-2359"),
    (3, b"30/Nov/2026:04:47:54", b"+9999"), (3, b"30/Nov/0000:00:00:00", b"+0000"),
    (3, b"30/Nov/2026:04:47:54", b"Z0000"), (1, b"1796014074", None), (1, b"", None),
    (1, b"0", None), (1, b"1" * 19, None), (1, b"9" * 20, None), (1, b"17960x4074", None)])
def test_edge_times_are_read_as_python_reads_them_or_left_to_it(kind, value, tz):
    var = {1: "msec", 2: "time_iso8601", 3: "time_local"}[kind]
    got = native_mod.epoch(kind, value, tz)
    try:
        want = epoch(var, value, tz)
    except BadChunk:
        want = None
    assert got is None or got == want, (value, got, want)


@FUZZ
@given(st.sampled_from([1, 2, 3]), st.binary(max_size=30), st.binary(max_size=6))
def test_times_the_scanner_reads_from_noise_are_pythons_too(kind, value, tz):
    var = {1: "msec", 2: "time_iso8601", 3: "time_local"}[kind]
    got = native_mod.epoch(kind, value, tz)
    if got is not None:
        assert got == epoch(var, value, tz)


@FUZZ
@given(st.lists(st.sampled_from(["GET", "POST", " ", "/", "v1", "123", "deadbeef", "?", "#",
                                 "a=1", "HTTP/1.1", "://", "x" * 20 + "9", "-", "\xe9", "\t",
                                 "0123456789abcdef0123456789abcdef"]), max_size=12))
def test_the_scanner_names_routes_exactly_as_python(parts):
    _same_route("".join(parts).encode())


@pytest.mark.parametrize("request_line", [
    "GET /v1/deadbeef/1 HTTP/1.1", "GET /api/deadbeef HTTP/1.1", "GET /v1/DEADBEEF7 HTTP/1.1",
    "GET /0123456789abcdef0123456789abcdef-abc/1 HTTP/1.1", "GET /" + "a-" * 17 + "/1 HTTP/1.1",
    "GET /tok_en.with~chars=+9abcdefgh HTTP/1.1", "GET /short9 HTTP/1.1", "GET / HTTP/1.1",
    "GET ?q=1 HTTP/1.1", "GET #frag HTTP/1.1", "PATCH /" + "seg/" * 40 + "9 HTTP/1.1",
    "VERYLONGMETHODNAME /x HTTP/1.1", "GET /a//b/ HTTP/1.1", "GET /12/34 HTTP/2.0",
    "GET /x HTTP/1.1 extra", "get /x HTTP/1.1", "GET /x", " /x HTTP/1.1", "G3T /x HTTP/1.1",
    "GET http://host/x/1 HTTP/1.1", "GET /a:b//c/1 HTTP/1.1", "GET /" + "9" * 120 + " HTTP/1.1"])
def test_edge_routes_are_named_as_python_names_them(request_line):
    _same_route(request_line.encode())


def _same_route(request: bytes) -> None:
    got = native_mod.route(request)
    if got is not None:
        assert got == route_of(request)
    if re.fullmatch(rb"[A-Z]+ [!-~]* HTTP/1\.1", request) and b"://" not in request:
        assert got is not None


def test_past_500_routes_new_ones_are_other_as_in_python():
    lines = AI_LOG.read_bytes().splitlines()[:1400]
    # 700 routes no id folding touches (letters only), then a known one again
    for i, name in enumerate(f"r{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}x" for i in range(700)):
        lines[i * 2] = re.sub(rb'"POST [^ ]+', b'"POST /' + name.encode(), lines[i * 2], count=1)
    blocks = [b"\n".join(lines[i:i + 100]) for i in range(0, len(lines), 100)]
    c, py = _both(AI_API_TEXT, blocks)
    assert c == py
    assert c["routes_seen"] == 501  # 500 named, the rest "(other)"
    assert any(r["route"] == "(other)" for r in c["routes"])


def test_full_value_tables_are_emptied_without_changing_the_figures(monkeypatch):
    resets = []
    real = nginx_native.NativeFeed.reset

    def counting(self: nginx_native.NativeFeed) -> None:
        resets.append(1)
        real(self)

    monkeypatch.setattr(nginx_native, "TABLE_CAP", 300)
    monkeypatch.setattr(nginx_native.NativeFeed, "reset", counting)
    monkeypatch.setattr(Aggregator, "FLUSH_KEYS", 500)
    lines = AI_LOG.read_bytes().splitlines()
    # a unique id in every other path: the raw-request cache fills and is emptied alone
    lines = [re.sub(rb'"(GET|POST) /[^ ?]*', rb'"\1 /v1/files/%d' % i, ln, count=1) if i % 2 else ln
             for i, ln in enumerate(lines)]
    blocks = [b"\n".join(lines[i:i + 200]) for i in range(0, len(lines), 200)]
    c, py = _both(AI_API_TEXT, blocks)
    assert resets, "300 distinct values per table should have filled one"
    assert c == py
    assert any(r["route"].endswith("/v1/files/{id}") for r in c["routes"])


def _odd_file(tmp_path: Path) -> Path:
    lines = AI_LOG.read_bytes().splitlines()
    lines[10] = b""  # an empty line
    lines[20] = b"x" * 5000  # longer than max_line below
    lines[30] = lines[30] + b" " + b"y" * 3000  # long, but a line
    path = tmp_path / "odd.log"
    path.write_bytes(b"\n".join(lines[:400]))  # no newline at the end
    return path


@pytest.mark.parametrize(("start", "end"), [(0, None), (1, None), (7000, 50000), (0, 3),
                                             (5000, None), (40000, 40001)])
def test_reading_a_memory_map_is_reading_the_file(tmp_path, monkeypatch, start, end):
    monkeypatch.setattr(nginx_scan, "MAX_LINE", 4096)
    monkeypatch.setattr(nginx_scan, "CHUNK_BYTES", 1024)
    path = _odd_file(tmp_path)
    lf = LogFormat(AI_API_TEXT)
    c, py = Aggregator(lf, native=nginx_native.feeder), Aggregator(lf)
    with path.open("rb") as fh:
        aggregate_stream(fh, c, start, end)
    with path.open("rb") as fh:
        aggregate_stream(fh, py, start, end)
    assert c.result() == py.result()


def test_an_empty_file_and_a_fifo_fall_back_cleanly(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    lf = LogFormat(AI_API_TEXT)
    agg = Aggregator(lf, native=nginx_native.feeder)
    with empty.open("rb") as fh:  # nothing to map: read as a stream instead
        assert aggregate_stream(fh, agg) == 0
    assert agg.result()["lines"] == 0


def test_parallel_workers_with_the_scanner_equal_one_python_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(nginx_scan, "PARALLEL_MIN_BYTES", 64 << 10)
    path = tmp_path / "access.log"
    path.write_bytes(AI_LOG.read_bytes() * 2)
    lf = LogFormat(AI_API_TEXT)
    c = aggregate_file(str(path), lf, None, workers=2, native=nginx_native.feeder)
    py = aggregate_file(str(path), lf, None, workers=1)
    assert c.pop("workers") == 2
    py.pop("workers")
    c.pop("bytes_scanned")
    py.pop("bytes_scanned")
    assert (c.pop("parser"), py.pop("parser")) == ("c", "python")
    assert c == py


def test_bad_values_go_to_the_reference_parser_and_are_counted():
    lines = AI_LOG.read_bytes().splitlines()[:300]
    lines[3] = lines[3].replace(b'" 200 ', b'" 2x0 ', 1)  # shape fine, status bad
    lines[7] = lines[7].replace(b"resp_bytes=", b"resp_bytes=-", 1)
    lines[9] = re.sub(rb"resp_bytes=\d+", b"resp_bytes=18446744073709551616000", lines[9])
    c, py = _both(AI_API_TEXT, [b"\n".join(lines)])
    assert c == py
    assert c["response_bytes_mean"] > 1e19  # a count past 64 bits is Python's to add
    assert c["bad_lines"] >= 1
    assert any("2x0" in s for s in c["bad_line_samples"])


async def test_the_local_probe_uses_the_scanner_and_agrees_with_the_box_script(monkeypatch):
    opts = {"log_path": str(AI_LOG), "log_format": AI_API_TEXT, "window": "all"}
    ctx = ProbeContext(options=opts, config=Config())
    c = (await NginxProbe().check(LocalHost(), ctx)).values
    monkeypatch.setenv("INFERFIT_NGINX_NATIVE", "0")
    py = (await NginxProbe().check(LocalHost(), ctx)).values
    assert (c["parser"], c["aggregated_on"]) == ("c", "locally")
    assert (py["parser"], py["aggregated_on"]) == ("python", "box")
    for key in ("parser", "aggregated_on", "bytes_transferred", "bytes_scanned"):
        c.pop(key, None)
        py.pop(key, None)
    assert c == py
    assert c["lines"] == 3519


async def test_an_unreadable_local_log_is_an_error_not_a_crash(tmp_path):
    log = tmp_path / "secret.log"
    log.write_bytes(AI_LOG.read_bytes()[:2000])
    log.chmod(0)
    ctx = ProbeContext(options={"log_path": str(log), "log_format": AI_API_TEXT}, config=Config())
    if _readable(log):  # root reads anything: make it a directory instead
        log.chmod(0o644)
        log.unlink()
        log.mkdir()
    result = await NginxProbe().check(LocalHost(), ctx)
    assert result.status == "error"
    assert result.error_kind in ("permission_denied", "unreadable", "not_found")


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
    except OSError:
        return False
    return True


def test_a_format_the_scanner_cannot_cut_stays_on_python():
    lf = LogFormat('$remote_addr $request $status')  # free text outside quotes: no plan
    assert nginx_native.feeder(Aggregator(lf)) is None
    with pytest.raises(BadChunk):
        epoch("msec", b"x", None)


def test_times_past_64_bits_are_left_to_python():
    lines = json_lines()[:50]
    lines[7] = re.sub(rb'"ts":"\d+\.\d+"', b'"ts":"' + b"9" * 25 + b'.000"', lines[7])
    lines[9] = re.sub(rb'"ts":"\d+\.\d+"', b'"ts":"' + b"9" * 25 + b'"', lines[9])
    c, py = _both(JSON_MSEC, [b"\n".join(lines)], "json")
    assert c == py
    assert c["lines"] == 50


def test_what_the_scanner_cannot_hold_stays_on_python():
    lf = LogFormat(AI_API_TEXT)
    assert nginx_native.feeder(Aggregator(lf, since=-(1 << 70))) is None  # bound past 64 bits
    many = " ".join(f"k{i}=$status" for i in range(300))  # more tokens than the scanner cuts
    assert nginx_native.feeder(Aggregator(LogFormat(f'"$request" {many}'))) is None
    assert not nginx_native.can_cut(LogFormat(f'"$request" {many}'))  # the box script reads it
    assert nginx_native.feeder(Aggregator(lf)) is not None


async def test_a_local_log_the_scanner_cannot_cut_goes_to_the_box_script(tmp_path):
    fmt = "$remote_addr $status $request"  # free text outside quotes: no plan
    log = tmp_path / "plain.log"
    log.write_bytes(b"127.0.0.1 200 GET /v1/models HTTP/1.1\n" * 40)
    ctx = ProbeContext(options={"log_path": str(log), "log_format": fmt, "window": "all"},
                       config=Config())
    values = (await NginxProbe().check(LocalHost(), ctx)).values
    assert (values["parser"], values["aggregated_on"]) == ("python", "box")
    assert values["status_counts"]["200"] == 40
