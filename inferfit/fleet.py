"""Fleet mode: the same check on many boxes at once, with bounded concurrency.

Each box goes through ``inferfit.runner.run_check`` exactly as a single
``inferfit check`` would; a box that cannot be reached or crashes becomes a
findings document with one ``connect`` result in status ``error`` (its reason
and fix), so it is reported, exported and compared like any other box and
never stops the others.

The summary helpers here read only findings, so the same table comes out of a
live fleet run and out of a directory of collected findings files.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import getpass
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferfit.api import Probe, Progress
from inferfit.config import Config
from inferfit.findings import Findings, FindingsError, ProbeResult, Status, Target
from inferfit.hosts import SSHOptions, make_host
from inferfit.hosts.base import Host, HostError, Transport
from inferfit.inventory import FleetTarget
from inferfit.runner import run_check
from inferfit.sshslice import ConfigSlicer

DEFAULT_MAX_PARALLEL = 32
# The pseudo-probe that records why a box could not be checked at all.
CONNECT = "connect"
EXIT_BY_STATUS: dict[str, int] = {"ok": 0, "skipped": 0, "warn": 1, "fail": 2, "error": 3}
EXIT_UNREACHABLE = 3


@dataclass
class HostOutcome:
    """What happened on one box of the fleet."""

    target: FleetTarget
    findings: Findings
    duration_s: float
    path: Path | None = None
    write_error: str | None = None
    note: str | None = None  # e.g. sizing failed after a good check

    @property
    def reachable(self) -> bool:
        return not is_unreachable(self.findings)

    @property
    def exit_code(self) -> int:
        if not self.reachable or self.write_error:
            return EXIT_UNREACHABLE
        return EXIT_BY_STATUS[self.findings.status]


def is_unreachable(findings: Findings) -> bool:
    """True for the findings of a box that could not be checked at all."""
    connect = findings.probes.get(CONNECT)
    return connect is not None and connect.status == "error"


def unreachable_findings(target: FleetTarget, address: str, transport: str,
                         exc: BaseException, duration_s: float) -> Findings:
    if isinstance(exc, HostError):
        result = ProbeResult.error(CONNECT, exc.message, kind=exc.kind, fix=exc.fix,
                                   duration_s=duration_s)
    else:
        result = ProbeResult.error(
            CONNECT, f"check crashed: {type(exc).__name__}: {exc}", kind="check_crashed",
            fix="this is a bug in inferfit; please report it with this message",
            duration_s=duration_s,
        )
    kind: Transport = "local" if transport == "local" else "ssh"
    return Findings(target=Target(target.name, address, kind), probes={CONNECT: result})


_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


def file_stem(name: str) -> str:
    """A findings file name for a host: path separators and odd characters become '_'."""
    stem = _UNSAFE.sub("_", name).strip("._") or "host"
    return stem[:120]


def unique_stems(targets: Sequence[FleetTarget]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for t in targets:
        stem = file_stem(t.name)
        n = seen.get(stem, 0) + 1
        seen[stem] = n
        out.append(stem if n == 1 else f"{stem}-{n}")
    return out


async def run_fleet(
    targets: Sequence[FleetTarget],
    probes: Sequence[Probe],
    config: Config,
    ssh_options: SSHOptions,
    *,
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    export_dir: Path | None = None,
    selected: bool = False,
    on_done: Callable[[HostOutcome, int, int], None] | None = None,
    progress: Callable[[str, Progress], None] | None = None,
    after_check: Callable[[Host, Findings], Awaitable[None]] | None = None,
) -> list[HostOutcome]:
    """Check every target, at most ``max_parallel`` at a time; never raises for one box.

    ``after_check(host, findings)`` runs on a reachable box before its connection
    closes and its findings are written (e.g. sizing adds [sizing]); if it raises,
    the box keeps its findings and ``outcome.note`` says what went wrong.
    ``on_done(outcome, done, total)`` reports each box.
    Outcomes come back in the order of ``targets``.
    """
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    _prime_local_user()
    default_cfg = Path.home() / ".ssh" / "config"
    slicer = ConfigSlicer(ssh_options.config_file
                          or (str(default_cfg) if default_cfg.is_file() else None))
    gate = asyncio.Semaphore(max_parallel)
    stems = unique_stems(targets)
    done = 0

    async def one(target: FleetTarget, stem: str) -> HostOutcome:
        nonlocal done
        options = ssh_options
        if slicer.path is not None:
            options = dataclasses.replace(options, config_file=slicer.config_for(target.host))
        async with gate:
            outcome = await _check_one(target, probes, config, options, selected,
                                       progress, after_check)
        if export_dir is not None:
            path = export_dir / f"{stem}.toml"
            try:
                outcome.path = await asyncio.to_thread(outcome.findings.write, path)
            except (OSError, FindingsError, ValueError) as exc:
                outcome.write_error = f"cannot write {path}: {exc}"
        done += 1
        if on_done is not None:
            on_done(outcome, done, len(targets))
        return outcome

    try:
        return list(await asyncio.gather(
            *(one(t, s) for t, s in zip(targets, stems, strict=True))))
    finally:
        slicer.close()


def _prime_local_user() -> None:
    """asyncssh asks getpass.getuser() per connection; without USER/LOGNAME in the
    environment that is a passwd lookup each time (milliseconds on some systems)."""
    if not any(os.environ.get(v) for v in ("LOGNAME", "USER", "LNAME", "USERNAME")):
        with contextlib.suppress(Exception):
            os.environ["LOGNAME"] = getpass.getuser()


async def _check_one(
    target: FleetTarget,
    probes: Sequence[Probe],
    config: Config,
    ssh_options: SSHOptions,
    selected: bool,
    progress: Callable[[str, Progress], None] | None,
    after_check: Callable[[Host, Findings], Awaitable[None]] | None,
) -> HostOutcome:
    started = time.monotonic()
    options = ssh_options
    if target.identity_file:
        options = dataclasses.replace(ssh_options, identity_file=target.identity_file)
    address = target.target or "localhost"
    transport = "local" if target.target is None else "ssh"
    try:
        host = make_host(target.target, options)
    except ValueError as exc:
        err = HostError(f"bad target {address!r}: {exc}", fix="fix the target or inventory entry")
        return HostOutcome(target, unreachable_findings(target, address, transport, err, 0.0), 0.0)
    host.name = target.name

    def report(p: Progress) -> None:
        if progress is not None:
            progress(target.name, p)

    note: str | None = None
    try:
        try:
            findings = await run_check(host, probes, config, report, selected=selected)
            if after_check is not None:
                try:
                    await after_check(host, findings)
                except Exception as exc:  # the box was checked; keep its findings
                    note = f"after the check: {type(exc).__name__}: {exc}"
        finally:
            await host.close()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # one box's failure never stops the others
        elapsed = time.monotonic() - started
        return HostOutcome(
            target, unreachable_findings(target, host.address, transport, exc, elapsed), elapsed
        )
    return HostOutcome(target, findings, time.monotonic() - started, note=note)


def fleet_exit_code(outcomes: Iterable[HostOutcome]) -> int:
    """The worst box's exit code (0 ok, 1 warn, 2 fail, 3 could not check)."""
    return max((o.exit_code for o in outcomes), default=0)


