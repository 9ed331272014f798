"""`inferfit show FILE [FILE ...]`: the console, read-only, on saved findings (replay)."""

from __future__ import annotations

import argparse
import sys

from inferfit.cli import EXIT_OK, EXIT_UNKNOWN
from inferfit.config import Config, ConfigError
from inferfit.findings import Findings, FindingsError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "show",
        help="open the console read-only on saved findings files",
        description="Replay saved findings (TOML, or .json) in the console: the same panels "
        "as a live run, nothing runs on any box. Several files open one tab each plus an "
        "overview. `e` exports a copy.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="findings file (TOML or .json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded: list[tuple[str, Findings]] = []
    for name in args.files:
        try:
            loaded.append((name, Findings.load(name)))
        except FindingsError as exc:
            print(f"inferfit: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
    try:
        config = Config.load()
    except ConfigError:
        config = Config()
    from inferfit.cli.console import console_registry
    from inferfit.tui.app import InferfitApp
    from inferfit.tui.target_view import TargetSpec

    _, registry = console_registry()
    specs = [TargetSpec(name=_tab_name(f, loaded), findings=f, panels=dict(registry.panels))
             for _, f in loaded]
    code = InferfitApp(specs, config).run()
    return EXIT_OK if code is None else int(code)


def _tab_name(findings: Findings, loaded: list[tuple[str, Findings]]) -> str:
    name = findings.target.name
    same = [f for _, f in loaded if f.target.name == name]
    if len(same) > 1:
        return f"{name} {findings.created:%m-%d %H:%M}"
    return name
