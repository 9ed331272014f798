"""`inferfit check` over many targets: options, the run, the fleet summary table.

``inferfit.cli.check`` hands over here when it gets more than one TARGET or
any fleet option; the single-target path stays in check.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from inferfit.cli import EXIT_UNKNOWN
from inferfit.cli.common import config_error, load_config, ssh_options
from inferfit.cli.size import SizingStep
from inferfit.config import ConfigError
from inferfit.findings import Findings
from inferfit.fleet import (
    DEFAULT_MAX_PARALLEL,
    SUMMARY_COLUMNS,
    HostOutcome,
    SummaryRow,
    fleet_exit_code,
    run_fleet,
    summary_row,
)
from inferfit.hosts import Host
from inferfit.inventory import (
    FleetTarget,
    InventoryError,
    hosts_from_ssh_config,
    load_inventory,
    targets_from_args,
)
from inferfit.manager import Registry, make_plugin_manager
from inferfit.runner import UnknownProbeError, select_probes

STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "error": "magenta",
                "skipped": "dim", "unreachable": "bold magenta"}
_FLEET_DESTS = ("hosts_from_ssh_config", "inventory", "export_dir", "max_parallel", "limit")


def add_fleet_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "fleet (several TARGETs or any of these options: check the boxes in parallel)")
    g.add_argument("--hosts-from-ssh-config", metavar="PATTERN",
                   help="every Host alias of the ssh config (-F FILE or ~/.ssh/config) matching "
                   "PATTERN (ssh patterns: *, ?, commas, !negation), e.g. 'gpu-*'")
    g.add_argument("--inventory", metavar="FILE",
                   help="an Ansible inventory (INI or YAML): hosts, groups, ansible_host, "
                   "ansible_port, ansible_user, ansible_ssh_private_key_file")
    g.add_argument("--limit", metavar="PATTERN",
                   help="only inventory hosts or groups matching PATTERN")
    g.add_argument("--export-dir", metavar="DIR",
                   help="write one findings file per box to DIR/<host>.toml (boxes that could "
                   "not be checked get a file with the reason)")
    g.add_argument("--max-parallel", type=int, metavar="N",
                   help=f"boxes checked at once (default fleet.max_parallel, "
                   f"{DEFAULT_MAX_PARALLEL})")


def fleet_requested(args: argparse.Namespace) -> bool:
    targets = getattr(args, "target", None) or []
    return len(targets) > 1 or any(getattr(args, d, None) is not None for d in _FLEET_DESTS)


def collect_targets(args: argparse.Namespace) -> list[FleetTarget]:
    targets: list[FleetTarget] = list(targets_from_args(args.target or []))
    if args.hosts_from_ssh_config is not None:
        path = args.ssh_config or str(Path.home() / ".ssh" / "config")
        found = hosts_from_ssh_config(path, args.hosts_from_ssh_config)
        if not found:
            raise InventoryError(f"{path}: no Host alias matches {args.hosts_from_ssh_config!r}")
        targets.extend(found)
    if args.inventory is not None:
        found = load_inventory(args.inventory, args.limit)
        if not found:
            why = f" matching --limit {args.limit!r}" if args.limit else ""
            raise InventoryError(f"{args.inventory}: no hosts{why}")
        targets.extend(found)
    unique: dict[str, FleetTarget] = {}
    for t in targets:
        unique.setdefault(t.name, t)
    return list(unique.values())


def run(args: argparse.Namespace) -> int:
    """`inferfit check` in fleet mode; returns the worst box's exit code."""
    if getattr(args, "export", None):
        print("inferfit: --export writes one file; with several boxes use --export-dir DIR",
              file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        config = load_config(args)
    except ConfigError as exc:
        return config_error(exc)
    pm = make_plugin_manager()
    registry = Registry.collect(pm)
    try:
        probes = select_probes(registry.probes, args.probe, config)
        targets = collect_targets(args)
        sizing = SizingStep.load(getattr(args, "workload", None))
    except (UnknownProbeError, InventoryError, ValueError) as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN

    async def size_box(host: Host, findings: Findings) -> None:
        if sizing.workload is None:
            return
        step = SizingStep(sizing.workload)  # per box: on_host reads its hf_config
        await step.on_host(host)
        step.apply(pm, findings)
    if not targets:
        print("inferfit: no targets: name boxes, or use --inventory / --hosts-from-ssh-config",
              file=sys.stderr)
        return EXIT_UNKNOWN
    max_parallel = args.max_parallel or int(config.get("fleet.max_parallel",
                                                       DEFAULT_MAX_PARALLEL))
    if max_parallel < 1:
        print("inferfit: --max-parallel must be at least 1", file=sys.stderr)
        return EXIT_UNKNOWN
    export_dir = Path(args.export_dir).expanduser() if args.export_dir else None
    quiet = bool(args.quiet)

    def on_done(outcome: HostOutcome, done: int, total: int) -> None:
        if quiet:
            return
        row = summary_row(outcome.findings)
        what = f"could not check: {row.reason}" if row.status == "unreachable" else row.status
        print(f"inferfit: [{done}/{total}] {outcome.target.name}: {what} "
              f"({outcome.duration_s:.1f} s)", file=sys.stderr)
        for problem in (outcome.write_error, outcome.note):
            if problem:
                print(f"inferfit: {outcome.target.name}: {problem}", file=sys.stderr)

    outcomes = asyncio.run(run_fleet(
        targets, probes, config, ssh_options(args, config), max_parallel=max_parallel,
        export_dir=export_dir, selected=bool(args.probe), on_done=on_done,
        after_check=size_box,
    ))
    rows = [summary_row(o.findings) for o in outcomes]
    code = fleet_exit_code(outcomes)
    if args.json:
        doc = {"exit_code": code, "hosts": [
            {**r.as_dict(), "exit_code": o.exit_code,
             **({"file": str(o.path)} if o.path else {}),
             **({"write_error": o.write_error} if o.write_error else {})}
            for r, o in zip(rows, outcomes, strict=True)
        ]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print_fleet_summary(rows)
        if export_dir is not None:
            written = sum(1 for o in outcomes if o.path)
            print(f"{written} findings files in {export_dir}")
    return code


def fleet_table(rows: Sequence[SummaryRow], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, expand=False)
    for col in SUMMARY_COLUMNS:
        table.add_column(col, overflow="fold")
    for r in rows:
        style = STATUS_STYLE.get(r.status, "")
        table.add_row(escape(r.host), f"[{style}]{r.status}[/]", escape(r.gpu), escape(r.disk),
                      escape(r.worst_p95), escape(r.verdict))
    return table


def tally(rows: Sequence[SummaryRow]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    order = ("ok", "warn", "fail", "error", "skipped", "unreachable")
    parts = [f"{counts[s]} {s}" for s in order if counts.get(s)]
    return f"{len(rows)} boxes: " + ", ".join(parts)


def print_fleet_summary(rows: Sequence[SummaryRow], console: Console | None = None) -> None:
    console = console or Console(soft_wrap=False)
    console.print(fleet_table(rows))
    for r in rows:
        if r.reason:
            label = "could not check" if r.status == "unreachable" else r.status
            console.print(f"  {r.host}: {label}: {r.reason}", markup=False, highlight=False)
    console.print(tally(rows), markup=False, highlight=False)
