"""Fleet fixtures: an ssh config with many aliases of the real loopback sshd, some broken,
and a factory for findings documents with chosen values."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inferfit.findings import Findings, ProbeResult, Target

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fleet"


def closed_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FleetSshConfig:
    path: Path
    good: list[str]
    closed: list[str]
    badkey: list[str]

    @property
    def all(self) -> list[str]:
        return [*self.good, *self.closed, *self.badkey]


def alias_block(alias: str, port: int, user: str, key: Path, known_hosts: Path) -> str:
    return (
        f"Host {alias}\n    HostName 127.0.0.1\n    Port {port}\n    User {user}\n"
        f"    IdentityFile {key}\n    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known_hosts}\n    StrictHostKeyChecking yes\n\n"
    )


@pytest.fixture
def fleet_sshd(sshd_factory: Callable[..., Any]) -> Any:
    """A private real sshd whose sessions skip ~/.bashrc (SHLVL=1: bash sources it for
    ssh commands only at SHLVL < 2). This machine's root rc runs `pyenv init`, whose
    rehash lock serialises concurrent ssh sessions for seconds each under load — and a
    fleet opens many sessions at once. Everything else is the stock test sshd."""
    return sshd_factory(setenv={"SHLVL": "1"})


@pytest.fixture
def fleet_ssh_config(fleet_sshd: Any, tmp_path: Path) -> FleetSshConfig:
    """box01..box06 reach the sshd; down01/down02 point at closed ports; evil01 has a
    known_hosts entry with another key for the sshd's address (a changed host key)."""
    s = fleet_sshd
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True)
    wrong_known = tmp_path / "known_hosts_wrong"
    pub = other.with_suffix(".pub").read_text().split()
    wrong_known.write_text(f"[127.0.0.1]:{s.port} {pub[0]} {pub[1]}\n")
    good = [f"box{i:02d}" for i in range(1, 7)]
    closed = ["down01", "down02"]
    text = "".join(alias_block(a, s.port, s.user, s.client_key, s.known_hosts)
                   for a in good)
    text += "".join(alias_block(a, closed_port(), s.user, s.client_key, s.known_hosts)
                    for a in closed)
    text += alias_block("evil01", s.port, s.user, s.client_key, wrong_known)
    text += "Host *\n    ConnectTimeout 5\n"
    path = tmp_path / "fleet_ssh_config"
    path.write_text(text)
    return FleetSshConfig(path, good, closed, ["evil01"])


def make_findings(name: str, probes: dict[str, tuple[str, dict[str, Any]]] | None = None,
                  **facts: Any) -> Findings:
    """A findings document: probes maps name -> (status, values)."""
    f = Findings(
        target=Target(name, f"ops@{name}:22", "ssh", facts={"cpu_cores": 32, **facts}),
        created=dt.datetime(2026, 11, 30, 5, 0, 0, tzinfo=dt.UTC),
    )
    for probe, (status, values) in (probes or {}).items():
        f.probes[probe] = ProbeResult(probe, status, f"{probe} {status}",  # type: ignore[arg-type]
                                      1.25, values=values,
                                      notes=[f"{probe} note"] if status != "ok" else [])
    return f


def gpu_box(name: str, *, seq: float = 2400.0, gpus: int = 2, gpu_name: str = "NVIDIA H100",
            p95: float = 41.0, disk_status: str = "ok") -> Findings:
    return make_findings(name, {
        "system": ("ok", {"cpu_cores": 32, "memory_gib": 251.5, "uptime_s": 1000,
                          "filesystems": [{"mount": "/", "free_gib": 800.0},
                                          {"mount": "/data", "free_gib": 3000.0}]}),
        "gpu": ("ok", {"devices": [{"index": i, "name": gpu_name, "memory_total_mib": 81559,
                                    "uuid": f"GPU-{name}-{i}"} for i in range(gpus)]}),
        "disk": (disk_status, {"seq_read_mib_s": seq, "rand_read_iops": 500000}),
        "latency": ("ok", {"regions": [{"name": "eu", "rtt_ms_p95": 12.5},
                                       {"name": "us", "rtt_ms_p95": p95}]}),
    })


@pytest.fixture
def findings_factory() -> Callable[..., Findings]:
    return gpu_box


@pytest.fixture
def findings_maker() -> Callable[..., Findings]:
    return make_findings
