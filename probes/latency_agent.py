# ruff: noqa: UP006, UP035, UP045, UP031, SIM105
"""TCP connect timing, run on the box by its own ``python3`` (nothing installed).

The latency probe feeds this file's source to ``python3 -`` on stdin and passes
the targets as one JSON argument (``python3 - inferfit-latency '{"targets": ...}'``),
so no target text ever becomes code or shell syntax. It is also imported by the
probe to time the console-to-box path locally.

Kept compatible with Python 3.6+ (``typing.List`` etc., no walrus, no
``from __future__ import annotations``): a fresh box may carry an old python3.

Output: one JSON object per line, flushed as it happens::

    {"ev": "start", "python": "3.11.2", "tcp_info": true}
    {"ev": "resolve", "t": 0, "addr": "10.0.0.2", "port": 443}
    {"ev": "resolve", "t": 1, "error": "dns", "detail": "Name or service not known"}
    {"ev": "s", "t": 0, "i": 0, "k": "ok", "ms": 40.213, "wall_ms": 40.9}  # kernel RTT
    {"ev": "s", "t": 0, "i": 1, "k": "refused", "ms": 39.8}   # wall clock (no TCP_INFO RTT)
    {"ev": "s", "t": 0, "i": 2, "k": "lost", "wall_ms": 1041.0}   # SYN was retransmitted
    {"ev": "s", "t": 0, "i": 3, "k": "timeout"}
    {"ev": "s", "t": 0, "i": 4, "k": "error", "e": "no_route", "detail": "..."}
    {"ev": "end"}
"""

import errno
import json
import os
import selectors
import socket
import struct
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

# struct tcp_info: 8 bytes of u8 fields, then u32s: tcpi_rtt (µs) is the 16th,
# tcpi_total_retrans the 24th.
_TCPI_RTT_OFFSET = 8 + 15 * 4
_TCPI_TOTAL_RETRANS_OFFSET = 8 + 23 * 4
_TCPI_LEN = 104

_ERRORS = {
    errno.ENETUNREACH: "no_route",
    errno.EHOSTUNREACH: "no_route",
    errno.EADDRNOTAVAIL: "no_route",
    errno.ETIMEDOUT: "timeout",
    errno.ECONNRESET: "reset",
}

Emit = Callable[[Dict[str, Any]], None]


def _tcp_info(sock: socket.socket) -> Tuple[Optional[int], Optional[float]]:
    """(SYN retransmissions, kernel handshake RTT in ms) from Linux TCP_INFO, or Nones.

    The kernel times the handshake itself (SYN sent -> SYN-ACK processed, in µs), so
    the figure does not include how long this process waited for a CPU: on a busy
    box it is the network's RTT, not the scheduler's.
    """
    opt = getattr(socket, "TCP_INFO", None)
    if opt is None:
        return None, None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, opt, _TCPI_LEN)
    except OSError:
        return None, None
    if len(info) < _TCPI_LEN:
        return None, None
    retrans = int(struct.unpack_from("I", info, _TCPI_TOTAL_RETRANS_OFFSET)[0])
    rtt_us = int(struct.unpack_from("I", info, _TCPI_RTT_OFFSET)[0])
    return retrans, (rtt_us / 1000.0 if rtt_us > 0 else None)


def _close(sock: socket.socket) -> None:
    # Linger 0: reset instead of FIN, so thousands of probes leave no TIME_WAIT behind.
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def resolve(host: str, port: int) -> Tuple[Optional[Tuple[int, Any]], Dict[str, Any]]:
    """(family, sockaddr) for host:port, or None and a description of why not."""
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        return None, {"error": "dns", "detail": str(exc.strerror or exc)}
    except (OSError, UnicodeError) as exc:
        return None, {"error": "dns", "detail": str(exc)}
    if not infos:
        return None, {"error": "dns", "detail": "no address"}
    family, _, _, _, sockaddr = infos[0]
    return (family, sockaddr), {"addr": sockaddr[0], "port": sockaddr[1]}


