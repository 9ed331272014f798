"""`inferfit export`: render findings files through an exporter (JUnit, Prometheus, ...)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inferfit.findings import FindingsError, write_atomic
from inferfit.fleet import load_findings_paths
from inferfit.manager import Registry, make_plugin_manager


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="render findings as JSON, JUnit XML, Prometheus text or Markdown",
        description="Render findings files (or directories of them) with an exporter: json, "
        "junit (one test case per probe check, for CI), prometheus (text exposition for "
        "node_exporter's textfile collector), markdown (a report for a ticket); plugins "
        "may add more (`inferfit plugins` lists them). Writes to stdout, or atomically to "
        "-o FILE.",
    )
    p.add_argument("paths", nargs="+", metavar="FINDINGS",
                   help="findings files (.toml/.json) or directories of them")
    p.add_argument("--format", "-f", dest="format", required=True, metavar="NAME",
                   help="exporter name: json, junit, prometheus, markdown, ...")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    registry = Registry.collect(make_plugin_manager())
    exporter = registry.exporters.get(args.format)
    if exporter is None:
        print(f"inferfit: no exporter named {args.format!r}; available: "
              f"{', '.join(sorted(registry.exporters)) or 'none'}", file=sys.stderr)
        return 3
    try:
        loaded, notes = load_findings_paths(args.paths)
    except FindingsError as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return 3
    for note in notes:
        print(f"inferfit: {note}", file=sys.stderr)
    text = exporter.render([f for _p, f in loaded])
    if args.output:
        try:
            write_atomic(Path(args.output), text)
        except OSError as exc:
            print(f"inferfit: cannot write {args.output}: {exc}", file=sys.stderr)
            return 3
        print(f"inferfit: {exporter.name} written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
