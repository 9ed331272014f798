"""`inferfit batch status|pause|throttle|resume|measure [TARGET]`: mixed mode without a screen.

Exit codes: 0 the batch is in the asked-for state (status: running); 1 it is
paused or partly paused (status), or only partly in the asked-for state;
2 refused (not configured, no such target, not permitted, no confirmation);
3 could not check (connection, config file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from inferfit.api import BatchState
from inferfit.cli import EXIT_FAIL, EXIT_OK, EXIT_UNKNOWN, EXIT_WARN
from inferfit.cli.common import (
    add_config_option,
    add_ssh_options,
    config_error,
    host_for,
    load_config,
    stderr_progress,
)
from inferfit.config import ConfigError
from inferfit.findings import Findings, FindingsError, Target
from inferfit.hosts import Host, HostError
from inferfit.manager import Registry, make_plugin_manager
from inferfit.plugins.batch_common import BatchRefused, ControllerState, describe_state
from inferfit.plugins.batch_session import BatchSession, controller_for
from inferfit.plugins.interference import measure_interference

T = TypeVar("T")
SELECTION_FLAGS = ("controller", "pattern", "pidfile", "cgroup", "unit", "container",
                   "lease_dir")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "batch",
        help="pause, throttle, resume or measure batch work on a box (mixed mode)",
        description="Control the batch work configured in [batch] on TARGET (or the local "
        "machine). Pausing is opt-in: it needs --yes or a typed confirmation, and always "
        "starts a lease on the box that resumes the batch after lease_s unless renewed. "
        "Exit codes: 0 in the asked-for state (status: running), 1 paused/partly paused "
        "(status) or only partly done, 2 refused, 3 could not check.",
    )
    actions = p.add_subparsers(dest="batch_action", metavar="ACTION", required=True)
    specs = (
        ("status", "show what the controller controls and its state, read from the box"),
        ("pause", "pause the batch (all workers, or --fraction) with a lease on the box"),
        ("throttle", "pause [batch] throttle_fraction of the workers (with a lease)"),
        ("resume", "resume the batch now and drop the lease"),
        ("measure", "A/B: realtime latency with batch on, off, on; records [mixed]"),
    )
    for name, help_text in specs:
        a = actions.add_parser(name, help=help_text, description=help_text)
        a.add_argument("target", nargs="?", metavar="TARGET",
                       help="[user@]host[:port] or ssh-config alias; omit for the local machine")
        a.add_argument("--json", action="store_true", help="print the state as JSON on stdout")
        for flag in SELECTION_FLAGS:
            a.add_argument(f"--{flag.replace('_', '-')}", dest=f"sel_{flag}", metavar="VALUE",
                           help=f"override [batch] {flag}")
        if name in ("pause", "throttle", "measure"):
            a.add_argument("--yes", "-y", action="store_true",
                           help="do not ask: pausing batch work on the box is intended")
            a.add_argument("--lease", type=float, metavar="SECONDS",
                           help="override [batch] lease_s")
        if name == "pause":
            a.add_argument("--fraction", type=float, metavar="F",
                           help="pause this fraction of the workers (0 < F <= 1; default 1)")
            a.add_argument("--hold", action="store_true",
                           help="stay in the foreground renewing the lease; resume on "
                           "Ctrl-C/SIGTERM (if this process dies, the lease resumes the batch)")
        if name == "measure":
            a.add_argument("--export", metavar="FILE",
                           help="write findings with [mixed] to FILE (merged into FILE when it "
                           "already holds findings)")
            a.add_argument("--url", help="override [batch] measure_url")
            a.add_argument("--requests", type=int, help="override [batch] measure_requests")
            a.add_argument("--concurrency", type=int,
                           help="override [batch] measure_concurrency")
        add_config_option(a)
        add_ssh_options(a)
    p.set_defaults(func=run)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {f"batch.{f}": getattr(args, f"sel_{f}", None)
                           for f in SELECTION_FLAGS}
    if getattr(args, "lease", None) is not None:
        out["batch.lease_s"] = args.lease
    return out


def _err(message: str) -> None:
    print(f"inferfit: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args, _overrides(args))
    except ConfigError as exc:
        return config_error(exc)
    options = dict(config.get("batch", {}) or {})
    registry = Registry.collect(make_plugin_manager())
    try:
        controller = controller_for(options, registry)
    except BatchRefused as exc:
        return _refused(exc)
    try:
        host = host_for(args.target, args, config)
    except ValueError as exc:
        _err(f"bad target {args.target!r}: {exc}")
        return EXIT_UNKNOWN
    session = BatchSession(host, controller, options)
    action = args.batch_action
    try:
        if action == "status":
            state = _run(host, session.refresh())
            return _report(state, args, EXIT_OK if state.state == "running" else
                           EXIT_WARN if state.state in ("paused", "partly_paused") else EXIT_FAIL)
        if action == "resume":
            state = _run(host, session.resume())
            return _report(state, args, EXIT_OK if state.state in ("running", "absent")
                           else EXIT_WARN)
        if action in ("pause", "throttle"):
            return _pause(args, host, session, action)
        return _measure(args, host, session, options, controller_name=controller.name)
    except BatchRefused as exc:
        return _refused(exc)
    except HostError as exc:
        _err(f"{host.address}: could not check: {exc.message}")
        if exc.fix:
            _err(f"fix: {exc.fix}")
        return EXIT_UNKNOWN


def _run(host: Host, coro: Awaitable[T]) -> T:
    async def go() -> T:
        try:
            return await coro
        finally:
            await host.close()

    return asyncio.run(go())


def _refused(exc: BatchRefused) -> int:
    _err(f"refused: {exc.message}")
    if exc.fix:
        _err(f"fix: {exc.fix}")
    return EXIT_FAIL


def _report(state: BatchState, args: argparse.Namespace, code: int) -> int:
    if getattr(args, "json", False):
        print(json.dumps(state_dict(state), indent=2))
    else:
        print(f"{state.controller}: {describe_state(state)}")
        if state.targets:
            print(f"  controls: {' '.join(state.targets)}")
        for note in getattr(state, "notes", ()):
            print(f"  note: {note}")
    return code


def state_dict(state: BatchState) -> dict[str, Any]:
    doc: dict[str, Any] = {"controller": state.controller, "state": state.state,
                           "targets": list(state.targets), "detail": state.detail}
    if isinstance(state, ControllerState):
        doc["paused_targets"] = list(state.paused_targets)
        doc["notes"] = list(state.notes)
        if state.lease is not None:
            doc["lease"] = {"expires_in_s": round(state.lease.remaining_s(), 1),
                            "watchdog_pid": state.lease.watchdog_pid,
                            "watchdog_alive": state.lease.watchdog_alive}
    return doc


def _confirm(args: argparse.Namespace, host: Host, session: BatchSession, what: str) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise BatchRefused(
            f"{what} on {host.name} is opt-in and there is no terminal to confirm it",
            kind="not_confirmed", fix="pass --yes to confirm",
        )
    state = _run(host, session.refresh())
    print(f"{state.controller}: {describe_state(state)}")
    print(f"  would {what}: {' '.join(state.targets) or 'nothing'}")
    print(f"  the box resumes it by itself after {session.opts.lease_s} s unless renewed")
    answer = input("Proceed? [y/N] ").strip().lower()
    return answer in ("y", "yes")


def _pause(args: argparse.Namespace, host: Host, session: BatchSession, action: str) -> int:
    fraction = (session.opts.throttle_fraction if action == "throttle"
                else args.fraction if args.fraction is not None else 1.0)
    what = "pause the batch" if fraction >= 1 else f"pause {fraction:.0%} of the batch"
    if not _confirm(args, host, session, what):
        _err("not confirmed; nothing was paused")
        return EXIT_FAIL
    if not getattr(args, "hold", False):
        state = _run(host, session.pause(fraction))
        want = "paused" if fraction >= 1 else "partly_paused"
        code = _report(state, args, EXIT_OK if state.state == want else EXIT_WARN)
        if not args.json:
            _err(f"the batch resumes by itself in {session.opts.lease_s} s "
                 "(run `inferfit batch resume` to resume now, or pause again to extend)")
        return code
    return asyncio.run(_hold(args, host, session, fraction))


async def _hold(args: argparse.Namespace, host: Host, session: BatchSession,
                fraction: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    try:
        state = await session.pause(fraction)
        _report(state, args, EXIT_OK)
        _err(f"holding the pause (renewing every {session.renew_every_s:g} s); "
             "Ctrl-C resumes")
        while not stop.is_set() and session.paused_by_us:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
        if not session.paused_by_us:
            _err(f"the pause ended on the box: {session.renew_error or 'resumed'}")
            return EXIT_WARN
        await session.close()
        final = session.state
        if final is not None:
            _report(final, args, EXIT_OK)
        return EXIT_OK if final is not None and final.state == "running" else EXIT_WARN
    finally:
        await session.close()
        await host.close()


def _measure(args: argparse.Namespace, host: Host, session: BatchSession,
             options: dict[str, Any], *, controller_name: str) -> int:
    if not _confirm(args, host, session, "pause the batch briefly for an A/B measurement"):
        _err("not confirmed; nothing was measured")
        return EXIT_FAIL
    progress: Callable[[Any], None] = stderr_progress(host.name)
    section = _run(host, measure_interference(
        host, session.controller, options, progress=progress, url=args.url,
        requests=args.requests, concurrency=args.concurrency))
    if args.export:
        try:
            path = write_mixed(Path(args.export), host, section)
        except (OSError, FindingsError) as exc:
            _err(f"cannot write {args.export}: {exc}")
            return EXIT_UNKNOWN
        _err(f"[mixed] written to {path}")
    if args.json:
        print(json.dumps(section, indent=2))
    else:
        print(f"{controller_name}: p95 {section.get('p95_ms_batch_on')} ms with batch, "
              f"{section.get('p95_ms_batch_off')} ms without "
              f"({section.get('interference_pct')} %); p99 {section.get('p99_ms_batch_on')} / "
              f"{section.get('p99_ms_batch_off')} ms; {section['samples']} samples")
    return EXIT_OK


def write_mixed(path: Path, host: Host, section: dict[str, Any]) -> Path:
    """Add [mixed] to the findings in ``path`` (or to new findings for ``host``)."""
    if path.exists():
        findings = Findings.load(path)
    else:
        findings = Findings(Target(host.name, host.address, host.transport))
    findings.sections["mixed"] = section
    return findings.write(path)
