"""Aggregate an nginx access log in fixed memory (pure, stdlib only; also shipped to the box).

Columns from ``nginx_format`` are folded per chunk with ``collections.Counter``
(C speed); only distinct values reach Python code, and they land in log-linear
histograms (exact below 256 ms, 128 sub-buckets per octave above: under 0.4 %
relative error). Nothing is kept per line. Must stay python3 >= 3.7 compatible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import chain, compress, islice, repeat
from operator import itemgetter
from typing import Any

from inferfit.probes.nginx_format import LogFormat
from inferfit.probes.nginx_values import (
    MAX_SAMPLES,
    BadChunk,
    Hist,
    check_status,
    epoch,
    fold_lists,
    redact,
    route_of,
    runs_of,
    time_ms,
    upstream_statuses,
    whole_seconds,
)

SLACK_S = 120
HOLD_S = 300
SLOW_LINES = 64  # a block this small that failed the fast path is parsed line by line
FAN_OUT = 8
MAX_ROUTES = 500
TOP_ROUTES = 10


_KEY_GROUPS = (("status", "upstream_status"), ("request_time", "upstream_response_time"))
_SUMS = ("lines", "bad", "out_of_window", "retries", "up_attempts", "up_errors",
         "bytes_total", "bytes_n")
_MAXES = ("peak_qps", "peak_bytes")


class _Route:
    __slots__ = ("c4", "c5", "hist", "n")

    def __init__(self) -> None:
        self.n = self.c4 = self.c5 = 0
        self.hist = Hist()


# -- the aggregator -----------------------------------------------------------
class Aggregator:
    """Fold chunks of log lines into the window's figures; ``result()`` is JSON-ready.

    Per chunk, columns go into ``Counter`` objects keyed by the raw bytes (C speed);
    only keys new to a counter are validated in Python. Counters are folded into
    histograms when they grow past ``FLUSH_KEYS`` and at the end: fixed memory.
    """

    FLUSH_KEYS = 60000

    def __init__(self, lf: LogFormat, since: int | None = None, until: int | None = None,
                 native: Any = None) -> None:
        self.lf = lf
        self.fold = lf.fold
        self.since, self.until = since, until
        self.lines = self.bad = self.out_of_window = 0
        self.samples: list[str] = []
        self.rt, self.ut, self.nt = Hist(), Hist(), Hist()
        self.retries = self.up_attempts = self.up_errors = 0
        self.bytes_total = self.bytes_n = 0
        self.per_sec: dict[int, list[int]] = {}
        self.peak_qps = self.peak_bytes = 0
        self.first: int | None = None
        self.last: int | None = None
        self.routes: dict[str, _Route] = {}
        self._rcache: dict[Any, str] = {}
        self._tcache: dict[bytes, int] = {}
        self._tms: dict[bytes, tuple[int, int] | None] = {}
        self._ok: dict[str, set[bytes]] = {}  # raw tokens already found valid
        # route names handed out, in first-seen order (MAX_ROUTES, then "(other)")
        self._names: dict[str, None] = {}
        # a worker of a parallel run keeps its first HOLD_S seconds unfolded (see merge)
        self.hold = False
        self._hold_until: int | None = None
        self._tz: bytes | None = None
        self.status: Counter[bytes] = Counter()
        # two counters keyed by raw tokens, folded by _flush(), b"-" for a field the format
        # lacks: (route, status, upstream status) and (route, request time, upstream time);
        # apart, so that many distinct times do not multiply with statuses
        self.counts: Counter[tuple[str, bytes, bytes]] = Counter()
        self.times: Counter[tuple[str, bytes, bytes]] = Counter()
        self._checks = [[(i, self._key_check(v)) for i, v in enumerate(group, 1)
                         if v in lf.needed] for group in _KEY_GROUPS]
        # ``native(agg)``: a feeder doing the per-line work in C (nginx_native; never on the box)
        self.native = native
        self._native = native(self) if native is not None else None
        self.native_stream = self._native.stream if self._native is not None else None

    # feeding ---------------------------------------------------------------
    def feed(self, block: bytes) -> None:
        """Complete lines joined by newlines (no trailing newline)."""
        if self._native is not None:
            self._native.feed(block)
            return
        if self.fold:
            block = fold_lists(block)
        self._feed(block, None)

    def _feed(self, block: bytes, n: int | None) -> None:
        got = self.lf.parse_block(block, n)
        if got is not None:
            try:
                self.add_columns(*got)
                return
            except BadChunk:
                pass
        if n is None:
            n = block.count(b"\n") + 1
        if n <= SLOW_LINES:
            self._slow(block)
            return
        # A bad line spoils its block: cut it in FAN_OUT pieces, so the good ones take
        # the fast path once and only the bad one's piece is cut again.
        step = len(block) // FAN_OUT
        pos = 0
        for i in range(1, FAN_OUT):
            cut = block.find(b"\n", max(pos, i * step))
            if cut < 0:
                break
            self._feed(block[pos:cut], None)
            pos = cut + 1
        if not pos:  # every newline lies in the first piece: cut at the last one
            pos = block.rfind(b"\n") + 1
            self._feed(block[:pos - 1], None)
        self._feed(block[pos:], None)

    def _slow(self, block: bytes) -> None:
        names = self.lf.needed
        cols: dict[str, list[bytes]] = {name: [] for name in names}
        good = 0
        for line in block.split(b"\n"):
            vals = self.lf.parse_folded(line)
            if vals is not None and self._valid(vals):
                good += 1
                for name, v in zip(names, vals):  # noqa: B905
                    cols[name].append(self.lf.unstrip(name, v) if v is not None else b"-")
            else:
                self.bad_line(line)
        if good:
            try:
                self.add_columns(dict(cols), good)
            except BadChunk:  # cannot happen when _valid agrees; never fatal anyway
                self.bad += good

    def bad_line(self, line: bytes) -> None:
        self.bad += 1
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(redact(line))

    def _valid(self, vals: list[bytes | None]) -> bool:
        row = dict(zip(self.lf.needed, vals))  # noqa: B905
        try:
            st = row.get("status")
            if st is None or len(st) != 3 or not st.isdigit():
                return False
            for key in ("request_time", "upstream_response_time"):
                v = row.get(key)
                if v is not None:
                    time_ms(v)
            v = row.get("upstream_status")
            if v is not None:
                upstream_statuses(v)
            for key in ("bytes_sent", "body_bytes_sent"):
                v = row.get(key)
                if v is not None and not v.isdigit():
                    return False
            tv = self.lf.time_var
            if tv:
                t = row.get(tv)
                if t is None:
                    return False
                epoch(tv, t, None)
        except BadChunk:
            return False
        return True

    # the columnar fold -----------------------------------------------------
    def _key_check(self, var: str, remember: bool = True) -> Any:
        """A check of ``var``'s raw tokens that raises BadChunk; ``remember``: keep up to
        20,000 good tokens to skip (the C scanner keeps its own)."""
        lf = self.lf
        conv = {"status": check_status, "upstream_status": upstream_statuses}.get(var, time_ms)

        ok = self._ok.setdefault(var, set()) if remember else set()
        # a bare "-" is an absent value only where the format glues nothing to it
        dash = b"-" if lf.affix.get(var, (b"", b"")) == (b"", b"") else None

        def check(raw: bytes) -> None:
            if raw in ok or raw == dash:
                return
            v = lf.strip(var, raw)
            if v is None:
                raise BadChunk(raw)
            conv(v)
            if remember and len(ok) < 20000:  # bounded: many distinct times stay flat
                ok.add(raw)

        return check

    def add_columns(self, cols: dict[str, Any], n: int) -> None:
        """Fold ``n`` parsed lines; raises BadChunk (changing nothing) when a value is invalid."""
        lf = self.lf
        tv = lf.time_var
        outside = 0
        runs: list[tuple[bytes, int]] | None = None
        ordered = False
        if tv:
            tcol = cols[tv]
            if tv == "msec" and not lf.affix.get(tv, (b"", b""))[1]:
                whole = whole_seconds(tcol)  # one key a second, not one a millisecond
                if whole is not None:
                    tcol = whole
                    cols = {**cols, tv: whole}
            tz = cols.get("_tz")
            runs, ordered = runs_of(tcol)
            cache = self._tcache
            if len(cache) > 100000 or tz != self._tz:  # keys are local times: zone matters
                cache.clear()
                self._tz = tz
            for key, _ in runs:
                if key not in cache:
                    v = lf.strip(tv, key)
                    if v is None:
                        raise BadChunk(key)
                    cache[key] = epoch(tv, v, tz)
            lo, hi = self.since, self.until
            secs_d = [cache[k] for k, _ in runs]
            if (lo is not None and min(secs_d) < lo) or (hi is not None and max(secs_d) >= hi):
                lo_v = lo if lo is not None else -1 << 62
                hi_v = hi if hi is not None else 1 << 62
                mask = [lo_v <= cache[k] < hi_v for k in tcol]
                kept = sum(mask)
                if not kept:
                    check = self._key_check("status")
                    for code in set(cols["status"]):
                        check(code)
                    self.out_of_window += n
                    return
                outside = n - kept
                cols = {k: (list(compress(v, mask)) if isinstance(v, list) else v)
                        for k, v in cols.items()}
                n = kept
                tcol = cols[tv]
                runs, ordered = runs_of(tcol)
        bname = "bytes_sent" if "bytes_sent" in cols else "body_bytes_sent"
        bcol = cols.get(bname)
        ints: list[int] = []
        if bcol is not None:
            pre, suf = lf.affix.get(bname, (b"", b""))
            if pre or suf:  # every token has them (tokens hold no newline), then cut them off
                joined = b"\n".join(bcol)
                if pre and (not joined.startswith(pre) or joined.count(b"\n" + pre) != n - 1):
                    raise BadChunk(b"bytes")
                if suf and (not joined.endswith(suf) or joined.count(suf + b"\n") != n - 1):
                    raise BadChunk(b"bytes")
                bcol = list(map(itemgetter(slice(len(pre), -len(suf) or None)), bcol))
            if not b"".join(bcol).isdigit():  # only digits (int() would take " +_")
                raise BadChunk(b"bytes")
            try:
                ints = list(map(int, bcol))
            except ValueError:  # an empty token
                raise BadChunk(b"bytes") from None
        rids = self._rids(cols, n)
        rt = cols.get("request_time")
        ut = cols.get("upstream_response_time")
        us = cols.get("upstream_status")
        dash = repeat(b"-")
        # joint counts per line (C speed), then check only the keys new to them; undo on a bad one
        done: list[tuple[Counter[tuple[str, bytes, bytes]], tuple[Any, ...]]] = []
        try:
            for counter, columns, checks in (
                    (self.counts, (rids, cols["status"], us or dash), self._checks[0]),
                    (self.times, (rids, rt or dash, ut or dash), self._checks[1])):
                before = len(counter)
                counter.update(zip(*columns))  # noqa: B905
                done.append((counter, columns))
                for new in islice(counter, before, None):
                    for i, check in checks:
                        check(new[i])
        except BadChunk:
            for counter, columns in done:
                counter.subtract(zip(*columns))  # noqa: B905
                for gone in [k for k, c in counter.items() if c <= 0]:
                    del counter[gone]
            raise
        # -- committed from here on --------------------------------------------
        self.lines += n
        self.out_of_window += outside
        if ints:
            self.bytes_total += sum(ints)
            self.bytes_n += n
        if runs is not None:
            self._per_second(cols[tv], runs, ordered, ints)
        if len(self.counts) + len(self.times) > self.FLUSH_KEYS:
            self._flush()

    def _per_second(self, tcol: list[bytes], runs: list[tuple[bytes, int]], ordered: bool,
                    ints: list[int]) -> None:
        """Requests and bytes per second; ``runs`` from ``_runs`` (``ordered``: in line order)."""
        cache = self._tcache
        bysec: dict[int, list[int]] = {}
        pos = 0
        for key, c in runs:
            s = cache[key]
            b = sum(ints[pos:pos + c]) if ints and ordered else 0
            pos += c
            slot = bysec.get(s)
            if slot is None:
                bysec[s] = [c, b]
            else:
                slot[0] += c
                slot[1] += b
        if ints and not ordered:
            for (key, b), c in Counter(zip(tcol, ints)).items():  # noqa: B905
                bysec[cache[key]][1] += b * c
        self.add_seconds(bysec)

    def add_seconds(self, bysec: dict[int, list[int]]) -> None:
        """Add [requests, bytes] per epoch second (in-window lines only)."""
        ps = self.per_sec
        for s, (c, b) in bysec.items():
            slot = ps.get(s)
            if slot is None:
                ps[s] = [c, b]
            else:
                slot[0] += c
                slot[1] += b
        lo, hi = min(bysec), max(bysec)
        if self.hold and self._hold_until is None:
            self._hold_until = lo + HOLD_S
        self.first = lo if self.first is None else min(self.first, lo)
        self.last = hi if self.last is None else max(self.last, hi)
        if len(ps) > 900:
            self._fold(self.last - 300)

    def _fold(self, before: int | None) -> None:
        ps = self.per_sec
        held = self._hold_until if self.hold and before is not None else None
        for s in [s for s in ps if (before is None or s < before) and (held is None or s >= held)]:
            c, b = ps.pop(s)
            self.peak_qps = max(self.peak_qps, c)
            self.peak_bytes = max(self.peak_bytes, b)

    def _rids(self, cols: dict[str, Any], n: int) -> list[str]:
        """The route of every line (ids folded, query cut), via a cache of distinct requests."""
        if "request" in cols:
            keys: Any = cols["request"]
        elif "request_uri" in cols or "uri" in cols:
            uri = cols.get("request_uri") or cols["uri"]
            keys = list(zip(cols["request_method"], uri)) if "request_method" in cols else uri  # noqa: B905
        else:
            return [""] * n
        rc = self._rcache
        if len(rc) > 20000:
            rc.clear()
        for k in dict.fromkeys(keys):  # first-seen order: route names are handed out in it
            if k not in rc:
                rc[k] = self.route_name(k)
        return list(map(rc.__getitem__, keys))

    def route_name(self, k: Any) -> str:
        """The route for a raw ``$request`` (bytes), ``(method, uri)`` or bare uri; counts
        it among the routes handed out (MAX_ROUTES, then "(other)")."""
        lf = self.lf
        if isinstance(k, tuple):
            uvar = "request_uri" if "request_uri" in lf.needed else "uri"
            m, u = lf.strip("request_method", k[0]), lf.strip(uvar, k[1])
            if m is None or u is None:
                raise BadChunk(k[1])
            name = route_of(u, m)
        elif "request" in lf.needed:
            name = route_of(lf.strip("request", k) or b"")
        else:
            u = lf.strip("request_uri" if "request_uri" in lf.needed else "uri", k)
            if u is None:
                raise BadChunk(k)
            name = route_of(u, b"")
        return self.count_route(name)

    def count_route(self, name: str) -> str:
        names = self._names
        if name not in names and len(names) >= MAX_ROUTES:
            name = "(other)"
        names[name] = None
        return name

    def _ms(self, var: str, raw: bytes) -> tuple[int, int] | None:
        got = time_ms(self.lf.strip(var, raw) or b"-")
        if len(self._tms) < 40000:  # a cache, bounded: many distinct times stay flat
            self._tms[raw] = got
        return got

    def _decoded_times(self) -> Iterator[tuple[str, Any, Any, int]]:
        """``times`` as (route, request time, upstream time, count); times as ``time_ms``."""
        tms = self._tms
        dash = b"-"
        for (name, rraw, uraw), c in self.times.items():
            req = up = None
            if rraw != dash:
                req = tms[rraw] if rraw in tms else self._ms("request_time", rraw)
            if uraw != dash:
                up = tms[uraw] if uraw in tms else self._ms("upstream_response_time", uraw)
            yield name, req, up, c

    def _flush(self) -> None:
        """Fold the joint counts into histograms and totals, and empty them.

        Each distinct key is visited once; histograms get one ``add`` per distinct value.
        """
        lf = self.lf
        dash = b"-"
        need_us = "upstream_status" in lf.needed
        by_code: dict[bytes, int] = {}
        rt: dict[int, int] = {}
        ut: dict[int, int] = {}
        nt: dict[int, int] = {}
        by_route: dict[tuple[str, bytes], int] = {}
        route_rt: dict[tuple[str, int], int] = {}
        ups: dict[bytes, int] = {}
        retried = 0
        statuses: Iterable[tuple[tuple[str, bytes, bytes], int]] = self.counts.items()
        times: Iterable[tuple[str, Any, Any, int]] = self._decoded_times()
        if self._native is not None:  # the scanner's times come decoded
            more_statuses, more_times = self._native.take()
            statuses, times = chain(statuses, more_statuses), chain(times, more_times)
        for (name, raw, sraw), c in statuses:
            by_code[raw] = by_code.get(raw, 0) + c
            if name:
                by_route[name, raw] = by_route.get((name, raw), 0) + c
            if need_us:
                ups[sraw] = ups.get(sraw, 0) + c
        for name, req, up, c in times:  # (ms, attempts) or None
            if req is not None:
                v = req[0]
                rt[v] = rt.get(v, 0) + c
                if name:
                    route_rt[name, v] = route_rt.get((name, v), 0) + c
            if up is not None:
                v = up[0]
                ut[v] = ut.get(v, 0) + c
                if req is not None:
                    v = max(req[0] - v, 0)
                    nt[v] = nt.get(v, 0) + c
            if not need_us and up is not None and up[1] > 1:
                retried += (up[1] - 1) * c
        self.retries += retried
        for sraw, c in ups.items():
            attempts, errors = upstream_statuses(lf.strip("upstream_status", sraw) or dash)
            self.up_attempts += attempts * c
            self.up_errors += errors * c
            if attempts > 1:
                self.retries += (attempts - 1) * c
        for h, acc in ((self.rt, rt), (self.ut, ut), (self.nt, nt)):
            for v, c in acc.items():
                h.add(v, c)
        codes = {raw: lf.strip("status", raw) or b"???" for raw in by_code}
        for raw, c in by_code.items():
            self.status[codes[raw]] += c
        routes = self.routes
        for (name, raw), c in by_route.items():
            r = routes.get(name) or routes.setdefault(name, _Route())
            r.n += c
            first = codes[raw][:1]
            if first == b"5":
                r.c5 += c
            elif first == b"4":
                r.c4 += c
        for (name, v), c in route_rt.items():
            routes[name].hist.add(v, c)
        self.counts.clear()
        self.times.clear()

    # parallel workers ------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything ``merge`` needs, as plain (``marshal``-able) data."""
        self._flush()
        st: dict[str, Any] = {k: getattr(self, k) for k in _SUMS + _MAXES}
        st.update(samples=self.samples, first=self.first, last=self.last,
                  per_sec=self.per_sec, status=dict(self.status), names=list(self._names),
                  rt=self.rt.state(), ut=self.ut.state(), nt=self.nt.state(),
                  routes={k: (r.n, r.c4, r.c5, r.hist.state()) for k, r in self.routes.items()})
        return st

    def merge(self, st: dict[str, Any]) -> None:
        """Add a worker's ``state()``; workers are merged in file order.

        Seconds cut by a range boundary are summed before peaks are taken
        (workers fold only the seconds far from both ends of their range).
        """
        for k in _SUMS:
            setattr(self, k, getattr(self, k) + st[k])
        for k in _MAXES:
            setattr(self, k, max(getattr(self, k), st[k]))
        self.samples = (self.samples + st["samples"])[:MAX_SAMPLES]
        for a, b in (("first", min), ("last", max)):
            if st[a] is not None:
                setattr(self, a, st[a] if getattr(self, a) is None else b(getattr(self, a), st[a]))
        ps = self.per_sec
        for s, (c, b) in st["per_sec"].items():
            slot = ps.setdefault(s, [0, 0])
            slot[0] += c
            slot[1] += b
        self.status.update(st["status"])
        for h, k in ((self.rt, "rt"), (self.ut, "ut"), (self.nt, "nt")):
            h.merge(st[k])
        names = self._names
        for name in st["names"]:  # as if one reader had seen this range after the others
            if name != "(other)" and name not in names and len(names) < MAX_ROUTES:
                names[name] = None
        for name, (n, c4, c5, hist) in st["routes"].items():
            r = self.routes.setdefault(name if name in names else "(other)", _Route())
            r.n += n
            r.c4 += c4
            r.c5 += c5
            r.hist.merge(hist)

    # results ---------------------------------------------------------------
    def result(self) -> dict[str, Any]:
        self._flush()
        self._fold(None)
        out: dict[str, Any] = {"lines": self.lines, "bad_lines": self.bad}
        if self.samples:
            out["bad_line_samples"] = list(self.samples)
        if self.out_of_window:
            out["lines_outside_window"] = self.out_of_window
        by_code: dict[str, int] = {}
        by_class: dict[str, int] = {}
        for raw in sorted(self.status):
            code = raw.decode()
            c = self.status[raw]
            by_class[code[0] + "xx"] = by_class.get(code[0] + "xx", 0) + c
            by_code[code] = c
        out["status_counts"] = {"by_code": by_code, "by_class": by_class}
        window = None
        if self.first is not None and self.last is not None:
            lo = self.first if self.since is None else max(self.since, self.first)
            hi = self.last + 1 if self.until is None else min(self.until, self.last + 1)
            window = max(hi - lo, 1)
            out["window_s"] = window
            out["window_start"] = lo
            out["window_end"] = hi
            out["qps_mean"] = round(self.lines / window, 3)
            out["qps_peak"] = self.peak_qps
            if self.bytes_n:
                out["bandwidth_mbit_peak"] = round(self.peak_bytes * 8 / 1e6, 3)
        for prefix, h in (("request_time_ms", self.rt), ("upstream_time_ms", self.ut)):
            for p in (50, 95, 99):
                v = h.percentile(p)
                if v is not None:
                    out[f"{prefix}_p{p}"] = round(v, 1)
            if h.n:
                out[f"{prefix}_max"] = float(h.max)
                out[f"{prefix}_mean"] = round(h.total / h.n, 3)
        v = self.nt.percentile(95)
        if v is not None:
            out["nginx_time_ms_p95"] = round(v, 1)
        out["upstream_retries"] = self.retries
        if self.up_attempts:
            out["upstream_errors"] = self.up_errors
        if self.bytes_n:
            out["response_bytes_mean"] = round(self.bytes_total / self.bytes_n, 1)
        if window is not None and self.rt.n:
            out["concurrency_littles_law"] = round(
                self.lines / window * self.rt.total / self.rt.n / 1000, 3)
        routes = sorted(self.routes.items(), key=lambda kv: (-kv[1].n, kv[0]))[:TOP_ROUTES]
        top = []
        for name, r in routes:
            row: dict[str, Any] = {"route": name, "requests": r.n, "status_4xx": r.c4,
                                   "status_5xx": r.c5}
            for p in (50, 95, 99):
                v = r.hist.percentile(p)
                if v is not None:
                    row[f"request_time_ms_p{p}"] = round(v, 1)
            top.append(row)
        if top:
            out["routes"] = top
        out["routes_seen"] = len(self.routes)
        return out
