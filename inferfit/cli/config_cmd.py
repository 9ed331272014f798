"""`inferfit config show|path`: the effective config and where each value came from."""

from __future__ import annotations

import argparse
import json

from inferfit.cli.common import add_config_option, config_error, load_config
from inferfit.config import ConfigError, user_config_path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="show the effective configuration and its sources",
                       description="Show the effective configuration: every key, its value, "
                       "and the layer it came from (defaults, user config, ./inferfit.toml, "
                       "--config FILE).")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    show = csub.add_parser("show", help="print every key, value and source")
    add_config_option(show)
    show.set_defaults(func=run_show)
    path = csub.add_parser("path", help="print where the user config file lives")
    path.set_defaults(func=lambda _a: print(user_config_path()) or 0)
    p.set_defaults(func=run_show, config=None)


def run_show(args: argparse.Namespace) -> int:
    try:
        config = load_config(args)
    except ConfigError as exc:
        return config_error(exc)
    print(f"# layers, lowest first: {'; '.join(config.files)}")
    width = max((len(k) for k, _v, _s in config.explain()), default=10)
    for key, value, source in config.explain():
        shown = json.dumps(value)
        print(f"{key:<{width}} = {shown:<30}  # {source}")
    return 0
