"""Pure parsers for fio's JSON output, every generation, and its failure modes.

- fio 3.x (3.6 and later): ``bw`` KiB/s, ``bw_bytes`` B/s, ``io_bytes`` bytes,
  latencies in ``*_ns`` tables.
- older fio 3.x (3.0-3.5): the same without ``bw_bytes`` (use ``bw`` x 1024).
- fio 2.x: ``io_bytes`` in KiB, ``bw`` KiB/s, latencies in µs (``clat``, ``lat``).

fio may print lines (``note: ...``, ``fio: ...``) before the JSON, prints one
complete JSON document per ``--status-interval`` tick, and a failed run can
print a complete zero-filled JSON and exit 1. Nothing here runs a command.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Percentiles the disk probe reports (fio's default list contains all of them).
PERCENTILES: tuple[float, ...] = (50.0, 95.0, 99.0, 99.9)

# Markers printed by the disk probe's remote wrapper around fio.
MARK_EXIT = "@@inferfit-fio-exit "
MARK_STDERR = "@@inferfit-fio-stderr"
MARK_END = "@@inferfit-end"


class FioParseError(ValueError):
    """Output that is not fio JSON; the message says what was wrong."""


@dataclass(frozen=True)
class FioLatency:
    """Completion latency of one direction, in microseconds."""

    mean_us: float | None = None
    percentiles_us: Mapping[float, float] = field(default_factory=dict)

    def pct(self, p: float) -> float | None:
        for key, value in self.percentiles_us.items():
            if abs(key - p) < 1e-6:
                return value
        return None


@dataclass(frozen=True)
class FioDirection:
    """The read (or write) half of one fio job, in plain units."""

    io_bytes: int = 0
    bw_bytes_s: float = 0.0
    iops: float = 0.0
    runtime_ms: int = 0
    total_ios: int = 0
    clat: FioLatency = field(default_factory=FioLatency)

    @property
    def mib_s(self) -> float:
        return self.bw_bytes_s / 1048576


@dataclass(frozen=True)
class FioJob:
    name: str
    groupid: int
    error: int
    elapsed_s: int
    finished: bool
    read: FioDirection
    write: FioDirection

    @property
    def io_bytes(self) -> int:
        return self.read.io_bytes + self.write.io_bytes

    @property
    def runtime_ms(self) -> int:
        return max(self.read.runtime_ms, self.write.runtime_ms)


@dataclass(frozen=True)
class FioReport:
    version: str  # e.g. "fio-3.33"; "" when fio did not say
    generation: str  # "3.x" | "3.x-old" | "2.x"
    jobs: tuple[FioJob, ...]
    disk_util: tuple[tuple[str, float], ...] = ()  # (device, util %)
    preamble: tuple[str, ...] = ()  # non-JSON lines printed before the JSON

    def job(self, name: str) -> FioJob | None:
        for job in self.jobs:
            if job.name == name:
                return job
        return None

    @property
    def finished(self) -> bool:
        return bool(self.jobs) and all(j.finished for j in self.jobs)

    @property
    def io_bytes(self) -> int:
        return sum(j.io_bytes for j in self.jobs)


# -- numbers -------------------------------------------------------------------


def _num(value: Any) -> float:
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return 0.0


def _major(version: str) -> int | None:
    m = re.search(r"(\d+)\.(\d+)", version)
    return int(m.group(1)) if m else None


def _percentiles(table: Mapping[str, Any], scale: float) -> dict[float, float]:
    out: dict[float, float] = {}
    pct = table.get("percentile")
    if isinstance(pct, Mapping):
        for key, value in pct.items():
            try:
                p = float(key)
            except ValueError:
                continue
            if p <= 0:  # fio 3.1 adds a "0.00": 0 sentinel
                continue
            out[p] = _num(value) * scale
    bins = table.get("bins")
    if isinstance(bins, Mapping) and bins and scale < 1.0:  # json+ bins (ns keys, 3.x only)
        for p in PERCENTILES:
            if not any(abs(k - p) < 1e-6 for k in out):
                value = percentile_from_bins(bins, p)
                if value is not None:
                    out[p] = value * scale
    return out


def percentile_from_bins(bins: Mapping[str, Any], p: float) -> float | None:
    """The p-th percentile (in the bins' unit) of a json+ histogram {value: count}."""
    points: list[tuple[float, float]] = []
    for key, count in bins.items():
        try:
            points.append((float(key), _num(count)))
        except ValueError:
            continue
    total = sum(c for _, c in points)
    if total <= 0:
        return None
    points.sort()
    need = p / 100.0 * total
    seen = 0.0
    for value, count in points:
        seen += count
        if seen >= need:
            return value
    return points[-1][0]


def _latency(direction: Mapping[str, Any]) -> FioLatency:
    """clat in µs from ``clat_ns`` (3.x), ``clat_us`` (some 3.x) or ``clat`` (2.x, µs)."""
    for key, scale in (("clat_ns", 1e-3), ("clat_us", 1.0), ("clat", 1.0)):
        table = direction.get(key)
        if isinstance(table, Mapping):
            n = table.get("N")
            mean = _num(table.get("mean")) * scale
            empty = (n is not None and _num(n) == 0) or (mean == 0 and _num(table.get("max")) == 0)
            return FioLatency(
                mean_us=None if empty else mean,
                percentiles_us={} if empty else _percentiles(table, scale),
            )
    return FioLatency()


def _direction(raw: Any, generation: str) -> FioDirection:
    if not isinstance(raw, Mapping):
        return FioDirection()
    io = _num(raw.get("io_bytes"))
    if generation == "2.x":
        io *= 1024  # fio 2.x: io_bytes is KiB
    # bw is KiB/s in every generation; bw_bytes (B/s) exists from fio 3.6 on.
    bw = _num(raw.get("bw_bytes")) if "bw_bytes" in raw else _num(raw.get("bw")) * 1024
    return FioDirection(
        io_bytes=int(io),
        bw_bytes_s=bw,
        iops=_num(raw.get("iops")),
        runtime_ms=int(_num(raw.get("runtime"))),
        total_ios=int(_num(raw.get("total_ios"))),
        clat=_latency(raw),
    )


def _generation(doc: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]]) -> str:
    version = str(doc.get("fio version", ""))
    major = _major(version)
    read = jobs[0].get("read", {}) if jobs else {}
    if not isinstance(read, Mapping):
        read = {}
    if major is not None and major < 3:
        return "2.x"
    if major is None and "clat" in read and "clat_ns" not in read and "io_kbytes" not in read:
        return "2.x"
    if "bw_bytes" in read:
        return "3.x"
    return "3.x-old"


