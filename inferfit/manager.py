"""Plugin manager factory and the registry of what plugins contributed."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from inferfit import __version__, hookspecs

if TYPE_CHECKING:
    from inferfit.api import BatchController, Exporter, PanelClass, Probe

ENTRY_POINT_GROUP = "inferfit"
DISABLE_ENV = "INFERFIT_DISABLE_PLUGINS"

# Built-in plugins, registered in this order. One module per probe/plugin.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "inferfit.probes.system",
    "inferfit.probes.gpu",
    "inferfit.probes.disk",
    "inferfit.probes.latency",
    "inferfit.probes.nginx",
    "inferfit.plugins.exporters",
    "inferfit.plugins.sizing",
    "inferfit.plugins.batch_signal",
    "inferfit.plugins.batch_cgroup",
    "inferfit.plugins.batch_systemd",
    "inferfit.plugins.batch_docker",
)


@dataclass
class PluginInfo:
    name: str
    source: str  # "built-in" | "entry point (dist x.y)"
    hooks: list[str] = field(default_factory=list)


@dataclass
class LoadFailure:
    name: str
    source: str
    error: str


class InferfitPluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers where plugins came from and what failed."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        self.sources: dict[str, str] = {}
        self.failures: list[LoadFailure] = []

    def describe(self) -> list[PluginInfo]:
        infos = []
        for name, plugin in self.list_name_plugin():
            if plugin is None:
                continue
            hooks = sorted(h.name for h in self.get_hookcallers(plugin) or [])
            infos.append(PluginInfo(name, self.sources.get(name, "registered"), hooks))
        return infos


def _disabled() -> set[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def make_plugin_manager(*, load_entry_points: bool = True) -> InferfitPluginManager:
    """Register built-ins, then third-party entry points; never fatal on a bad plugin."""
    pm = InferfitPluginManager()
    disabled = _disabled()
    for name in disabled:
        pm.set_blocked(name)
    for modname in BUILTIN_PLUGINS:
        short = modname.rsplit(".", 1)[-1]
        if short in disabled or modname in disabled:
            continue
        module = importlib.import_module(modname)
        pm.register(module, name=modname)
        pm.sources[modname] = "built-in"
    if load_entry_points:
        _load_entry_points(pm, disabled)
    pm.check_pending()
    return pm


def _load_entry_points(pm: InferfitPluginManager, disabled: set[str]) -> None:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in disabled or pm.is_registered(ep.name) or pm.is_blocked(ep.name):
            continue
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "unknown distribution"
        source = f"entry point ({dist})"
        try:
            plugin: ModuleType | Any = ep.load()
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # a broken third-party plugin must not stop the tool
            pm.failures.append(LoadFailure(ep.name, source, f"{type(exc).__name__}: {exc}"))
            continue
        pm.sources[ep.name] = source


class DuplicateNameError(ValueError):
    pass


@dataclass
class Registry:
    """Everything plugins registered, by name."""

    probes: dict[str, Probe] = field(default_factory=dict)
    panels: dict[str, type[PanelClass]] = field(default_factory=dict)
    exporters: dict[str, Exporter] = field(default_factory=dict)
    batch_controllers: dict[str, BatchController] = field(default_factory=dict)

    @classmethod
    def collect(cls, pm: pluggy.PluginManager) -> Registry:
        reg = cls()

        def adder(kind: str, table: dict[str, Any], key: str) -> Any:
            def add(obj: Any) -> None:
                name = getattr(obj, key)
                if name in table:
                    raise DuplicateNameError(f"two plugins register a {kind} named {name!r}")
                table[name] = obj

            return add

        pm.hook.inferfit_register_probes(register=adder("probe", reg.probes, "name"))
        pm.hook.inferfit_register_panels(register=adder("panel", reg.panels, "probe_name"))
        pm.hook.inferfit_register_exporters(register=adder("exporter", reg.exporters, "name"))
        pm.hook.inferfit_register_batch_controllers(
            register=adder("batch controller", reg.batch_controllers, "name")
        )
        return reg


def version_line() -> str:
    return f"inferfit {__version__}"
