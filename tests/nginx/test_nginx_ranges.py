"""Reading a log by byte ranges: windows that start mid-file, and parallel workers."""

from __future__ import annotations

import os
import random
import re
import time

import pytest

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.hosts.ssh import SSHOptions
from inferfit.probes import nginx_agg, nginx_scan
from inferfit.probes.nginx import NginxProbe
from inferfit.probes.nginx_agg import Aggregator
from inferfit.probes.nginx_format import COMBINED, LogFormat
from inferfit.probes.nginx_scan import aggregate_file

from .conftest import AI_API_TEXT, FIXTURES, JSON_MSEC, json_lines
from .test_nginx_probe import _NoPython

AI_LOG = FIXTURES / "ai_api-sample.log"
COMBINED_LOG = FIXTURES / "combined-sample.log"


def _hour_older(lines: list[bytes]) -> list[bytes]:
    return [ln.replace(b"2026-11-30T04:", b"2026-11-30T03:").replace(b"2026:04:", b"2026:03:")
            for ln in lines]


@pytest.mark.parametrize(("fmt", "path"), [(AI_API_TEXT, AI_LOG), (COMBINED, COMBINED_LOG)])
def test_a_window_that_starts_mid_file_has_no_bad_first_line(tmp_path, fmt, path):
    lines = path.read_bytes().splitlines()
    log = tmp_path / "a.log"
    log.write_bytes(b"\n".join(_hour_older(lines) * 3 + lines) + b"\n")
    got = aggregate_file(str(log), LogFormat(fmt), 900)
    assert 0 < got["bytes_scanned"] < log.stat().st_size  # it did seek into the file
    assert got["lines"] == 3519
    assert got["bad_lines"] == 0
    assert "bad_line_samples" not in got


@pytest.mark.parametrize(("fmt", "path"), [(AI_API_TEXT, AI_LOG), (COMBINED, COMBINED_LOG)])
def test_parallel_workers_give_the_same_result_as_one_reader(tmp_path, monkeypatch, fmt, path):
    lines = path.read_bytes().splitlines()
    bad = [b"10.1.2.3 garbage one", b"garbage two", b"x" * 300]
    # an hour of older traffic, then the fixture with bad lines spread through it
    body = [*_hour_older(lines), *lines[:1000], bad[0], *lines[1000:2000], bad[1],
            *lines[2000:], bad[2]]
    log = tmp_path / "a.log"
    log.write_bytes(b"\n".join(body) + b"\n")
    lf = LogFormat(fmt)
    for window, max_routes in ((None, 500), (900, 500), (None, 3)):
        monkeypatch.setattr(nginx_agg, "MAX_ROUTES", max_routes)  # 3: most fold into "(other)"
        one = aggregate_file(str(log), lf, window, workers=1)
        monkeypatch.setattr(nginx_scan, "PARALLEL_MIN_BYTES", 1 << 12)
        for workers in (2, 3, 7):
            many = aggregate_file(str(log), lf, window, workers=workers)
            assert many.pop("workers") == workers
            assert many.pop("bytes_scanned") >= one["bytes_scanned"] - 1
            want = {k: v for k, v in one.items() if k not in ("workers", "bytes_scanned")}
            if max_routes == 3:  # which rare routes fold into "(other)" depends on the order
                assert any(r["route"] == "(other)" for r in many["routes"])
                assert many.pop("routes")[0] == want.pop("routes")[0]
            assert many == want
        monkeypatch.undo()
    assert one["lines"] == 3519 + len(lines)
    assert one["bad_lines"] == 3


def test_range_cuts_fall_on_line_starts(tmp_path):
    log = tmp_path / "a.log"
    data = b"".join(b"x" * (i % 50) + b"\n" for i in range(2000))
    log.write_bytes(data)
    with log.open("rb") as fh:
        cuts = nginx_scan.split_ranges(fh, 0, len(data), 8)
    assert cuts[0] == 0
    assert cuts[-1] == len(data)
    assert cuts == sorted(set(cuts))
    assert len(cuts) == 9
    assert all(data[c - 1:c] == b"\n" for c in cuts[1:])