def parse_report(doc: Any, preamble: Sequence[str] = ()) -> FioReport:
    """A decoded fio JSON document -> FioReport (raises FioParseError on another shape)."""
    if not isinstance(doc, Mapping):
        raise FioParseError("fio JSON is not an object")
    raw_jobs = doc.get("jobs")
    if not isinstance(raw_jobs, list):
        raise FioParseError("fio JSON has no 'jobs' list")
    jobs_in = [j for j in raw_jobs if isinstance(j, Mapping)]
    generation = _generation(doc, jobs_in)
    jobs = []
    for i, raw in enumerate(jobs_in):
        eta = _num(raw.get("eta"))
        jobs.append(FioJob(
            name=str(raw.get("jobname", f"job{i}")),
            groupid=int(_num(raw.get("groupid"))),
            error=int(_num(raw.get("error"))),
            elapsed_s=int(_num(raw.get("elapsed"))),
            finished=eta == 0,
            read=_direction(raw.get("read"), generation),
            write=_direction(raw.get("write"), generation),
        ))
    util = []
    for entry in doc.get("disk_util", []) if isinstance(doc.get("disk_util"), list) else []:
        if isinstance(entry, Mapping) and "name" in entry:
            util.append((str(entry["name"]), _num(entry.get("util"))))
    return FioReport(
        version=str(doc.get("fio version", "")),
        generation=generation,
        jobs=tuple(jobs),
        disk_util=tuple(util),
        preamble=tuple(preamble),
    )


