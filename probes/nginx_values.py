"""Values of nginx log fields: times, statuses, routes, histograms (pure, stdlib only).

Shared by the fast and the line-by-line paths of ``nginx_agg`` and shipped to
the box with it, so it must stay python3 >= 3.7 compatible.
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections import Counter
from itertools import groupby
from operator import itemgetter

MAX_SAMPLES = 5
SAMPLE_CHARS = 120
_MONTHS = {m.encode(): i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_TIME_RE = re.compile(rb"\d+(?:\.\d+)?\Z")
_ID_RE = re.compile(r"\A(?:\d+|[0-9a-fA-F]{8,}|[0-9a-fA-F-]{32,36}|"
                    r"(?=[^/]*\d)[A-Za-z0-9_~.=+-]{16,})\Z")
_DIGIT_RE = re.compile(r"\d")
_IP_RE = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|\b[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){3,7}\b"
                    r"|[0-9a-fA-F]{0,4}::[0-9a-fA-F:]*")  # IPv4, IPv6 (not a 12:34:56 time)
_QUERY_RE = re.compile(r"\?[^\s\"]*")


class BadChunk(ValueError):
    """A chunk whose columns did not validate: re-parse it line by line."""


def fold_lists(block: bytes) -> bytes:
    """``0.000, 0.079`` -> ``0.000,0.079`` (retry lists become one token).

    Commas are rare in most formats: each is found with ``find`` (memchr). Where
    they are common (JSON), only ``", "`` is searched for.
    """
    find = block.find
    at = find(b",")
    if at < 0:
        return block
    out: list[bytes] = []
    pos = 0
    other = 0
    while at >= 0:
        if block[at + 1:at + 2] == b" ":
            out.append(block[pos:at + 1])
            pos = at + 2
        else:
            other += 1
            if other > 32:  # many commas: look for the pair instead
                at = find(b", ", at + 1)
                while at >= 0:
                    out.append(block[pos:at + 1])
                    pos = at + 2
                    at = find(b", ", pos)
                break
        at = find(b",", at + 1)
    out.append(block[pos:])
    return b"".join(out)


# -- columns of a chunk ---------------------------------------------------------
_MS = itemgetter(slice(-4, None))
_NO_MS = itemgetter(slice(None, -4))


def whole_seconds(col: list[bytes]) -> list[bytes] | None:
    """``1796014074.120`` -> ``1796014074`` for every token (C speed), or None when
    some token does not end in a dot and three digits."""
    ms = b"".join(map(_MS, col))
    n = len(col)
    if len(ms) != 4 * n or ms.count(b".") != n or ms[0::4].count(b".") != n or \
            not ms.replace(b".", b"").isdigit():
        return None
    return list(map(_NO_MS, col))


def runs_of(col: list[bytes]) -> tuple[list[tuple[bytes, int]], bool]:
    """Runs of equal values and their lengths, at C speed, and True (a log's times come
    in order); or, when there are many runs, distinct values and their counts, and False."""
    runs = [(k, len(list(g))) for k, g in groupby(col)]
    if len(runs) * 8 <= len(col):
        return runs, True
    return list(Counter(col).items()), False


# -- histograms ---------------------------------------------------------------
def bucket(v: int) -> int:
    if v < 256:
        return v
    shift = v.bit_length() - 8
    return 256 + (shift - 1) * 128 + ((v >> shift) - 128)


def bucket_value(i: int) -> float:
    if i < 256:
        return float(i)
    shift = (i - 256) // 128 + 1
    lo = ((i - 256) % 128 + 128) << shift
    return lo + ((1 << shift) - 1) / 2.0


class Hist:
    """Log-linear histogram of non-negative integers (milliseconds).

    Each bucket also remembers the smallest and largest value it saw, so a
    bucket that only ever held one value reports it exactly.
    """

    __slots__ = ("counts", "hi", "lo", "max", "n", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.lo: dict[int, int] = {}
        self.hi: dict[int, int] = {}
        self.n = 0
        self.total = 0
        self.max = -1

    def add(self, v: int, count: int = 1) -> None:
        b = bucket(v)
        c = self.counts.get(b)
        if c is None:
            self.counts[b] = count
            self.lo[b] = self.hi[b] = v
        else:
            self.counts[b] = c + count
            if v < self.lo[b]:
                self.lo[b] = v
            elif v > self.hi[b]:
                self.hi[b] = v
        self.n += count
        self.total += v * count
        if v > self.max:
            self.max = v

    def state(self) -> tuple[dict[int, int], dict[int, int], dict[int, int], int, int, int]:
        """Plain data (``marshal``-able) for ``merge`` in another process."""
        return self.counts, self.lo, self.hi, self.n, self.total, self.max

    def merge(self, st: tuple[dict[int, int], dict[int, int], dict[int, int], int, int, int]
              ) -> None:
        counts, lo, hi, n, total, top = st
        for b, c in counts.items():
            if b in self.counts:
                self.counts[b] += c
                self.lo[b] = min(self.lo[b], lo[b])
                self.hi[b] = max(self.hi[b], hi[b])
            else:
                self.counts[b], self.lo[b], self.hi[b] = c, lo[b], hi[b]
        self.n += n
        self.total += total
        self.max = max(self.max, top)

    def percentile(self, p: float) -> float | None:
        """Nearest-rank percentile (the value at rank ceil(p/100 * n))."""
        if not self.n:
            return None
        rank = max(1, -(-int(p * self.n * 1000) // 100000))
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                return float(min(max(bucket_value(b), self.lo[b]), self.hi[b]))
        return float(self.max)


# -- value converters (shared by the fast and the line-by-line paths) ----------
def time_ms(v: bytes) -> tuple[int, int] | None:
    """``0.028`` -> (28, 1); ``0.001,0.063`` -> (64, 2) summed over retries; ``-`` -> None."""
    if v == b"-":
        return None
    total = 0
    items = v.split(b",")
    for item in items:
        if item == b"-":
            continue
        if len(item) > 4 and item[-4:-3] == b"." and item[:-4].isdigit() and item[-3:].isdigit():
            total += int(item[:-4]) * 1000 + int(item[-3:])
        elif _TIME_RE.match(item):
            total += round(float(item) * 1000)
        else:
            raise BadChunk(v)
    return total, len(items)


def upstream_statuses(v: bytes) -> tuple[int, int]:
    """``502,200`` -> (attempts 2, errors 1); ``-`` -> (0, 0)."""
    if v == b"-":
        return 0, 0
    errors = 0
    items = v.split(b",")
    for item in items:
        if item == b"-":
            continue
        if len(item) != 3 or not item.isdigit():
            raise BadChunk(v)
        if item[:1] == b"5":
            errors += 1
    return len(items), errors


def epoch(kind: str, key: bytes, tz: bytes | None) -> int:
    try:
        if kind == "msec":
            whole = key.split(b".")[0]
            if not whole.isdigit():
                raise BadChunk(key)
            return int(whole)
        if kind == "time_iso8601":
            text = key.decode("ascii")
            if text.endswith("Z"):
                text = text[:-1] + "+00:00"
            return int(datetime.datetime.fromisoformat(text).timestamp())
        if tz is None:
            key, _, tz = key.partition(b" ")
        # 30/Nov/2026:04:47:54 +0000
        if len(key) != 20 or len(tz) != 5 or tz[:1] not in (b"+", b"-"):
            raise BadChunk(key)
        t = calendar.timegm((int(key[7:11]), _MONTHS[key[3:6]], int(key[0:2]),
                             int(key[12:14]), int(key[15:17]), int(key[18:20])))
        off = int(tz[1:3]) * 3600 + int(tz[3:5]) * 60
        return t - off if tz[:1] == b"+" else t + off
    except (ValueError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise BadChunk(key) from exc


def parse_when(text: str) -> int:
    """A since/until value: epoch seconds, or an ISO 8601 time (UTC when no zone)."""
    text = text.strip()
    if text.replace(".", "", 1).isdigit():
        return int(float(text))
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    when = datetime.datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)  # noqa: UP017 (3.7)
    return int(when.timestamp())


def parse_window(text: str) -> int | None:
    """``15m`` / ``1h`` / ``90s`` / ``2d`` -> seconds; ``all`` -> None."""
    text = text.strip().lower()
    if text in ("all", ""):
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].replace(".", "", 1).isdigit():
        return int(float(text[:-1]) * units[text[-1]])
    if text.isdigit():
        return int(text)
    raise ValueError(f"window {text!r}: expected like '15m', '1h', '90s' or 'all'")


# -- routes and privacy -------------------------------------------------------
def route_of(request: bytes, method: bytes | None = None) -> str:
    """``POST /v1/files/123?x=1 HTTP/1.1`` -> ``POST /v1/files/{id}`` (no query, ids folded).

    With ``method`` given (maybe empty), ``request`` is a bare URI ($request_uri, $uri).
    """
    if method is None:
        parts = request.split(b" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[0].isupper():
            return "(invalid request)"
        method, uri = parts[0], parts[1]
    else:
        uri = request
    path = uri.split(b"?", 1)[0].split(b"#", 1)[0].decode("utf-8", "replace")
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    if _DIGIT_RE.search(path):  # ids have digits: only then look at each segment
        seen = _SEGMENTS  # segments that are not ids repeat: remember them
        path = "/".join([s if s in seen else _segment(s) for s in path.split("/")])
    norm = path[:100]
    return f"{method.decode('ascii', 'replace')[:10]} {norm}".strip()


_SEGMENTS: set[str] = set()


def _segment(s: str) -> str:
    if _ID_RE.match(s):
        return "{id}"
    if len(_SEGMENTS) < 4096:
        _SEGMENTS.add(s)
    return s


def redact(line: bytes) -> str:
    """A bad line fit for findings: decoded, addresses and query strings masked, truncated."""
    text = line[:SAMPLE_CHARS * 2].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else "?" for c in text)
    text = _QUERY_RE.sub("?…", _IP_RE.sub("x.x.x.x", text))
    return text[:SAMPLE_CHARS] + ("…" if len(line) > SAMPLE_CHARS else "")


def check_status(code: bytes) -> None:
    if len(code) != 3 or not code.isdigit():
        raise BadChunk(code)
