"""Sizing in the console (`inferfit --workload FILE`): the recommend hook, per target.

No textual import. ``on_host`` reads the model's ``hf_config`` on the box
(as `check --workload` does) in the target's connect worker; ``recommend`` runs
the ``inferfit_recommend`` hook on the UI thread once a target's probes are
done (pure computation, milliseconds).
"""

from __future__ import annotations

from typing import Any

import pluggy

from inferfit.findings import Findings
from inferfit.hosts.base import Host


class ConsoleSizing:
    def __init__(self, pm: pluggy.PluginManager, workload: Any) -> None:
        self.pm = pm
        self.workload = workload
        self.per_target: dict[str, Any] = {}

    async def on_host(self, target: str, host: Host) -> None:
        from inferfit.workload import read_hf_config_remote

        self.per_target[target] = await read_hf_config_remote(self.workload, host)

    def recommend(self, target: str, findings: Findings) -> dict[str, Any] | None:
        workload = self.per_target.get(target, self.workload)
        rec = self.pm.hook.inferfit_recommend(findings=findings, workload=workload)
        return None if rec is None else dict(rec.table)
