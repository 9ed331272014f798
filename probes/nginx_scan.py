"""Read an nginx access log where it lies: the window, byte ranges, parallel workers.

Pure stdlib, python3 >= 3.7: shipped to the box with ``nginx_agg`` (see
``nginx_remote``). The window's start is found by bisecting the file by time;
a large window is cut at line starts into ranges that forked workers aggregate
at once (one core each), and their states are merged into one ``Aggregator``.
"""

from __future__ import annotations

import contextlib
import marshal
import os
from typing import Any, BinaryIO

from inferfit.probes.nginx_agg import SLACK_S, Aggregator
from inferfit.probes.nginx_format import LogFormat
from inferfit.probes.nginx_values import BadChunk, epoch

CHUNK_BYTES = 1 << 19  # ~2,500 lines: the chunk's token objects stay in the CPU cache
MAX_LINE = 1 << 20
PARALLEL_MIN_BYTES = 16 << 20  # per worker (~80k lines): forking and merging cost a few ms
MAX_WORKERS = 16
WORKER_NICE = 10


# -- times of single lines (finding the window) -------------------------------
def parse_time(lf: LogFormat, line: bytes) -> int | None:
    """The time of one line in epoch seconds (None when it has none or does not parse)."""
    vals = lf.parse_line(line)
    if vals is None or not lf.time_var:
        return None
    v = vals[lf.needed.index(lf.time_var)]
    if v is None:
        return None
    try:
        return epoch(lf.time_var, v, None)
    except BadChunk:
        return None


def last_time(lf: LogFormat, tail: bytes) -> int | None:
    """The latest time among the complete lines of a file's tail."""
    best = None
    for line in tail.split(b"\n")[1:]:
        t = parse_time(lf, line)
        if t is not None and (best is None or t > best):
            best = t
    return best


def window_bounds(last: int | None, window_s: int | None, since: int | None,
                  until: int | None) -> tuple[int | None, int | None]:
    end = until if until is not None else (last + 1 if last is not None else None)
    start = since
    if start is None and window_s is not None and end is not None:
        start = end - window_s
    return start, end


def _time_at(fh: BinaryIO, lf: LogFormat, offset: int) -> int | None:
    fh.seek(offset)
    data = fh.read(65536)
    lines = data.split(b"\n")
    for line in lines[1:-1] if offset else lines[:-1]:
        t = parse_time(lf, line)
        if t is not None:
            return t
    return None


def seek_time(fh: BinaryIO, lf: LogFormat, size: int, when: int) -> int:
    """An offset at or before the first line at ``when`` (logs are written in time order)."""
    lo, hi = 0, size
    while hi - lo > 65536:
        mid = (lo + hi) // 2
        t = _time_at(fh, lf, mid)
        if t is None or t >= when:
            hi = mid
        else:
            lo = mid
    return lo


def aggregate_stream(fh: BinaryIO, agg: Aggregator, start: int = 0, end: int | None = None) -> int:
    """Feed the complete lines that begin in ``[start, end)`` (``end`` None: to EOF).

    A line cut by ``start`` belongs to the range before it and is skipped. Returns
    the bytes read.
    """
    native = agg.native_stream
    if native is not None:  # the C scanner reads a memory map (never on the box)
        done: int | None = native(fh, start, end, CHUNK_BYTES, MAX_LINE)
        if done is not None:
            return done
    skipping = start > 0  # read the byte before start: a newline there means start is aligned
    pos = start - 1 if skipping else 0
    fh.seek(pos)
    read = 0
    carry = b""
    while True:
        want = CHUNK_BYTES if end is None else min(CHUNK_BYTES, end - pos - read)
        data = fh.read(want) if want > 0 else b""
        if not data:
            break
        read += len(data)
        if skipping:
            cut = data.find(b"\n")
            if cut < 0:
                continue
            data = data[cut + 1:]
            skipping = False
        data = carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            if len(carry) > MAX_LINE:
                agg.bad_line(carry)
                carry, skipping = b"", True
            continue
        carry = data[cut + 1:]
        agg.feed(data[:cut])
    if carry and not skipping:
        agg.feed(carry)
    return read