def _classify(sock: socket.socket, err: int, ms: float) -> Dict[str, Any]:
    """One sample: 'ms' is the kernel's handshake RTT when known, else the wall clock."""
    if err in (0, errno.ECONNREFUSED):
        retrans, kernel_ms = _tcp_info(sock)
        if retrans:
            return {"k": "lost", "wall_ms": round(ms, 3)}
        if err == 0 and kernel_ms is not None:
            return {"k": "ok", "ms": round(kernel_ms, 3), "wall_ms": round(ms, 3)}
        return {"k": "ok" if err == 0 else "refused", "ms": round(ms, 3)}
    kind = _ERRORS.get(err, "error")
    if kind == "timeout":
        return {"k": "timeout"}
    return {"k": "error", "e": kind, "detail": os.strerror(err)}


def measure(
    targets: List[Tuple[str, int]],
    samples: int,
    interval_s: float,
    timeout_s: float,
    emit: Emit,
    max_s: float = 3600.0,
) -> None:
    """Time ``samples`` TCP connects to every target, ``interval_s`` apart.

    Targets run concurrently, each on its own schedule (offset so they do not all
    fire at once). ``samples`` <= 0 means run until ``max_s`` (live mode).
    """
    addrs = []  # type: List[Optional[Tuple[int, Any]]]
    for t, (host, port) in enumerate(targets):
        addr, info = resolve(host, port)
        addrs.append(addr)
        info.update({"ev": "resolve", "t": t})
        emit(info)
    live = [t for t, a in enumerate(addrs) if a is not None]
    sel = selectors.DefaultSelector()
    start = time.perf_counter()
    stop_at = start + max_s
    spread = interval_s / max(len(live), 1)
    next_i = {t: 0 for t in live}
    due = {t: start + k * spread for k, t in enumerate(live)}
    pending = {}  # type: Dict[socket.socket, Tuple[int, int, float, float]]

    def finish(sock: socket.socket, result: Dict[str, Any], t: int, i: int) -> None:
        try:
            sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        _close(sock)
        result.update({"ev": "s", "t": t, "i": i})
        emit(result)

    try:
        while True:
            now = time.perf_counter()
            # Launch every connect that is due.
            for t in live:
                while (samples <= 0 or next_i[t] < samples) and due[t] <= now < stop_at:
                    i = next_i[t]
                    next_i[t] += 1
                    due[t] += interval_s
                    addr = addrs[t]
                    assert addr is not None
                    sock = socket.socket(addr[0], socket.SOCK_STREAM)
                    sock.setblocking(False)
                    t0 = time.perf_counter()
                    err = sock.connect_ex(addr[1])
                    t1 = time.perf_counter()
                    if err in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
                        pending[sock] = (t, i, t0, t0 + timeout_s)
                        sel.register(sock, selectors.EVENT_WRITE)
                    else:
                        finish(sock, _classify(sock, err, (t1 - t0) * 1000.0), t, i)
            waiting = [d for t, d in due.items() if samples <= 0 or next_i[t] < samples]
            if not pending and (not waiting or now >= stop_at):
                break
            wake = min([d for d in waiting if d < stop_at] + [p[3] for p in pending.values()]
                       + [stop_at])
            events = sel.select(max(0.0, wake - time.perf_counter())) if pending else []
            if not pending:
                time.sleep(max(0.0, wake - time.perf_counter()))
            t1 = time.perf_counter()
            for key, _ in events:
                sock = key.fileobj  # type: ignore[assignment]
                assert isinstance(sock, socket.socket)
                t, i, t0, _deadline = pending.pop(sock)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                finish(sock, _classify(sock, err, (t1 - t0) * 1000.0), t, i)
            for sock, (t, i, _t0, deadline) in list(pending.items()):
                if deadline <= t1:
                    del pending[sock]
                    finish(sock, {"k": "timeout"}, t, i)
    finally:
        for sock in list(pending):
            _close(sock)
        sel.close()


def _print(obj: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main(argv: List[str]) -> int:
    payload = json.loads(argv[-1])
    targets = [(str(h), int(p)) for h, p in payload["targets"]]
    _print({"ev": "start", "python": "%d.%d.%d" % sys.version_info[:3],
            "tcp_info": hasattr(socket, "TCP_INFO")})
    try:
        measure(
            targets,
            int(payload.get("samples", 20)),
            float(payload.get("interval_ms", 200)) / 1000.0,
            float(payload.get("timeout_ms", 2000)) / 1000.0,
            _print,
            float(payload.get("max_s", 3600)),
        )
        _print({"ev": "end"})
    except (BrokenPipeError, KeyboardInterrupt):  # the console went away: stop quietly
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (silence the flush at exit)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