# -- the summary table (reads findings only) ------------------------------------

@dataclass(frozen=True)
class SummaryRow:
    host: str
    status: str  # ok | warn | fail | error | skipped | unreachable
    gpu: str
    disk: str
    worst_p95: str
    verdict: str
    reason: str = ""

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


SUMMARY_COLUMNS = ("host", "status", "GPU", "disk", "worst region p95", "verdict")
_VERDICT_BY_STATUS = {"ok": "fit", "skipped": "fit", "warn": "review", "fail": "unfit",
                      "error": "incomplete"}


def _probe(findings: Findings, name: str) -> ProbeResult | None:
    return findings.probes.get(name)


def gpu_text(findings: Findings) -> str:
    gpu = _probe(findings, "gpu")
    if gpu is None:
        return "-"
    if gpu.status == "skipped":
        return "none"
    devices = gpu.values.get("devices")
    if isinstance(devices, list) and devices:
        names: dict[str, int] = {}
        for d in devices:
            label = str(d.get("name", "GPU")) if isinstance(d, Mapping) else "GPU"
            names[label] = names.get(label, 0) + 1
        return ", ".join(f"{n}× {label}" for label, n in names.items())
    if gpu.status == "error":
        return f"error ({gpu.error_kind or 'unknown'})"
    return gpu.summary[:40] or "-"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def disk_text(findings: Findings) -> str:
    disk = _probe(findings, "disk")
    if disk is not None:
        seq = _num(disk.values.get("seq_read_mib_s"))
        if seq is not None:
            return f"{seq:,.0f} MiB/s read"
        if disk.status == "error":
            return f"error ({disk.error_kind or 'unknown'})"
    system = _probe(findings, "system")
    if system is not None:
        frees = [
            f for fs in system.values.get("filesystems", []) if isinstance(fs, Mapping)
            and (f := _num(fs.get("free_gib"))) is not None
        ]
        if frees:
            return f"{min(frees):,.0f} GiB free"
    return "-"