def default_workers() -> int:
    """Half the CPUs this process may use (the box has other work), at most MAX_WORKERS."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus // 2, MAX_WORKERS))


def split_ranges(fh: BinaryIO, start: int, end: int, parts: int) -> list[int]:
    """Cut ``[start, end)`` into up to ``parts`` ranges at line starts; their boundaries."""
    cuts = [start]
    for i in range(1, parts):
        base = start + (end - start) * i // parts - 1
        fh.seek(base)  # the first newline from here on ends the line the cut falls in
        pos = end
        while True:
            data = fh.read(65536)
            if not data:
                break
            nl = data.find(b"\n")
            if nl >= 0:
                pos = base + nl + 1
                break
            base += len(data)
        if cuts[-1] < pos < end:
            cuts.append(pos)
    return [*cuts, end]


def _work(path: str, agg: Aggregator, start: int, end: int | None, out: int) -> None:
    """A forked worker: aggregate one range, write its state to ``out``, and exit."""
    code = 1
    try:
        with contextlib.suppress(OSError):
            os.nice(WORKER_NICE)  # the box's own work comes first
        with os.fdopen(out, "wb") as pipe:
            agg.hold = True
            with open(path, "rb") as fh:
                read = aggregate_stream(fh, agg, start, end)
            pipe.write(marshal.dumps((agg.state(), read)))
        code = 0
    finally:
        os._exit(code)


def aggregate_parallel(path: str, agg: Aggregator, cuts: list[int]) -> int:
    """Aggregate ranges in forked workers (the last one to EOF) and merge into ``agg``.

    Returns the bytes read; raises OSError when a worker could not start or failed.
    """
    kids: list[tuple[int, int]] = []
    try:
        for i in range(len(cuts) - 1):
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the child never returns)
                try:
                    os.close(rfd)
                    _work(path, Aggregator(agg.lf, agg.since, agg.until, agg.native), cuts[i],
                          cuts[i + 1] if i + 2 < len(cuts) else None, wfd)
                finally:
                    os._exit(1)
            os.close(wfd)
            kids.append((pid, rfd))
    finally:
        states = []
        for pid, rfd in kids:  # read each pipe to EOF before reaping: no deadlock
            with os.fdopen(rfd, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            states.append(data if status == 0 else b"")
    if len(states) != len(cuts) - 1 or not all(states):
        raise OSError("a parallel worker failed")
    try:
        loaded = [marshal.loads(data) for data in states]
    except (ValueError, EOFError, TypeError) as exc:
        raise OSError(f"a parallel worker's answer is unreadable: {exc}") from None
    read = 0
    for st, n in loaded:
        agg.merge(st)
        read += n
    return read


def aggregate_file(path: str, lf: LogFormat, window_s: int | None = 900,
                   since: int | None = None, until: int | None = None,
                   workers: int | None = None, native: Any = None) -> dict[str, Any]:
    """Aggregate the window of a log file where it lies (this runs on the box).

    A window of more than ``PARALLEL_MIN_BYTES`` per worker is cut into ranges read
    by forked workers (``workers``; None: ``default_workers()``), whose states are merged:
    the result is the same as one reader's (except which rare routes fold into "(other)"
    when a range sees more than ``MAX_ROUTES`` routes). ``native``: see ``Aggregator``.
    """
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - 262144))
        last = last_time(lf, fh.read()) if lf.time_var else None
        start_t, end_t = window_bounds(last, window_s, since, until)
        if not lf.time_var:
            start_t = end_t = None
        offset = seek_time(fh, lf, size, start_t - SLACK_S) if start_t is not None else 0
        agg = Aggregator(lf, start_t, end_t, native)
        parts = min(workers or default_workers(), (size - offset) // PARALLEL_MIN_BYTES)
        cuts = split_ranges(fh, offset, size, parts) if parts > 1 and hasattr(os, "fork") else []
        read, used = -1, 1
        if len(cuts) > 2:
            try:
                read, used = aggregate_parallel(path, agg, cuts), len(cuts) - 1
            except OSError:
                agg = Aggregator(lf, start_t, end_t, native)  # start again, in this process
        if read < 0:
            read = aggregate_stream(fh, agg, offset)
    out = agg.result()
    out["file_bytes"] = size
    out["bytes_scanned"] = read
    out["workers"] = used
    out["parser"] = "c" if agg.native_stream is not None else "python"
    return out
