"""`inferfit [TARGET ...]` / `inferfit console`: the live console (textual loads only here)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from inferfit.cli import EXIT_OK, EXIT_UNKNOWN
from inferfit.cli.common import (
    add_config_option,
    add_ssh_options,
    config_error,
    host_for,
    load_config,
)
from inferfit.config import ConfigError
from inferfit.manager import Registry, make_plugin_manager
from inferfit.runner import UnknownProbeError, select_probes

if TYPE_CHECKING:
    from inferfit.manager import InferfitPluginManager


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "console",
        help="the live console (default: `inferfit [TARGET ...]` opens it)",
        description="Open the console on one or more targets (the local machine when none): "
        "panels fill as probes finish and live panels update about once a second. "
        "Keys: r re-run, R all, e export, p batch, / filter, d dark/light, ? help, q quit.",
    )
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="[user@]host[:port] or ssh-config alias; several open one tab each")
    p.add_argument("--probe", action="append", metavar="NAME",
                   help="show only this probe (repeatable); default: check.probes or all")
    p.add_argument("--workload", metavar="FILE",
                   help="size the box for this workload profile (configs/workloads/): fills "
                        "the recommendation panel and [sizing] in exports")
    add_config_option(p)
    add_ssh_options(p)
    p.set_defaults(func=run)


def console_registry() -> tuple[InferfitPluginManager, Registry]:
    """Plugin manager with the console's UI plugins (panels) added, and what they registered."""
    from inferfit.tui.plugins import register_ui_plugins

    pm = make_plugin_manager()
    register_ui_plugins(pm)
    return pm, Registry.collect(pm)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args)
    except ConfigError as exc:
        return config_error(exc)
    pm, registry = console_registry()
    sizing = None
    if args.workload:
        from inferfit.tui.sizing import ConsoleSizing
        from inferfit.workload import WorkloadError, load_workload

        try:
            sizing = ConsoleSizing(pm, load_workload(args.workload))
        except WorkloadError as exc:
            print(f"inferfit: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
    try:
        probes = select_probes(registry.probes, args.probe, config)
    except UnknownProbeError as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    from inferfit.tui.app import InferfitApp
    from inferfit.tui.batch import make_batch_control
    from inferfit.tui.target_view import TargetSpec

    specs = []
    for target in args.targets or [None]:
        try:
            host = host_for(target, args, config)
        except ValueError as exc:
            print(f"inferfit: bad target {target!r}: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
        specs.append(TargetSpec(name=host.name, host=host, probes=probes,
                                panels=dict(registry.panels)))
    app = InferfitApp(specs, config, batch_control=make_batch_control(config, registry),
                      sizing=sizing)
    code = app.run()
    return EXIT_OK if code is None else int(code)
