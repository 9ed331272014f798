"""Feed an ``Aggregator`` through the C scanner (``_nginx_native``) when it is built.

Used where aggregation runs in inferfit's own process (a local target, a box
without python3, the benchmark); the script sent to a box stays pure Python.
The scanner cuts lines exactly as ``LogFormat.parse_block`` plans, counts the
joint keys in C, and asks Python only about values it has not seen: each gets
the same check the Python fast path applies (``Aggregator._key_check``,
``epoch``, the route naming). A line the scanner cannot place, or with a value
Python refuses, is handed to ``Aggregator._slow``: the line-by-line reference.
So results equal the pure-Python path's; ``tests/nginx/test_nginx_native.py``
holds them side by side.

``INFERFIT_NGINX_NATIVE=0`` turns the accelerator off.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from inferfit.probes.nginx_agg import MAX_ROUTES, Aggregator
from inferfit.probes.nginx_format import LogFormat
from inferfit.probes.nginx_values import BadChunk, epoch, fold_lists, time_ms

try:
    from inferfit.probes import _nginx_native  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler at install time)
    _nginx_native = None

# capture slots and fields, as in _nginx_native.c
REQ0, REQ1, STATUS, RT, UT, US, TIME, ZONE, BYTES = range(9)
F_REQ, F_STATUS, F_RT, F_UT, F_US, F_TIME = range(6)
_VALUE_VARS = {STATUS: "status", RT: "request_time", UT: "upstream_response_time",
               US: "upstream_status"}
_FIELD_OF = {STATUS: F_STATUS, RT: F_RT, UT: F_UT, US: F_US}
TIME_KINDS = {"msec": 1, "time_iso8601": 2, "time_local": 3}  # the scanner reads these itself


RELEASE_BYTES = 8 << 20  # a mapped log's pages are dropped from the RSS every 8 MiB read
TABLE_CAP: int | None = None  # distinct values a scanner table holds (None: the C default)


def available() -> bool:
    """Whether aggregation in this process uses the C scanner."""
    return _nginx_native is not None and os.environ.get("INFERFIT_NGINX_NATIVE", "1") != "0"


def can_cut(lf: LogFormat) -> bool:
    """Whether this process aggregates ``lf``'s lines with the C scanner (the same test
    ``feeder`` makes: built, turned on, a plan it can hold)."""
    return feeder(Aggregator(lf)) is not None


def _slots(lf: LogFormat) -> dict[tuple[str, str], int]:
    """Capture slot of each (variable, part) the aggregates need."""
    needed = lf.needed
    slots: dict[tuple[str, str], int] = {}
    if "request" in needed:
        slots["request", ""] = REQ0
    else:
        uvar = "request_uri" if "request_uri" in needed else "uri" if "uri" in needed else ""
        if uvar and "request_method" in needed:
            slots["request_method", ""] = REQ0
            slots[uvar, ""] = REQ1
        elif uvar:
            slots[uvar, ""] = REQ0
    for slot, var in _VALUE_VARS.items():
        if var in needed:
            slots[var, ""] = slot
    tv = lf.time_var
    if tv == "time_local":
        slots[tv, "a"] = TIME
        slots[tv, "b"] = ZONE
    elif tv:
        slots[tv, ""] = TIME
    bname = "bytes_sent" if "bytes_sent" in needed else "body_bytes_sent"
    if bname in needed:
        slots[bname, ""] = BYTES
    return slots


def plan_spec(lf: LogFormat) -> tuple[list[Any], dict[int, tuple[bytes, bytes]]] | None:
    """The scanner's segments for ``lf`` and each capture's glued literals, or None."""
    if lf.plan is None:
        return None
    _q, plan = lf.plan
    slots = _slots(lf)
    affix: dict[int, tuple[bytes, bytes]] = {}
    segs: list[Any] = []
    for kind, what in plan:
        if kind == "lit":
            segs.append(("lit", what))
        elif kind == "raw":
            cap = -1
            if lf.slots[what] >= 0:
                cap = slots.get((lf.names[what], ""), -1)
                if cap == TIME and lf.time_var == "time_local":
                    return None
            if cap >= 0:
                affix[cap] = (b"", b"")
            segs.append(("raw", cap))
        else:
            toks = []
            for pre, idx, part, suf in what:
                if idx < 0:
                    toks.append((1, pre, b"", -1))
                    continue
                cap = slots.get((lf.names[idx], part), -1) if lf.slots[idx] >= 0 else -1
                if cap >= 0:
                    affix[cap] = (pre, suf)
                toks.append((0, pre, suf, cap))
            segs.append(("tok", toks))
    return segs, affix


class NativeFeed:
    """One aggregator's scanner and the ids it has handed out."""

    def __init__(self, agg: Aggregator, spec: tuple[list[Any], dict[int, tuple[bytes, bytes]]]
                 ) -> None:
        lf = agg.lf
        segs, self.affix = spec
        assert lf.plan is not None
        pairs = [(REQ0, REQ1), (STATUS, -1), (RT, -1), (UT, -1), (US, -1), (TIME, ZONE)]
        fcaps = [(a if a in self.affix else -1, b if b in self.affix else -1) for a, b in pairs]
        self.present = [a >= 0 for a, _ in fcaps]
        tv = lf.time_var
        msec_trim = tv == "msec" and not self.affix.get(TIME, (b"", b""))[1]
        # the scanner names routes of a plain $request itself (route_of, for ASCII paths)
        self.c_routes = fcaps[F_REQ] == (REQ0, -1) and "request" in lf.needed and \
            self.affix[REQ0] == (b"", b"")
        self.scanner = _nginx_native.Scanner(lf.plan[0], segs, fcaps, msec_trim, lf.fold,
                                             self.c_routes, TIME_KINDS.get(tv, 0), agg.since,
                                             agg.until, *([TABLE_CAP] if TABLE_CAP else []))
        self.agg = agg
        self.values: list[list[bytes]] = [[] for _ in range(6)]
        self.route_ids: dict[str, int] = {}
        self.routes: list[str] = []
        self.routes_full = False
        self.learners: dict[int, Callable[[Any], int | None]] = {
            F_REQ: self._route, F_TIME: self._time}
        self._set_learners()

    # Python's verdict on a value the scanner has not seen -----------------------
    def _route(self, key: Any) -> int | None:
        try:
            if not self.c_routes:
                name = self.agg.route_name(key)
            elif key[:1] == b"R":  # named by the scanner
                name = self.agg.count_route(key[1:].decode("ascii"))
            else:  # b"Q" + the raw request
                name = self.agg.route_name(key[1:])
        except BadChunk:
            return None
        return self._route_id(name)

    def _route_id(self, name: str) -> int:
        rid = self.route_ids.get(name)
        if rid is None:
            rid = self.route_ids[name] = len(self.routes)
            self.routes.append(name)
        return rid

    def _time(self, key: Any) -> int | None:
        lf = self.agg.lf
        raw, zone = key if isinstance(key, tuple) else (key, None)
        v = lf.strip(lf.time_var, raw)
        if v is None:
            return None
        if zone is not None:
            pre, suf = self.affix[ZONE]
            if len(zone) < len(pre) + len(suf):
                return None
            zone = zone[len(pre):len(zone) - len(suf)]
        try:
            when = epoch(lf.time_var, v, zone)
        except BadChunk:
            return None
        return when if -(1 << 62) < when < 1 << 62 else None  # the scanner holds 64 bits

    def _set_learners(self) -> None:
        for slot, field in _FIELD_OF.items():
            check = self.agg._key_check(_VALUE_VARS[slot], remember=False)
            self.learners[field] = (self._time_value(_VALUE_VARS[slot], check)
                                    if field in (F_RT, F_UT) else self._value(field, check))

    def _time_value(self, var: str, check: Callable[[bytes], None]
                    ) -> Callable[[Any], int | None]:
        """Request/upstream times are kept decoded in the scanner: ms * 2**16 + attempts, or
        -1 for no value; a value that does not pack is left to the line-by-line parser."""
        strip = self.agg.lf.strip

        def learn(raw: Any) -> int | None:
            try:
                check(raw)
                got = time_ms(strip(var, raw) or b"-")
            except BadChunk:
                return None
            if got is None:
                return -1
            ms, attempts = got
            if not 0 <= ms < 1 << 46 or attempts >= 1 << 16:
                return None
            return ms << 16 | attempts

        return learn

    def _value(self, field: int, check: Callable[[bytes], None]) -> Callable[[Any], int | None]:
        values = self.values[field]

        def learn(raw: Any) -> int | None:
            try:
                check(raw)
            except BadChunk:
                return None
            values.append(raw)
            return len(values) - 1

        return learn

    # feeding ------------------------------------------------------------------
    def feed(self, block: bytes | memoryview) -> None:
        """``Aggregator.feed``: the scanner folds retry lists itself."""
        sc = self.scanner
        new = sc.scan(block)
        if new is None:  # a value table is full: fold what is counted, start the tables again
            self.reset()
            new = sc.scan(block)
            if new is None:  # more distinct values in one block than a table holds
                self.reset()
                block = bytes(block)
                self.agg._feed(fold_lists(block) if self.agg.fold else block, None)
                return
        for field, raws in enumerate(new):
            if raws:
                learn = self.learners[field]
                sc.learn(field, [learn(raw) for raw in raws])
        lines, outside, btotal, bn, per_sec, rejected = sc.commit()
        if self.c_routes and not self.routes_full and len(self.agg._names) >= MAX_ROUTES:
            self._routes_full()
        agg = self.agg
        agg.lines += lines
        agg.out_of_window += outside
        agg.bytes_total += btotal
        agg.bytes_n += bn
        if per_sec:
            agg.add_seconds({s: [c, b] for s, c, b in per_sec})
        if rejected:
            agg._slow(b"\n".join(rejected))  # folded already, as _slow expects
        if sc.joint_size > agg.FLUSH_KEYS:
            agg._flush()

    def stream(self, fh: BinaryIO, start: int, end: int | None, chunk: int, max_line: int
               ) -> int | None:
        """``nginx_scan.aggregate_stream`` over a memory map: no read copies, no chunk objects.

        None when the file cannot be mapped (nothing fed: the caller reads it instead).
        """
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return None
        with mm, memoryview(mm) as view:
            size = len(mm) if end is None else min(end, len(mm))
            pos = start
            with contextlib.suppress(OSError, AttributeError):
                mm.madvise(mmap.MADV_SEQUENTIAL)
            released = start - start % mmap.PAGESIZE
            if start > 0 and mm[start - 1:start] != b"\n":  # a line cut by start: not ours
                nl = mm.find(b"\n", start, size)
                pos = size if nl < 0 else nl + 1
            while pos < size:
                cut = mm.rfind(b"\n", pos, min(pos + chunk, size))
                if cut < 0:  # no line end within a chunk: a long line
                    nl = mm.find(b"\n", pos, size)
                    line_end = size if nl < 0 else nl
                    if line_end - pos > max_line:  # as aggregate_stream: counted, skipped
                        self.agg.bad_line(bytes(view[pos:pos + max_line + 1]))
                        pos = line_end + 1
                        continue
                    cut = line_end
                self.feed(view[pos:cut])  # complete lines (an empty one counts as bad)
                pos = cut + 1
                if pos - released >= RELEASE_BYTES:  # read pages leave the RSS (not the cache)
                    upto = pos - pos % mmap.PAGESIZE
                    with contextlib.suppress(OSError, AttributeError):
                        mm.madvise(mmap.MADV_DONTNEED, released, upto - released)
                    released = upto
            return max(0, size - (start - 1 if start > 0 else 0))

    def _routes_full(self) -> None:
        """Python names no new routes now ("(other)" from here on): let the scanner say so
        (when its table has room for every name; else Python goes on naming them)."""
        names = list(self.agg._names)
        ids = [self._route_id(name) for name in names]
        self.scanner.routes_full([b"R" + n.encode() for n in names], ids,
                                 self._route_id("(other)"))
        self.routes_full = True

    def take(self) -> tuple[Iterator[tuple[tuple[str, bytes, bytes], int]],
                            Iterator[tuple[str, Any, Any, int]]]:
        """The scanner's joint counts, emptied at once: as ``Aggregator.counts`` items (raw
        tokens; id 0 of an absent field is b"-", of an absent route "") and as decoded
        times (route, (ms, attempts) or None twice, count)."""
        dash = [b"-"]
        routes = self.routes if self.present[F_REQ] else [""]
        st_v, us_v = (self.values[f] if self.present[f] else dash for f in (F_STATUS, F_US))
        by_status, by_time = self.scanner.flush()
        return (((routes[r], st_v[st], us_v[us]), c) for (r, st, us), c in by_status), \
            ((routes[r], _unpack(rt), _unpack(ut), c) for (r, rt, ut), c in by_time)

    def reset(self) -> None:
        self.agg._flush()
        self.scanner.reset()
        self.values = [[] for _ in range(6)]
        self._set_learners()
        self.route_ids.clear()
        self.routes.clear()
        self.routes_full = False


def _unpack(packed: int) -> tuple[int, int] | None:
    return None if packed < 0 else (packed >> 16, packed & 0xFFFF)


def feeder(agg: Aggregator) -> NativeFeed | None:
    """A ``NativeFeed`` for ``agg``, or None (not built, turned off, or a format it cannot cut)."""
    if not available():
        return None
    spec = plan_spec(agg.lf)
    if spec is None:
        return None
    try:
        return NativeFeed(agg, spec)
    except (ValueError, OverflowError):  # a plan past the scanner's limits, bounds past 64 bits
        return None
