"""The namespace fixture cleans up after a failing test, and the delay line is accurate."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest


def netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def test_namespaces_and_delay_line_go_away_when_the_body_fails(lab_factory: Any,
                                                                link_spec: Any,
                                                                tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def failing_test_body() -> None:
        with lab_factory(tmp_path, [link_spec("a", delay_ms=1.0)]) as lab:
            seen["names"] = {lab.box, *lab.peers.values()}
            seen["proc"] = lab.proc
            assert seen["names"] <= netns_names()
            raise RuntimeError("test body failed")

    with pytest.raises(RuntimeError, match="test body failed"):
        failing_test_body()
    assert not seen["names"] & netns_names()
    assert seen["proc"].poll() is not None  # the delay line process ended


def test_delay_line_reproduces_delay_jitter_and_loss_with_ping(regions_lab: Any) -> None:
    """Independent check of the emulation with iputils ping (kernel receive timestamps)."""
    before = regions_lab.stats()["lossy"]
    done = regions_lab.exec(regions_lab.box, "ping", "-c", "50", "-i", "0.01", "-W", "1",
                            regions_lab.peer_ip("lossy"), timeout=60)
    after = regions_lab.stats()["lossy"]
    dropped = after["dropped"] - before["dropped"]
    assert f"50 packets transmitted, {50 - dropped} received" in done.stdout, done.stdout
    mid = regions_lab.exec(regions_lab.box, "ping", "-c", "40", "-i", "0.01", "-W", "1",
                           regions_lab.peer_ip("mid"), timeout=60)
    times = [float(part.split("=")[1]) for line in mid.stdout.splitlines()
             for part in line.split() if part.startswith("time=")]
    assert times
    assert min(times) >= 35 - 1
    assert max(times) <= 45 + 2
