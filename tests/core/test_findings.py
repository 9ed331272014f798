"""The findings model: TOML/JSON round trips, no None, atomic writes."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from inferfit.findings import Findings, FindingsError, ProbeResult, Target


def sample() -> Findings:
    f = Findings(
        target=Target("gpu-7", "ops@gpu-7:22", "ssh", {"cpu_cores": 64, "memory_gib": 503.5}),
        created=dt.datetime(2026, 11, 30, 4, 42, 19, tzinfo=dt.UTC),
    )
    f.probes["gpu"] = ProbeResult(
        "gpu", "warn", "8× H100, 1 throttling", 1.25,
        values={"gpu_count": 8, "driver_version": "590.48.01", "unknown_thing": None,
                "devices": [{"index": 0, "name": "NVIDIA H100", "power_draw_w": float("nan"),
                             "memory_total_mib": 81559}]},
        notes=["GPU 3 throttled for power while idle"],
    )
    f.probes["disk"] = ProbeResult.error("disk", "fio failed", kind="fio_failed", fix="install fio")
    f.sections["sizing"] = {"mode": "split", "actions": ["split", "scale_out"],
                            "reasons": [{"rule": "interference", "says": "batch hurts p99"}]}
    return f


def test_toml_round_trip_equal_and_none_dropped(tmp_path: Path) -> None:
    f = sample()
    path = f.write(tmp_path / "a.toml")
    text = path.read_text()
    assert "unknown_thing" not in text
    assert "nan" not in text
    doc = tomllib.loads(text)
    assert doc["probes"]["gpu"]["devices"][0] == {"index": 0, "name": "NVIDIA H100",
                                                  "memory_total_mib": 81559}
    loaded = Findings.load(path)
    assert loaded.to_dict() == f.to_dict()
    assert loaded.probes["disk"].error_kind == "fio_failed"
    assert loaded.probes["disk"].fix == "install fio"
    assert loaded.status == "error"
    assert loaded.sizing == f.sections["sizing"]
    assert loaded.created == f.created


def test_json_round_trip(tmp_path: Path) -> None:
    f = sample()
    loaded = Findings.load(f.write(tmp_path / "a.json"))
    assert loaded.to_dict() == f.to_dict()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("schema_version = 1\n", r"missing \[target\]"),
        ("tool = 'x'\n", "no integer schema_version"),
        ("schema_version = 99\ncreated = 2026-01-01T00:00:00Z\n[target]\nname='a'\naddress='a'\n"
         "transport='ssh'\n", "newer than this inferfit reads"),
        ("schema_version = 1\ncreated = 2026-01-01T00:00:00Z\n[target]\nname='a'\naddress='a'\n"
         "transport='ssh'\n[probes.gpu]\nstatus='great'\n", "probes.gpu.status is 'great'"),
        ("schema_version = [\n", "not valid TOML"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(FindingsError, match=message) as err:
        Findings.load(path)
    assert str(path) in str(err.value)


def test_export_killed_mid_write_leaves_previous_file(tmp_path: Path) -> None:
    """SIGKILL a process while it rewrites a large findings file: never partial."""
    target = tmp_path / "findings.toml"
    sample().write(target)
    before = target.read_text()
    writer = tmp_path / "writer.py"
    writer.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from inferfit.findings import Findings, ProbeResult, Target
        f = Findings(target=Target("big", "big", "local"))
        f.probes["x"] = ProbeResult("x", "ok", "big", values={{"blob": ["y" * 1000] * 40000}})
        print("ready", flush=True)
        while True:
            f.write({str(target)!r})
    """))
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, str(writer)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.05 + 0.1 * _)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        text = target.read_text()
        assert text == before or text.endswith('"\n]\n') or text.rstrip().endswith("]")
        doc = tomllib.loads(text)  # always a complete document
        assert doc["schema_version"] == 1
