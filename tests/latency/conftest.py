"""Network namespaces joined by a user-space delay line (tests/latency/delayline.py).

Topology (every address lives only inside namespaces created here)::

    console ns --(link "console")--+
                                    box ns --(link r<k>)-- region ns k (TCP listeners)

Link k: box side 10.200.k.1, peer side 10.200.k.2, point to point over two TUN
devices; the delay line adds ``delay_ms ± jitter_ms`` and ``loss_pct`` on the
box -> peer direction. Namespace names carry our PID and a random tag, and are
deleted in teardown even when a test fails (plus any left by a killed run).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sshd_support import stop, write_client_files, write_server_files

from inferfit.hosts.base import Completed
from inferfit.hosts.local import LocalHost

HERE = Path(__file__).resolve().parent
DELAYLINE = HERE / "delayline.py"
PREFIX = "iflat"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _reap_stale() -> None:
    """Delete namespaces a killed earlier run of these tests left behind (ours by prefix)."""
    listing = _ip("netns", "list", check=False).stdout.split()
    for name in listing:
        parts = name.split("-")
        ours = len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit()
        if ours and not Path(f"/proc/{parts[1]}").exists():
            _ip("netns", "del", name, check=False)


@dataclass
class LinkSpec:
    name: str
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    seed: int = 0
    listen: Sequence[int] = (443,)  # TCP listeners on the peer side
    http: Sequence[int] = ()  # tiny HTTP responders on the peer side


@dataclass
class Lab:
    box: str
    tag: str
    peers: dict[str, str] = field(default_factory=dict)  # link name -> peer namespace
    addrs: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (box_ip, peer_ip)
    proc: subprocess.Popen[str] | None = None
    stats_path: Path | None = None
    priority: str = ""

    def peer_ip(self, link: str) -> str:
        return self.addrs[link][1]

    def box_ip(self, link: str) -> str:
        return self.addrs[link][0]

    def host(self, path: str | None = None) -> NetnsHost:
        return NetnsHost(self.box, path=path)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per-link counters from the delay line (packets, drops, dropped SYNs)."""
        assert self.proc is not None
        assert self.stats_path is not None
        self.stats_path.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(100):
            if self.stats_path.exists():
                return dict(json.loads(self.stats_path.read_text()))
            time.sleep(0.05)
        raise AssertionError("the delay line wrote no stats")

    def exec(self, ns: str, *argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True,
                              text=True, **kw)


class NetnsHost(LocalHost):
    """A Host whose commands run inside a network namespace (`ip netns exec`)."""

    def __init__(self, ns: str, path: str | None = None) -> None:
        super().__init__(name=ns)
        self.ns = ns
        self.path = path

    def _wrap(self, argv: Sequence[str]) -> list[str]:
        env = ["env", f"PATH={self.path}"] if self.path else []
        return ["ip", "netns", "exec", self.ns, *env, *argv]

    async def run(self, argv: Sequence[str], *, timeout: float,
                  stdin: bytes | None = None) -> Completed:
        done = await super().run(self._wrap(argv), timeout=timeout, stdin=stdin)
        return Completed(tuple(argv), done.returncode, done.stdout, done.stderr, done.duration_s)

    def stream(self, argv: Sequence[str], *, timeout: float | None = None,
               stdin: bytes | None = None) -> AsyncIterator[str]:
        return super().stream(self._wrap(argv), timeout=timeout, stdin=stdin)


