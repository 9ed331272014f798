"""inferfit's plugin hooks (pluggy project name ``inferfit``).

Register-callback style, as in pytest, tox and llm: hooks are synchronous and
only hand objects to ``register``; the async work lives in those objects.
Every hook here is implemented by a built-in plugin and has a test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from inferfit.api import BatchController, Exporter, PanelClass, Probe, Recommendation
    from inferfit.findings import Findings

PROJECT = "inferfit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def inferfit_register_probes(register: Callable[[Probe], None]) -> None:
    """Register probe objects (see ``inferfit.api.Probe``). Names must be unique."""


@hookspec
def inferfit_register_panels(register: Callable[[type[PanelClass]], None]) -> None:
    """Register Textual panel classes; each names the probe it shows (``probe_name``)."""


@hookspec
def inferfit_register_exporters(register: Callable[[Exporter], None]) -> None:
    """Register exporters that render findings as text (JSON, JUnit XML, ...)."""


@hookspec
def inferfit_register_batch_controllers(register: Callable[[BatchController], None]) -> None:
    """Register controllers that pause and resume batch work on a box."""


@hookspec(firstresult=True)
def inferfit_recommend(findings: Findings, workload: Any) -> Recommendation | None:
    """Return the sizing verdict for ``findings`` under ``workload``, or None to pass.

    ``workload`` is an ``inferfit.workload.Workload``. First non-None result
    wins; the built-in sizing plugin is ``trylast`` so a team's plugin can replace it.
    """
