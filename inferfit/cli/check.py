"""`inferfit check`: run probes headless, print a summary, export findings."""

from __future__ import annotations

import argparse
import asyncio
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from inferfit.cli import EXIT_FAIL, EXIT_OK, EXIT_UNKNOWN, EXIT_WARN
from inferfit.cli.common import (
    add_config_option,
    add_ssh_options,
    config_error,
    export_findings,
    host_for,
    load_config,
    stderr_progress,
)
from inferfit.cli.fleet_mode import add_fleet_options, fleet_requested
from inferfit.cli.fleet_mode import run as run_fleet
from inferfit.cli.size import SizingStep, add_workload_option
from inferfit.config import ConfigError
from inferfit.findings import Findings, Status
from inferfit.hosts import HostError
from inferfit.manager import Registry, make_plugin_manager
from inferfit.runner import UnknownProbeError, run_check, select_probes

EXIT_BY_STATUS: dict[Status, int] = {
    "ok": EXIT_OK, "skipped": EXIT_OK, "warn": EXIT_WARN, "fail": EXIT_FAIL, "error": EXIT_UNKNOWN,
}
STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "error": "magenta",
                "skipped": "dim"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="run the probes without a screen; exit 0 ok, 1 warn, 2 fail, 3 could not check",
        description="Run probes against TARGET (or the local machine), print a summary table "
        "on stdout, progress on stderr, and optionally export the findings. Exit codes: "
        "0 all ok, 1 a warning, 2 a failure, 3 could not check (connection, auth, host key, "
        "a probe that could not run).",
    )
    p.add_argument("target", nargs="*", metavar="TARGET",
                   help="[user@]host[:port] or ssh-config alias; omit for the local machine; "
                   "several run in parallel (fleet mode)")
    p.add_argument("--probe", action="append", metavar="NAME",
                   help="run only this probe (repeatable); default: all")
    p.add_argument("--export", metavar="FILE",
                   help="write findings to FILE (TOML; .json for JSON), atomically")
    p.add_argument("--json", action="store_true", help="print the findings as JSON on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_config_option(p)
    add_ssh_options(p)
    add_fleet_options(p)
    add_workload_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if fleet_requested(args):
        return run_fleet(args)
    target = args.target[0] if args.target else None
    try:
        config = load_config(args)
    except ConfigError as exc:
        return config_error(exc)
    try:
        sizing = SizingStep.load(getattr(args, "workload", None))
    except ValueError as exc:  # WorkloadError: names the file and key
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    pm = make_plugin_manager()
    registry = Registry.collect(pm)
    try:
        probes = select_probes(registry.probes, args.probe, config)
    except UnknownProbeError as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        host = host_for(target, args, config)
    except ValueError as exc:
        print(f"inferfit: bad target {target!r}: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    progress = stderr_progress(host.name, args.quiet)

    async def go() -> Findings:
        try:
            found = await run_check(host, probes, config, progress, selected=bool(args.probe))
            await sizing.on_host(host)  # reads the workload's hf_config on the box
            return found
        finally:
            await host.close()

    try:
        findings = asyncio.run(go())
    except HostError as exc:
        print(f"inferfit: {host.address}: could not check: {exc.message}", file=sys.stderr)
        if exc.fix:
            print(f"inferfit: fix: {exc.fix}", file=sys.stderr)
        return EXIT_UNKNOWN
    sizing.apply(pm, findings)  # adds [sizing] when --workload is given
    if args.export and not export_findings(findings, args.export):
        return EXIT_UNKNOWN
    if args.json:
        sys.stdout.write(findings.to_json())
    else:
        print_summary(findings)
        sizing.print()
    return EXIT_BY_STATUS[findings.status]


def print_summary(findings: Findings, console: Console | None = None) -> None:
    console = console or Console(soft_wrap=False)
    t = findings.target
    console.print(f"[bold]{escape(t.name)}[/] ({t.transport} {escape(t.address)}) — overall: "
                  f"[{STATUS_STYLE[findings.status]}]{findings.status}[/]")
    table = Table(show_lines=False, expand=False)
    table.add_column("probe")
    table.add_column("status")
    table.add_column("summary", overflow="fold")
    table.add_column("time", justify="right")
    for name, r in sorted(findings.probes.items()):
        # summaries quote config syntax such as [[regions]]: never markup
        table.add_row(name, f"[{STATUS_STYLE[r.status]}]{r.status}[/]", escape(r.summary),
                      f"{r.duration_s:.1f}s")
    console.print(table)
    for name, r in sorted(findings.probes.items()):
        for note in r.notes:
            console.print(f"  {name}: {note}", markup=False, highlight=False)
        if r.fix:
            console.print(f"  {name}: fix: {r.fix}", markup=False, highlight=False)
