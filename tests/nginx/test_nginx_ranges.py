"""Reading a log by byte ranges: windows that start mid-file, and parallel workers."""

from __future__ import annotations

import pytest
from inferfit.probes.nginx_agg import aggregate_file
from inferfit.probes.nginx_format import COMBINED, LogFormat

from .conftest import AI_API_TEXT, FIXTURES

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
