"""UI plugins: registered only by the console, so ``inferfit check`` never imports textual.

``make_plugin_manager`` imports every module in ``BUILTIN_PLUGINS`` and
``Registry.collect`` calls every hook, the panel hook included; a built-in
panel module there would pull textual into every headless run. The console
adds these modules to the plugin manager itself, after the built-ins and
entry points, honouring ``INFERFIT_DISABLE_PLUGINS`` the same way.
"""

from __future__ import annotations

import importlib
import os

from inferfit.manager import DISABLE_ENV, InferfitPluginManager

UI_PLUGINS: tuple[str, ...] = (
    "inferfit.tui.builtin",
)


def register_ui_plugins(pm: InferfitPluginManager) -> None:
    """Register the built-in panel plugins on ``pm`` (idempotent)."""
    disabled = {p.strip() for p in os.environ.get(DISABLE_ENV, "").split(",") if p.strip()}
    for modname in UI_PLUGINS:
        short = modname.rsplit(".", 1)[-1]
        if short in disabled or modname in disabled:
            continue
        if pm.get_plugin(modname) is not None or pm.is_blocked(modname):
            continue
        module = importlib.import_module(modname)
        pm.register(module, name=modname)
        pm.sources[modname] = "built-in (console)"
