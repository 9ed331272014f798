"""fio JSON parsing on recorded output of every generation, and every failure as a finding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferfit.probes.disk import live_progress
from inferfit.probes.fio_parse import (
    FioParseError,
    FioStream,
    classify,
    parse_captured,
    parse_fio_json,
    percentile_from_bins,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fio"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_fio_3_33_sequential_read() -> None:
    r = parse_fio_json(read("fio-seqread-1m.json"))
    assert r.version == "fio-3.33"
    assert r.generation == "3.x"
    job = r.job("model-read")
    assert job is not None
    assert job.read.bw_bytes_s == 2573053852
    assert job.read.mib_s == pytest.approx(2453.85, abs=0.01)
    assert job.read.io_bytes == 12880707584
    assert job.read.iops == pytest.approx(2453.855374)
    assert job.read.clat.pct(99.0) == pytest.approx(7634.944)  # ns -> µs
    assert job.read.clat.pct(50.0) == pytest.approx(6455.296)
    assert job.read.clat.pct(99.9) == pytest.approx(9371.648)
    assert job.finished
    assert r.disk_util == (("vda", pytest.approx(98.090927)),)


def test_fio_3_33_random_read_percentiles() -> None:
    r = parse_fio_json(read("fio-randread-4k.json"))
    d = r.jobs[0].read
    assert d.iops == pytest.approx(86479.904019)
    assert [d.clat.pct(p) for p in (50.0, 95.0, 99.0, 99.9)] == pytest.approx(
        [179.2, 211.968, 432.128, 2375.68])


def test_fio_json_plus_bins_agree_with_percentiles() -> None:
    text = read("fio-seqread-jsonplus.json")
    r = parse_fio_json(text)
    assert r.jobs[0].read.clat.pct(99.0) == pytest.approx(14614.528)
    bins = json.loads(text)["jobs"][0]["read"]["clat_ns"]["bins"]
    assert percentile_from_bins(bins, 99.0) == pytest.approx(14614528, rel=0.02)
    # Without fio's percentile table the bins give the figures.
    doc = json.loads(text)
    del doc["jobs"][0]["read"]["clat_ns"]["percentile"]
    r2 = parse_fio_json(json.dumps(doc))
    assert r2.jobs[0].read.clat.pct(99.0) == pytest.approx(14614.528, rel=0.02)
    assert r2.jobs[0].read.clat.pct(50.0) == pytest.approx(13041.664, rel=0.02)


def test_old_fio_3_without_bw_bytes() -> None:
    r = parse_fio_json(read(
        "louwrentius__fio-plot__HPDL380G8-H420i-Crucial-MX200__randread-1-1.json"))
    assert r.version == "fio-3.1"
    assert r.generation == "3.x-old"
    d = r.jobs[0].read
    assert d.bw_bytes_s == 26456 * 1024  # bw is KiB/s
    assert d.io_bytes == 1625501696  # already bytes in 3.x
    assert d.iops == pytest.approx(6614.073099)
    assert d.clat.pct(99.0) == pytest.approx(142.336)
    assert 0.0 not in d.clat.percentiles_us  # fio 3.1's "0.00": 0 sentinel is dropped


def test_fio_2_layout_kib_and_microseconds() -> None:
    r = parse_fio_json(read("fio2-seqread-1m.json"))
    assert r.generation == "2.x"
    d = r.jobs[0].read
    assert d.io_bytes == 5 * 1024**3  # io_bytes was KiB
    assert d.mib_s == pytest.approx(1024.0)
    assert d.clat.pct(99.0) == pytest.approx(18048.0)  # already µs
    assert d.clat.mean_us == pytest.approx(15471.33)
    assert r.jobs[0].write.io_bytes == 0
    assert r.jobs[0].write.clat.mean_us is None  # all-zero latency is "unknown", not 0


def test_notes_before_the_json_are_kept_and_skipped() -> None:
    r = parse_fio_json(read("fio-note-before-json.txt"))
    assert r.jobs[0].read.iops == pytest.approx(86479.904019)
    assert r.preamble[0].startswith("note: both iodepth")
    assert len(r.preamble) == 2
    report, failure = parse_captured(read("fio-note-before-json.txt"), "", 0)
    assert failure is None
    assert report is not None


def error_cases() -> list[tuple[str, str, str, int]]:
    """(command, stdout, stderr, exit code) for each section of fio-error.txt."""
    cases = []
    for block in read("fio-error.txt").split("#" * 40)[1:]:
        command = re.search(r"^# command: (.*)$", block, re.M)
        code = re.search(r"^# exit_code: (\d+)$", block, re.M)
        out = block.split("# ---- stdout ----\n", 1)[1]
        stdout, _, stderr = out.partition("# ---- stderr ----\n")
        assert command
        assert code
        cases.append((command.group(1), stdout, stderr, int(code.group(1))))
    return cases


def test_every_recorded_failure_is_a_clear_finding() -> None:
    cases = error_cases()
    assert len(cases) == 3
    seen = []
    for command, stdout, stderr, code in cases:
        _report, failure = parse_captured(stdout, stderr, code)
        assert failure is not None, command
        assert failure.fix
        seen.append((failure.kind, failure.message))
    # zero-filled JSON, exit 1, error 0: the reason comes from stderr
    assert seen[0] == ("fio_failed", "fio exited 1 and measured nothing: failed to create dir "
                       "(/srv/bench/testfile/notadir): Not a directory")
    # zero-filled JSON with error 22 set in the job
    assert seen[1][0] == "fio_failed"
    assert "error 22 (Invalid argument)" in seen[1][1]
    assert "total_file_size" in seen[1][1]
    # no JSON at all, engine missing
    assert seen[2][0] == "fio_engine"
    assert "nosuchengine" in seen[2][1]


def test_zero_filled_json_is_parsed_not_trusted() -> None:
    _cmd, stdout, _stderr, _code = error_cases()[0]
    report = parse_fio_json(stdout)
    assert report.io_bytes == 0
    # Even with exit 0 and no stderr a run that moved no bytes is a failure.
    failure = classify(report, 0, [])
    assert failure is not None
    assert failure.kind == "fio_no_io"


def test_odirect_refusal_is_recognised() -> None:
    stderr = ("fio: looks like your file system does not support direct=1/buffered=0\n"
              "fio: destination does not support O_DIRECT\n")
    _cmd, stdout, _err, _code = error_cases()[1]
    _report, failure = parse_captured(stdout, stderr, 1)
    assert failure is not None
    assert failure.kind == "odirect_refused"


@pytest.mark.parametrize(("stdout", "stderr", "code", "kind"), [
    ("", "", 0, "fio_no_json"),
    ("", "sh: 1: fio: not found", 127, "fio_missing"),
    ('{\n  "fio version" : "fio-3.33",\n  "jobs" : [\n', "", 1, "fio_failed"),  # truncated
    ("garbage {not json\n", "", 0, "fio_no_json"),
    ('{"jobs": "nope"}', "", 0, "fio_no_json"),
    ("", "fio: pid=1, err=13/file:filesetup.c:1, func=open, error=Permission denied", 1,
     "permission_denied"),
    ("", "fio: io_u error on file /x: No space left on device: write offset=0", 1, "no_space"),
])
def test_malformed_outputs_become_findings(stdout: str, stderr: str, code: int,
                                           kind: str) -> None:
    _report, failure = parse_captured(stdout, stderr, code)
    assert failure is not None
    assert failure.kind == kind
    assert failure.message


def test_no_json_raises_a_parse_error_naming_the_output() -> None:
    with pytest.raises(FioParseError, match=r"no JSON report.*engine"):
        parse_fio_json("fio: engine nosuchengine not loadable\n")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.text(max_size=200), st.integers(-1, 255))
def test_never_a_traceback_on_arbitrary_output(stdout: str, stderr: str, code: int) -> None:
    parse_captured(stdout, stderr, code)
    stream = FioStream()
    for line in (stdout + "\n" + stderr).splitlines():
        stream.feed(line)
    stream.finish()


def test_wrapper_stream_status_documents_then_exit_and_stderr() -> None:
    stream = FioStream()
    interim = []
    for line in read("wrapper-stream.txt").splitlines():
        report = stream.feed(line)
        if report is not None:
            interim.append(report)
    stream.finish()
    assert stream.ended
    assert stream.exit_code == 0
    assert stream.stderr == []
    assert len(interim) >= 3
    assert not interim[0].finished
    assert interim[-1].finished
    final = stream.last
    assert final is not None
    assert [j.name for j in final.jobs] == ["seq_read", "rand_read"]
    assert classify(final, stream.exit_code, stream.stderr) is None
    prev: dict[str, tuple[int, int]] = {}
    fractions = []
    for report in interim[:-1]:
        p = live_progress(report, prev, total_s=4.0)
        assert p.probe == "disk"
        fractions.append(p.fraction)
        if p.values:
            assert p.values.get("read_mib_s", 0) > 0
    assert fractions == sorted(fractions)
    assert all(f is not None and 0 <= f <= 1 for f in fractions)


def test_stream_with_failure_markers() -> None:
    _cmd, stdout, stderr, code = error_cases()[0]
    stream = FioStream()
    lines = [*stdout.splitlines(), f"@@inferfit-fio-exit {code}", "@@inferfit-fio-stderr",
             *stderr.splitlines(), "@@inferfit-end"]
    for line in lines:
        stream.feed(line)
    stream.finish()
    failure = classify(stream.last, stream.exit_code, stream.stderr, stream.preamble)
    assert failure is not None
    assert "Not a directory" in failure.message


def test_stream_with_message_before_json_and_no_json() -> None:
    _cmd, stdout, stderr, code = error_cases()[2]
    stream = FioStream()
    for line in [*stdout.splitlines(), f"@@inferfit-fio-exit {code}", "@@inferfit-fio-stderr",
                 *stderr.splitlines(), "@@inferfit-end"]:
        stream.feed(line)
    stream.finish()
    assert stream.last is None
    failure = classify(stream.last, stream.exit_code, stream.stderr, stream.preamble)
    assert failure is not None
    assert failure.kind == "fio_engine"
