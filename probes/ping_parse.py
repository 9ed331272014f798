"""Parsers for the fallback latency methods: ``ping`` (iputils, busybox) and ``curl -w``.

Pure functions over recorded output (tests/fixtures/latency/); they return a
SampleSet (RTTs in send order, sent, lost, errors in words).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inferfit.probes.latency_stats import SampleSet

# iputils: "64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=40.2 ms"
# busybox: "64 bytes from 10.0.0.2: seq=2 ttl=64 time=40.213 ms"
PING_REPLY = re.compile(r"(?:icmp_seq|seq)=(\d+)\b.*?\btime[=<]\s*([\d.]+)\s*ms")
# iputils: "20 packets transmitted, 19 received, +1 errors, 5% packet loss, time 3805ms"
# busybox: "10 packets transmitted, 10 packets received, 0% packet loss"
_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_ERRORS = (
    # (pattern, kind, words)
    (re.compile(r"Name or service not known|Temporary failure in name resolution|"
                r"bad address|unknown host|No address associated|cannot resolve", re.I),
     "dns", "cannot resolve the name"),
    (re.compile(r"Network is unreachable|No route to host|Destination (Host|Net) Unreachable",
                re.I), "no_route", "no route to the target"),
    (re.compile(r"Operation not permitted|permission denied|socket: ", re.I),
     "tool", "ping is not allowed to open an ICMP socket on the box"),
)


def ping_error(text: str) -> tuple[str, str] | None:
    """(kind, words) for a ping that could not measure, or None."""
    for pattern, kind, words in _ERRORS:
        m = pattern.search(text)
        if m:
            line = next((ln.strip() for ln in text.splitlines() if m.group(0) in ln), m.group(0))
            return kind, f"{words}: {line[:160]}"
    return None


def parse_ping(text: str, expected: int | None = None) -> SampleSet:
    """Replies (in sequence order), transmitted/received counts and errors from ping output."""
    out = SampleSet()
    seen: dict[int, float] = {}
    for line in text.splitlines():
        if "(DUP!)" in line:
            continue
        m = PING_REPLY.search(line)
        if m:
            seen.setdefault(int(m.group(1)), float(m.group(2)))
    out.rtts_ms = [seen[k] for k in sorted(seen)]
    summary = _SUMMARY.search(text)
    sent = int(summary.group(1)) if summary else (expected or len(seen))
    err = ping_error(text)
    if not seen and err is not None:
        kind, words = err
        if kind in ("dns", "tool") or not summary:
            out.error(kind, words)
            return out
        out.error(kind, words)  # "Destination Host Unreachable" replies: nothing went through
        out.errors[kind] = max(sent, 1)
        return out
    out.sent = max(sent, len(seen))
    out.lost = out.sent - len(seen)
    return out


# curl -w output, one line per request, written by the probe's shell loop:
# "@@<index> <exit> <namelookup> <connect> <appconnect> <starttransfer> <http_code>"
_CURL = re.compile(
    r"@@(\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) (\d{3})"
)
_CURL_EXIT = {
    6: ("dns", "cannot resolve the name"),
    7: ("no_route", "could not connect (refused or no route)"),
    28: ("timeout", "timed out"),
    35: ("tls", "TLS handshake failed"),
    60: ("tls", "the TLS certificate was not accepted"),
}


@dataclass
class CurlTimings:
    """What curl measured for one target (milliseconds, send order)."""

    samples: SampleSet
    connect_ms: list[float]
    tls_ms: list[float]
    ttfb_ms: list[float]
    http_codes: list[int]


def parse_curl(text: str, *, connect_only: bool = False) -> CurlTimings:
    """Per-request timings from the probe's curl loop.

    RTT = time_connect - time_namelookup (one TCP handshake). For HTTP targets,
    TLS = appconnect - connect, first byte = starttransfer - namelookup. With
    ``connect_only`` (a TCP target timed with curl) a timeout after the
    connect completed is still a good sample.
    """
    rows = sorted((int(m.group(1)), m) for m in _CURL.finditer(text))
    out = CurlTimings(SampleSet(), [], [], [], [])
    for _, m in rows:
        code = int(m.group(2))
        lookup, connect, app, first = (float(m.group(k)) for k in (3, 4, 5, 6))
        connected = connect > 0
        if connected and (code == 0 or connect_only or code in (22, 28, 52, 56)):
            out.samples.sent += 1
            rtt = (connect - lookup) * 1000.0
            out.samples.rtts_ms.append(round(rtt, 3))
            out.connect_ms.append(round(rtt, 3))
            if app > 0:
                out.tls_ms.append(round((app - connect) * 1000.0, 3))
            if first > 0:
                out.ttfb_ms.append(round((first - lookup) * 1000.0, 3))
            if int(m.group(7)):
                out.http_codes.append(int(m.group(7)))
            continue
        kind, words = _CURL_EXIT.get(code, ("error", f"curl exited {code}"))
        if kind == "timeout":
            out.samples.sent += 1
            out.samples.lost += 1
        else:
            out.samples.error(kind, words)
    return out