def parse_fio_json(text: str) -> FioReport:
    """fio's stdout -> the last complete JSON report in it (lines before '{' are kept)."""
    docs, preamble = split_documents(text)
    if not docs:
        first = text.strip().splitlines()[:1]
        shown = f": {first[0][:160]!r}" if first else " (empty output)"
        raise FioParseError(f"fio printed no JSON report{shown}")
    return parse_report(docs[-1], preamble)


def split_documents(text: str) -> tuple[list[Any], list[str]]:
    """Every complete JSON document in ``text`` and the non-JSON lines between them."""
    decoder = json.JSONDecoder()
    docs: list[Any] = []
    other: list[str] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            other.extend(_lines(text[pos:]))
            break
        other.extend(_lines(text[pos:start]))
        try:
            doc, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            # Not JSON at this brace (a stray '{' in a message, or a truncated tail).
            line_end = text.find("\n", start)
            other.extend(_lines(text[start: line_end if line_end >= 0 else len(text)]))
            if line_end < 0:
                break
            pos = line_end + 1
            continue
        docs.append(doc)
        pos = end
    return docs, other


def _lines(chunk: str) -> list[str]:
    return [ln.strip() for ln in chunk.splitlines() if ln.strip()]


# -- the live stream from the remote wrapper -----------------------------------


class FioStream:
    """Feeds the wrapper's stdout line by line: status documents, exit code, stderr.

    fio with ``--status-interval`` prints a whole JSON document per tick; each
    starts with a ``{`` line and ends with a ``}`` line at column 0.
    """

    def __init__(self) -> None:
        self.reports: int = 0
        self.last: FioReport | None = None
        self.preamble: list[str] = []
        self.stderr: list[str] = []
        self.exit_code: int | None = None
        self.ended = False
        self._buf: list[str] | None = None
        self._in_stderr = False
        self.parse_errors: list[str] = []

    def feed(self, line: str) -> FioReport | None:
        """One stdout line; returns a report when a document just completed."""
        if line.startswith(MARK_EXIT):
            self._flush_tail()
            try:
                self.exit_code = int(line[len(MARK_EXIT):].strip())
            except ValueError:
                self.exit_code = None
            return None
        if line == MARK_STDERR:
            self._in_stderr = True
            return None
        if line == MARK_END:
            self._in_stderr = False
            self.ended = True
            return None
        if self._in_stderr:
            if line.strip():
                self.stderr.append(line.rstrip())
            return None
        if self._buf is None:
            if line.startswith("{"):
                self._buf = [line]
                return self._try_close(line)
            if line.strip():
                self.preamble.append(line.strip())
            return None
        self._buf.append(line)
        return self._try_close(line)

    def _try_close(self, line: str) -> FioReport | None:
        if self._buf is None or not line.rstrip().endswith("}"):
            return None
        if line[:1] in (" ", "\t") and len(self._buf) > 1:
            return None  # a nested object closed, not the document
        text = "\n".join(self._buf)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            # A stray message line inside the document: retry without non-JSON-looking lines.
            kept = [ln for ln in self._buf if not re.match(r"^(fio|note|[\w-]+):\s", ln)]
            try:
                doc = json.loads("\n".join(kept))
            except json.JSONDecodeError:
                return None  # keep reading; maybe the document is not over yet
        self._buf = None
        try:
            report = parse_report(doc, self.preamble)
        except FioParseError as exc:
            self.parse_errors.append(str(exc))
            return None
        self.reports += 1
        self.last = report
        return report

    def _flush_tail(self) -> None:
        if self._buf is not None:
            docs, other = split_documents("\n".join(self._buf))
            self._buf = None
            self.preamble.extend(other)
            for doc in docs:
                try:
                    self.last = parse_report(doc, self.preamble)
                    self.reports += 1
                except FioParseError as exc:
                    self.parse_errors.append(str(exc))

    def finish(self) -> None:
        self._flush_tail()


# -- what went wrong -----------------------------------------------------------