@contextlib.contextmanager
def make_lab(base: Path, links: Sequence[LinkSpec]) -> Iterator[Lab]:
    """Namespaces + delay line; always torn down (process by PID, namespaces by name)."""
    _reap_stale()
    tag = uuid.uuid4().hex[:6]
    lab = Lab(box=f"{PREFIX}-{os.getpid()}-{tag}-box", tag=tag)
    created: list[str] = []
    try:
        _ip("netns", "add", lab.box)
        created.append(lab.box)
        spec_links, listeners = [], []
        for k, link in enumerate(links, start=1):
            peer = f"{PREFIX}-{os.getpid()}-{tag}-{link.name}"
            _ip("netns", "add", peer)
            created.append(peer)
            box_ip, peer_ip = f"10.200.{k}.1", f"10.200.{k}.2"
            lab.peers[link.name], lab.addrs[link.name] = peer, (box_ip, peer_ip)
            spec_links.append({
                "name": link.name, "box_ns": lab.box, "peer_ns": peer, "box_ip": box_ip,
                "peer_ip": peer_ip, "delay_ms": link.delay_ms, "jitter_ms": link.jitter_ms,
                "loss_pct": link.loss_pct, "seed": link.seed or k,
            })
            listeners += [{"ns": peer, "addr": peer_ip, "port": p} for p in link.listen]
            listeners += [{"ns": peer, "addr": peer_ip, "port": p, "kind": "http"}
                          for p in link.http]
        lab.stats_path = base / f"delayline-{tag}.json"
        spec = {"links": spec_links, "listeners": listeners, "stats_path": str(lab.stats_path)}
        lab.proc = subprocess.Popen(
            [sys.executable, str(DELAYLINE), json.dumps(spec)],
            stdout=subprocess.PIPE, stderr=(base / f"delayline-{tag}.log").open("w"), text=True,
        )
        assert lab.proc.stdout is not None
        ready = lab.proc.stdout.readline()  # bounded: the process exits on any setup error
        if not ready.startswith("READY"):
            raise RuntimeError(
                f"delay line failed: {(base / f'delayline-{tag}.log').read_text()[-2000:]}"
            )
        lab.priority = ready.split()[-1]
        yield lab
    finally:
        stop(lab.proc)
        for name in reversed(created):
            _ip("netns", "del", name, check=False)


# -- an OpenSSH sshd inside the box namespace ------------------------------------------
@dataclass
class NetnsSshd:
    ns: str
    address: str
    port: int
    ssh_config: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def cli(self) -> list[str]:
        return ["-F", str(self.ssh_config), "box"]

    def stop(self) -> None:
        stop(self.proc)


def start_netns_sshd(base: Path, ns: str, address: str, port: int = 2222) -> NetnsSshd:
    """sshd -D in namespace ``ns`` on address:port, reachable through an ssh config alias."""
    _host_pub, config = write_server_files(
        base, address=address, port=port, setenv={}, extra=["MaxSessions 10"]
    )
    _known, ssh_config = write_client_files(base, address=address, port=port, host_pub=_host_pub)
    log = base / "sshd.log"
    proc = subprocess.Popen(["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(config)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(200):  # up to ~10 s
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
        listening = subprocess.run(["ss", "-N", ns, "-ltnH"], capture_output=True, text=True)
        if f"{address}:{port}" in listening.stdout:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("sshd did not listen within 10 s")
    return NetnsSshd(ns, address, port, ssh_config, proc, log)


def run_cli_in(
    ns: str, *args: str, cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """The real `inferfit` console script, started inside namespace ``ns``."""
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent)) or "inferfit"
    return subprocess.run(["ip", "netns", "exec", ns, exe, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=dict(os.environ))


@pytest.fixture
def netlab(tmp_path: Path) -> Iterator[Any]:
    """Build labs inside a test: ``with netlab([LinkSpec(...)]) as lab`` (torn down after)."""
    stack = contextlib.ExitStack()

    def build(links: Sequence[LinkSpec]) -> Lab:
        return stack.enter_context(make_lab(tmp_path, links))

    with stack:
        yield build


# Regions shared by the module-scoped lab: the done-when delays plus the failure cases.
REGION_LINKS = (
    LinkSpec("near", delay_ms=5.0, listen=(443,), http=(80,)),
    LinkSpec("mid", delay_ms=40.0, jitter_ms=5.0, loss_pct=1.0, seed=7),
    LinkSpec("far", delay_ms=180.0),
    LinkSpec("lossy", delay_ms=5.0, loss_pct=20.0, seed=11),
    LinkSpec("black", delay_ms=5.0, loss_pct=100.0),
    LinkSpec("console", delay_ms=10.0, listen=()),
)


@pytest.fixture(scope="module")
def regions_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with make_lab(tmp_path_factory.mktemp("lab"), REGION_LINKS) as lab:
        yield lab


@pytest.fixture(scope="module")
def box_sshd(regions_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsSshd]:
    server = start_netns_sshd(tmp_path_factory.mktemp("boxsshd"), regions_lab.box,
                              regions_lab.box_ip("console"))
    yield server
    server.stop()


@pytest.fixture
def cli_in_ns(home: Path, tmp_path: Path) -> Any:
    """Run the real `inferfit` inside a namespace, with the clean HOME of `home`."""

    def run(ns: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return run_cli_in(ns, *args, cwd=tmp_path, timeout=timeout)

    return run


@pytest.fixture
def link_spec() -> type[LinkSpec]:
    return LinkSpec


@pytest.fixture
def lab_factory() -> Any:
    """The context manager itself, for tests of the fixture's own teardown."""
    return make_lab
