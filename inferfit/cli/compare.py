"""`inferfit compare`: findings side by side; which box is the odd one out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from inferfit.cli.common import add_config_option, config_error, load_config
from inferfit.cli.fleet_mode import print_fleet_summary
from inferfit.compare import Comparison, Thresholds, compare, label_for
from inferfit.config import ConfigError
from inferfit.findings import Findings, FindingsError
from inferfit.fleet import load_findings_paths, summary_rows

EXIT_SAME, EXIT_DIFFERENT, EXIT_TROUBLE = 0, 1, 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="compare findings of several boxes side by side; highlight the odd one out",
        description="Compare findings files (or directories of them, e.g. an --export-dir or "
        "what the Ansible playbook fetched) key by key. Numbers count as the same within a "
        "tolerance (e.g. disk within 10 %%; see [compare] in the config); with --golden "
        "every box is measured against that one, otherwise against the value most boxes "
        "share. Exit 0 all the same, 1 differences found, 3 could not read the findings.",
    )
    p.add_argument("paths", nargs="+", metavar="FINDINGS",
                   help="findings files (.toml/.json) or directories of them")
    p.add_argument("--golden", metavar="FILE", help="the reference box's findings")
    p.add_argument("--tolerance", type=float, metavar="PCT",
                   help="default tolerance for numbers without a rule (percent)")
    p.add_argument("--only-diff", action="store_true", help="show only keys that differ")
    p.add_argument("--no-summary", action="store_true", help="skip the fleet summary table")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_config_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args)
    except ConfigError as exc:
        return config_error(exc)
    try:
        loaded, notes = load_findings_paths(args.paths)
        golden = Findings.load(args.golden) if args.golden else None
    except FindingsError as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_TROUBLE
    for note in notes:
        print(f"inferfit: {note}", file=sys.stderr)
    if golden is not None and args.golden:
        gpath = Path(args.golden).resolve()
        loaded = [(p, f) for p, f in loaded if p.resolve() != gpath]
    docs = ([golden] if golden is not None else []) + [f for _p, f in loaded]
    if len(docs) < 2:
        print("inferfit: compare needs at least two findings documents", file=sys.stderr)
        return EXIT_TROUBLE
    taken: set[str] = set()
    labels = [label_for(f, taken) for f in docs]
    if golden is not None:
        labels[0] = f"{labels[0]} (golden)"
    thresholds = Thresholds.from_config(config.get("compare"), args.tolerance)
    result = compare(docs, labels, golden=0 if golden is not None else None,
                     thresholds=thresholds)
    if args.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2, default=str) + "\n")
    else:
        console = Console(soft_wrap=False)
        if not args.no_summary:
            print_fleet_summary(summary_rows(docs), console)
        console.print(comparison_table(result, only_diff=args.only_diff))
        print_odd_ones(result, console)
    return EXIT_DIFFERENT if result.differing else EXIT_SAME


def comparison_table(result: Comparison, *, only_diff: bool = False) -> Table:
    ref = "golden box" if result.golden is not None else "most boxes"
    table = Table(title=f"differences from {ref} in [bold red]red[/]", expand=False)
    table.add_column("key", overflow="fold")
    for i, label in enumerate(result.labels):
        style = "bold cyan" if i == result.golden else ""
        table.add_column(escape(label), overflow="fold", header_style=style)
    for row in result.rows:
        if only_diff and not row.differs:
            continue
        tol = f" ±{row.tolerance_pct:g}%" if row.tolerance_pct else ""
        key = f"[bold]{escape(row.key)}[/]{tol}" if row.differs else f"{escape(row.key)}{tol}"
        cells = [escape(c.text) if c.same else f"[bold red]{escape(c.text)}[/]"
                 for c in row.cells]
        table.add_row(key, *cells)
    return table


def print_odd_ones(result: Comparison, console: Console) -> None:
    keys = result.odd_keys()
    odd = result.odd_ones()
    if not odd:
        console.print("all boxes are the same within the tolerances", highlight=False)
        return
    for label in odd:
        shown = ", ".join(keys[label][:6]) + (" …" if len(keys[label]) > 6 else "")
        console.print(f"odd one out: {label}: {len(keys[label])} keys differ ({shown})",
                      markup=False, highlight=False)