def test_a_busy_second_cut_by_a_range_boundary_still_counts_whole(tmp_path, monkeypatch):
    """Seconds at range edges are summed across workers before the peak is taken."""
    lines = AI_LOG.read_bytes().splitlines()
    stamp = re.compile(rb"2026-11-30T\d\d:\d\d:\d\d")

    def at(line: bytes, s: int) -> bytes:
        return stamp.sub(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1796000000 + s))
                         .encode(), line)

    body = [at(lines[i % len(lines)], i // 2) for i in range(3000)]  # 1,500 s at 2/s
    burst = [at(ln, 750) for ln in lines[:61]]  # then 61 + 2 lines in second 750, mid-file
    log = tmp_path / "a.log"
    log.write_bytes(b"\n".join([*body[:1500], *burst, *body[1500:]]) + b"\n")
    lf = LogFormat(AI_API_TEXT)
    one = aggregate_file(str(log), lf, None, workers=1)
    assert one["qps_peak"] == 63
    monkeypatch.setattr(nginx_scan, "PARALLEL_MIN_BYTES", 1 << 12)
    for workers in (2, 4):
        many = aggregate_file(str(log), lf, None, workers=workers)
        assert many["workers"] == workers
        for key in ("lines", "qps_peak", "bandwidth_mbit_peak", "window_s", "status_counts",
                    "request_time_ms_p99", "routes"):
            assert many[key] == one[key], key


@pytest.mark.parametrize("order", ["as logged", "shuffled", "two seconds interleaved"])
def test_per_second_peaks_match_an_exact_count_in_any_line_order(tmp_path, order):
    lines = AI_LOG.read_bytes().splitlines()
    if order == "shuffled":
        random.Random(7).shuffle(lines)
    elif order == "two seconds interleaved":
        a = [ln for ln in lines if b"T04:48:01" in ln]
        b = [ln for ln in lines if b"T04:48:02" in ln]
        lines = [x for pair in zip(a, b) for x in pair] + lines  # noqa: B905
    per_sec: dict[bytes, list[int]] = {}
    for ln in lines:
        stamp = re.search(rb" (\S+T\S+) ", ln)[1]  # type: ignore[index]
        sent = int(re.search(rb"resp_bytes=(\d+)", ln)[1])  # type: ignore[index]
        slot = per_sec.setdefault(stamp, [0, 0])
        slot[0] += 1
        slot[1] += sent
    log = tmp_path / "a.log"
    log.write_bytes(b"\n".join(lines) + b"\n")
    got = aggregate_file(str(log), LogFormat(AI_API_TEXT), None)
    assert got["qps_peak"] == max(c for c, _ in per_sec.values())
    assert got["bandwidth_mbit_peak"] == round(max(b for _, b in per_sec.values()) * 8 / 1e6, 3)
    assert got["lines"] == len(lines)


def test_a_failed_worker_means_one_reader_does_it_all_again(tmp_path, monkeypatch):
    lines = AI_LOG.read_bytes().splitlines()
    log = tmp_path / "a.log"
    log.write_bytes(b"\n".join(lines * 3) + b"\n")
    lf = LogFormat(AI_API_TEXT)
    want = aggregate_file(str(log), lf, None, workers=1)
    parent = os.getpid()
    real = nginx_scan.aggregate_stream

    def broken_in_workers(*args, **kwargs):  # type: ignore[no-untyped-def]
        if os.getpid() != parent:
            raise MemoryError("worker died")
        return real(*args, **kwargs)

    monkeypatch.setattr(nginx_scan, "aggregate_stream", broken_in_workers)
    monkeypatch.setattr(nginx_scan, "PARALLEL_MIN_BYTES", 1 << 12)
    got = aggregate_file(str(log), lf, None, workers=3)
    assert got == want
    assert got["workers"] == 1
    assert got["lines"] == 3 * 3519


def test_a_huge_last_line_after_many_good_ones_is_one_bad_line():
    """Cutting a spoilt block makes progress even when all its newlines come first."""
    lines = AI_LOG.read_bytes().splitlines()[:100]
    agg = nginx_agg.Aggregator(LogFormat(AI_API_TEXT))
    agg.feed(b"\n".join([*lines, b"y" * (1 << 20)]))
    got = agg.result()
    assert got["lines"] == 100
    assert got["bad_lines"] == 1


async def test_a_window_mid_file_read_over_the_connection_has_no_bad_first_line(sshd, tmp_path):
    """Without python3 on the box the bisection also lands mid-line: that line is skipped."""
    lines = AI_LOG.read_bytes().splitlines()
    log = tmp_path / "access.log"
    log.write_bytes(b"\n".join(_hour_older(lines) * 5 + lines) + b"\n")  # ~4 MB, 1 h apart
    opts = {"log_path": str(log), "log_format": AI_API_TEXT, "window": "15m"}
    ctx = ProbeContext(options=opts, config=Config())
    host = _NoPython("box", SSHOptions(config_file=str(sshd.ssh_config)))
    try:
        got = (await NginxProbe().check(host, ctx)).values
    finally:
        await host.close()
    assert got["aggregated_on"] == "locally"
    assert got["lines"] == 3519
    assert got["bad_lines"] == 0


def test_msec_times_are_counted_per_second_like_the_line_by_line_parser():
    lines = json_lines()
    lines[5] = re.sub(rb'"ts":"(\d+)\.\d+"', rb'"ts":"\1"', lines[5])  # no ms: still a time
    assert lines[5].startswith(b'{"ts":"1796000000",')
    fast, slow = Aggregator(LogFormat(JSON_MSEC, "json")), Aggregator(LogFormat(JSON_MSEC, "json"))
    fast.feed(b"\n".join(lines[:1000]))  # with the odd line: times kept whole
    fast.feed(b"\n".join(lines[1000:]))  # cut to seconds at C speed
    block = b"\n".join(lines).replace(b", ", b",")
    slow._slow(block)
    a, b = fast.result(), slow.result()
    assert a["bad_lines"] == 0
    assert a == b
    per_sec: dict[bytes, int] = {}
    for ln in lines:
        sec = ln.split(b'"')[3].split(b".")[0]
        per_sec[sec] = per_sec.get(sec, 0) + 1
    assert a["qps_peak"] == max(per_sec.values())
    assert a["lines"] == len(lines)
