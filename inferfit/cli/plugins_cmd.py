"""`inferfit plugins`: what is loaded, from where, with which hooks."""

from __future__ import annotations

import argparse

from inferfit.manager import DISABLE_ENV, Registry, make_plugin_manager


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plugins",
        help="list loaded plugins, their source and hooks",
        description=f"List every plugin: built-in or entry point (group 'inferfit'), with its "
        f"distribution and version, and the hooks it implements. Plugins that failed to load "
        f"are listed with the error. Block plugins with {DISABLE_ENV}=name,...",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    pm = make_plugin_manager()
    # The console's panel plugins load only with the console (they need
    # textual); list them here too so this shows everything a user can get.
    from inferfit.tui.plugins import register_ui_plugins

    register_ui_plugins(pm)
    for info in pm.describe():
        print(f"{info.name}  [{info.source}]")
        for hook in info.hooks:
            print(f"    {hook}")
    for failure in pm.failures:
        print(f"{failure.name}  [{failure.source}]  FAILED TO LOAD, skipped: {failure.error}")
    reg = Registry.collect(pm)
    print()
    print("probes:            " + (", ".join(sorted(reg.probes)) or "none"))
    print("panels:            " + (", ".join(sorted(reg.panels)) or "none"))
    print("exporters:         " + (", ".join(sorted(reg.exporters)) or "none"))
    print("batch controllers: " + (", ".join(sorted(reg.batch_controllers)) or "none"))
    return 0