@dataclass(frozen=True)
class FioFailure:
    kind: str  # error_kind in findings
    message: str
    fix: str = ""


_ODIRECT = re.compile(r"does not support direct=1|O_DIRECT", re.I)
_ENGINE = re.compile(r"engine (\S+) not loadable|failed to load engine", re.I)


def _first_error_line(lines: Sequence[str]) -> str:
    """The line of fio's stderr that best says what went wrong."""
    cleaned = [ln.strip() for ln in lines if ln.strip()]
    for pattern in (r"error=", r"^fio: ", r"."):
        for ln in cleaned:
            if re.search(pattern, ln):
                return ln.removeprefix("fio: ")[:240]
    return ""


def classify(
    report: FioReport | None,
    exit_code: int | None,
    stderr: Sequence[str] = (),
    stdout_extra: Sequence[str] = (),
) -> FioFailure | None:
    """None when the run measured something; else what failed, in words a user can act on."""
    lines = [*stderr, *stdout_extra]
    text = "\n".join(lines)
    if exit_code == 127:
        return FioFailure("fio_missing", "fio is not installed on the box",
                          "install fio (see the probe's summary for the command)")
    if _ODIRECT.search(text):
        return FioFailure(
            "odirect_refused",
            "the filesystem refused O_DIRECT (direct=1)",
            "none needed: the probe reruns buffered and says the figure includes page cache",
        )
    engine = _ENGINE.search(text)
    if engine:
        name = engine.group(1) or "the I/O engine"
        return FioFailure(
            "fio_engine",
            f"fio could not load {name}: {_first_error_line(lines)}",
            "set probes.disk.ioengine to one the box supports (libaio, io_uring or psync)",
        )
    if "read-only mode" in text:
        return FioFailure("fio_readonly", f"fio refused to write: {_first_error_line(lines)}",
                          "this is a bug in the disk probe; please report it")
    if re.search(r"permission denied|EACCES|error=13\b", text, re.I):
        return FioFailure("permission_denied", f"fio: {_first_error_line(lines)}",
                          "make the files readable by the SSH user, or connect as a user who can")
    if re.search(r"no space left|ENOSPC|error=28\b", text, re.I):
        return FioFailure("no_space", f"fio: {_first_error_line(lines)}",
                          "free space on the target filesystem or lower probes.disk.size")
    if "blocksize is larger than data set" in text:
        return FioFailure("file_too_small", f"fio: {_first_error_line(lines)}",
                          "point probes.disk.model_path at larger files")
    job_errors = [j for j in (report.jobs if report else ()) if j.error]
    if job_errors:
        j = job_errors[0]
        why = _first_error_line(lines) or os.strerror(j.error)
        return FioFailure(
            "fio_failed",
            f"fio job {j.name!r} failed with error {j.error} ({os.strerror(j.error)}): {why}",
            "fix the cause fio names above, then rerun",
        )
    if exit_code not in (0, None):
        why = _first_error_line(lines)
        measured = " and measured nothing" if not report or report.io_bytes == 0 else ""
        return FioFailure(
            "fio_failed",
            f"fio exited {exit_code}{measured}" + (f": {why}" if why else " (no error text)"),
            "fix the cause fio names above, then rerun",
        )
    if report is None:
        why = _first_error_line(lines)
        return FioFailure("fio_no_json", "fio printed no JSON report" + (f": {why}" if why else ""),
                          "run the same fio command on the box by hand to see what it prints")
    if report.io_bytes == 0:
        return FioFailure("fio_no_io", "fio finished but read or wrote nothing",
                          "check that the target files are not empty and runtime_s is above 0")
    return None


def parse_captured(stdout: str, stderr: str, exit_code: int) -> tuple[FioReport | None,
                                                                       FioFailure | None]:
    """A finished fio run (stdout, stderr, exit status) -> its report and failure, if any."""
    try:
        report: FioReport | None = parse_fio_json(stdout)
    except FioParseError:
        report = None
    extra = list(report.preamble) if report else _lines(stdout)
    return report, classify(report, exit_code, stderr.splitlines(), extra)
