"""Built-in panels, registered through ``inferfit_register_panels``.

Loaded only by the console (see ``inferfit.tui.plugins.UI_PLUGINS``), so the
headless CLI never imports textual.
"""

from __future__ import annotations

from collections.abc import Callable

from inferfit.api import PanelClass
from inferfit.hookspecs import hookimpl
from inferfit.tui.panels.disk_panel import DiskPanel
from inferfit.tui.panels.gpu_panel import GpuPanel
from inferfit.tui.panels.latency_panel import LatencyPanel
from inferfit.tui.panels.nginx_panel import NginxPanel
from inferfit.tui.panels.recommendation_panel import RecommendationPanel
from inferfit.tui.panels.system_panel import SystemPanel

PANELS: tuple[type[PanelClass], ...] = (
    SystemPanel, GpuPanel, DiskPanel, LatencyPanel, NginxPanel, RecommendationPanel,
)


@hookimpl
def inferfit_register_panels(register: Callable[[type[PanelClass]], None]) -> None:
    for panel in PANELS:
        register(panel)
