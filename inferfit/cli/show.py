"""`inferfit show FILE [FILE ...]`: the console, read-only, on saved findings (replay).

``--compare [--golden G]`` opens straight on the compare screen (findings side by side).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from inferfit.cli import EXIT_OK, EXIT_UNKNOWN
from inferfit.config import Config, ConfigError
from inferfit.findings import Findings, FindingsError

if TYPE_CHECKING:
    from inferfit.tui.app import InferfitApp


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "show",
        help="open the console read-only on saved findings files",
        description="Replay saved findings (TOML, or .json) in the console: the same panels "
        "as a live run, nothing runs on any box. Several files open one tab each plus an "
        "overview. `e` exports a copy; `c` compares the files side by side. --compare opens "
        "straight on that compare screen (every finding key, one column per box, the odd "
        "box out on top; same-within-tolerance rules from [compare] in the config, as "
        "`inferfit compare`).",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="findings file (TOML or .json), or a directory of them")
    p.add_argument("--compare", action="store_true",
                   help="open on the compare screen (needs two or more findings)")
    p.add_argument("--golden", metavar="FILE",
                   help="the reference box's findings: first tab and first compare column")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        app = build_app(args)
    except (FindingsError, ValueError) as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    code = app.run()
    return EXIT_OK if code is None else int(code)


def build_app(args: argparse.Namespace) -> InferfitApp:
    """The replay console for ``args`` (raises FindingsError / ValueError on bad input)."""
    from inferfit.fleet import load_findings_paths

    loaded, notes = load_findings_paths(args.files)
    for note in notes:
        print(f"inferfit: {note}", file=sys.stderr)
    golden = getattr(args, "golden", None)
    if golden:
        gpath = Path(golden).expanduser()
        loaded = [(gpath, Findings.load(gpath))] + [
            (p, f) for p, f in loaded if p.resolve() != gpath.resolve()]
    compare = bool(getattr(args, "compare", False))
    if compare and len(loaded) < 2:
        raise ValueError("--compare needs two or more findings documents")
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
    if golden:
        specs[0].name = f"{specs[0].name} (golden)"
    return InferfitApp(specs, config, golden=0 if golden else None,
                       compare_on_start=compare)


def _tab_name(findings: Findings, loaded: list[tuple[Path, Findings]]) -> str:
    name = findings.target.name
    same = [f for _, f in loaded if f.target.name == name]
    if len(same) > 1:
        return f"{name} {findings.created:%m-%d %H:%M}"
    return name