def worst_p95(findings: Findings) -> tuple[str, float] | None:
    """(region name, rtt p95 in ms) of the slowest region, when latency was measured."""
    latency = _probe(findings, "latency")
    if latency is None:
        return None
    worst: tuple[str, float] | None = None
    for region in latency.values.get("regions", []):
        if not isinstance(region, Mapping):
            continue
        p95 = _num(region.get("rtt_ms_p95"))
        if p95 is not None and (worst is None or p95 > worst[1]):
            worst = (str(region.get("name", "?")), p95)
    return worst


def summary_row(findings: Findings) -> SummaryRow:
    host = findings.target.name
    if is_unreachable(findings):
        connect = findings.probes[CONNECT]
        reason = connect.summary
        if connect.error_kind:
            reason = f"{connect.error_kind}: {reason}"
        return SummaryRow(host, "unreachable", "-", "-", "-", "unreachable", reason)
    status: Status = findings.status
    p95 = worst_p95(findings)
    sizing = findings.sizing or {}
    verdict = str(sizing.get("mode") or _VERDICT_BY_STATUS[status])
    reason = ""
    if status in ("fail", "error"):
        bad = [f"{n}: {r.summary}" for n, r in sorted(findings.probes.items())
               if r.status == status]
        reason = "; ".join(bad)[:200]
    return SummaryRow(
        host=host, status=status, gpu=gpu_text(findings), disk=disk_text(findings),
        worst_p95=f"{p95[0]} {p95[1]:g} ms" if p95 else "-", verdict=verdict, reason=reason,
    )


def summary_rows(findings: Iterable[Findings]) -> list[SummaryRow]:
    return [summary_row(f) for f in findings]


def load_findings_paths(
    paths: Sequence[str | Path],
) -> tuple[list[tuple[Path, Findings]], list[str]]:
    """Findings from files and directories (``*.toml`` and ``*.json`` directly inside).

    Returns (loaded, notes). A file named explicitly that cannot be read, or a
    directory without findings, raises FindingsError; inside a directory, files
    that are not findings are skipped with a note.
    """
    loaded: list[tuple[Path, Findings]] = []
    notes: list[str] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.is_dir():
            loaded.append((p, Findings.load(p)))
            continue
        files = sorted(f for f in p.iterdir()
                       if f.is_file() and f.suffix in (".toml", ".json")
                       and not f.name.startswith("."))
        count = 0
        for f in files:
            try:
                loaded.append((f, Findings.load(f)))
                count += 1
            except FindingsError as exc:
                notes.append(f"skipped {exc}")
        if not count:
            raise FindingsError(f"{p}: no findings files (*.toml, *.json) in this directory")
    return loaded, notes
