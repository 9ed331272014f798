"""A user-space delay line between network namespaces (this kernel has no netem).

Run as a separate process (root): ``python delayline.py SPEC_JSON``. For every link
it opens a TUN device (``IFF_TUN | IFF_NO_PI``) inside the "box" namespace and one
inside the peer namespace (entering each with ``setns``), gives them point-to-point
addresses, and forwards IP packets between the two with one asyncio loop:

* box -> peer: delayed by ``delay_ms ± jitter_ms`` (uniform, ``loop.call_later``)
  and dropped with probability ``loss_pct`` / 100;
* peer -> box: forwarded at once (so the round trip is the configured delay).

It also opens TCP listeners inside peer namespaces (``accept`` and close; or a
tiny HTTP responder). ``READY`` on stdout means every device and listener is up.
SIGUSR1 writes per-link counters (packets, drops, dropped TCP SYNs) as JSON to
``stats_path``; SIGTERM ends it (the TUN devices vanish with the process).

To stay accurate on a loaded machine it asks for SCHED_FIFO (falls back to
nice -20) and runs asyncio on select(), whose timeout has microsecond resolution
(epoll rounds up to whole milliseconds); packets are timed from when they were
read, on the loop's monotonic clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import json
import os
import random
import selectors
import signal
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000

_libc = ctypes.CDLL(None, use_errno=True)


def setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def in_netns(name: str) -> Any:
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        setns(f"/run/netns/{name}")
        yield
    finally:
        if _libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "cannot return to the original namespace")
        os.close(home)


def open_tun(ns: str, ifname: str) -> int:
    with in_netns(ns):
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@dataclass
class Link:
    name: str
    box_ns: str
    peer_ns: str
    box_ip: str
    peer_ip: str
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    seed: int = 0
    box_if: str = ""
    peer_if: str = "tb0"
    stats: dict[str, int] = field(default_factory=lambda: {
        "to_peer": 0, "to_box": 0, "dropped": 0, "dropped_syn": 0, "syn": 0, "ipv4_to_peer": 0,
    })


def is_syn(pkt: bytes) -> bool:
    """IPv4 TCP segment with SYN set and ACK clear (a connection attempt)."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4 or pkt[9] != 6:
        return False
    ihl = (pkt[0] & 0x0F) * 4
    if len(pkt) < ihl + 14:
        return False
    flags = pkt[ihl + 13]
    return bool(flags & 0x02) and not flags & 0x10


class DelayLine:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.links = [Link(**{k: v for k, v in link.items() if k != "stats"})
                      for link in spec["links"]]
        self.listeners: list[dict[str, Any]] = spec.get("listeners", [])
        self.stats_path: str | None = spec.get("stats_path")
        self.loop = asyncio.get_event_loop()
        self.socks: list[socket.socket] = []

    def setup(self) -> None:
        for n, link in enumerate(self.links):
            link.box_if = link.box_if or f"tr{n}"
            link.fd_box = open_tun(link.box_ns, link.box_if)  # type: ignore[attr-defined]
            link.fd_peer = open_tun(link.peer_ns, link.peer_if)  # type: ignore[attr-defined]
            for ns, dev, local, peer in (
                (link.box_ns, link.box_if, link.box_ip, link.peer_ip),
                (link.peer_ns, link.peer_if, link.peer_ip, link.box_ip),
            ):
                ip("-n", ns, "link", "set", "lo", "up")
                ip("-n", ns, "addr", "add", local, "peer", f"{peer}/32", "dev", dev)
                ip("-n", ns, "link", "set", dev, "up", "mtu", "1500")
            rng = random.Random(link.seed or None)
            self.loop.add_reader(link.fd_box, self._pump_out, link, rng)  # type: ignore[attr-defined]
            self.loop.add_reader(link.fd_peer, self._pump_back, link)  # type: ignore[attr-defined]
        for spec in self.listeners:
            with in_netns(spec["ns"]):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((spec["addr"], int(spec["port"])))
                s.listen(4096)
            s.setblocking(False)
            self.socks.append(s)
            self.loop.add_reader(s.fileno(), self._accept, s, spec.get("kind", "tcp"))

    # -- forwarding ---------------------------------------------------------
    def _pump_out(self, link: Link, rng: random.Random) -> None:
        fd_box, fd_peer = link.fd_box, link.fd_peer  # type: ignore[attr-defined]
        now = self.loop.time()
        for _ in range(256):
            try:
                pkt = os.read(fd_box, 65535)
            except BlockingIOError:
                return
            link.stats["to_peer"] += 1
            link.stats["ipv4_to_peer"] += bool(pkt) and pkt[0] >> 4 == 4
            syn = is_syn(pkt)
            link.stats["syn"] += syn
            if link.loss_pct and rng.random() * 100.0 < link.loss_pct:
                link.stats["dropped"] += 1
                link.stats["dropped_syn"] += syn
                continue
            delay = link.delay_ms + (rng.uniform(-link.jitter_ms, link.jitter_ms)
                                     if link.jitter_ms else 0.0)
            self.loop.call_at(now + max(0.0, delay) / 1000.0, _write, fd_peer, pkt)

    def _pump_back(self, link: Link) -> None:
        for _ in range(256):
            try:
                pkt = os.read(link.fd_peer, 65535)  # type: ignore[attr-defined]
            except BlockingIOError:
                return
            link.stats["to_box"] += 1
            _write(link.fd_box, pkt)  # type: ignore[attr-defined]

    # -- listeners ------------------------------------------------------------
    def _accept(self, s: socket.socket, kind: str) -> None:
        for _ in range(256):
            try:
                conn, _ = s.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                continue
            if kind == "http":
                conn.setblocking(False)
                self.loop.add_reader(conn.fileno(), self._http, conn, bytearray())
            else:
                conn.close()

    def _http(self, conn: socket.socket, buf: bytearray) -> None:
        try:
            data = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        buf += data
        if data and b"\r\n\r\n" not in buf:
            return
        self.loop.remove_reader(conn.fileno())
        with contextlib.suppress(OSError):
            if data:
                conn.send(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        conn.close()

    def write_stats(self) -> None:
        if not self.stats_path:
            return
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({link.name: link.stats for link in self.links}, fh)
        os.replace(tmp, self.stats_path)


def _write(fd: int, pkt: bytes) -> None:
    with contextlib.suppress(OSError):  # a full queue drops the packet, like a real link
        os.write(fd, pkt)


def raise_priority() -> str:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
        return "SCHED_FIFO"
    except (OSError, AttributeError):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, -20)
        return "nice"


def main() -> int:
    spec = json.loads(sys.argv[1])
    # select() takes a microsecond timeout; epoll rounds up to whole milliseconds.
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    asyncio.set_event_loop(loop)
    line = DelayLine(spec)
    line.setup()
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    loop.add_signal_handler(signal.SIGINT, lambda: stop.done() or stop.set_result(None))
    loop.add_signal_handler(signal.SIGUSR1, line.write_stats)
    prio = raise_priority()
    sys.stdout.write(f"READY {prio}\n")
    sys.stdout.flush()
    loop.run_until_complete(stop)
    line.write_stats()
    return 0


if __name__ == "__main__":
    sys.exit(main())
