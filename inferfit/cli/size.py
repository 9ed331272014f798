"""`inferfit size`: re-run sizing offline on saved findings (what-if without the box).

Also home of :class:`SizingStep`, the few calls `inferfit check --workload`
makes: load the workload before connecting, read ``hf_config`` on the box,
run the ``inferfit_recommend`` hook, put ``[sizing]`` into the findings, print
the verdict after the summary.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import pluggy

from inferfit.cli import EXIT_FAIL, EXIT_OK, EXIT_UNKNOWN, EXIT_WARN
from inferfit.cli.common import export_findings
from inferfit.findings import Findings, FindingsError
from inferfit.hosts.base import Host
from inferfit.manager import make_plugin_manager
from inferfit.workload import (
    Workload,
    WorkloadError,
    load_workload,
    read_hf_config_local,
    read_hf_config_remote,
)


def add_workload_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", metavar="FILE",
                        help="size the box for this workload profile (TOML, see "
                             "configs/workloads/); adds [sizing] to the findings")


@dataclass
class SizingStep:
    """What `check --workload` does around the probes; every method is a no-op without one."""

    workload: Workload | None = None
    table: dict[str, object] | None = None

    @classmethod
    def load(cls, path: str | None) -> SizingStep:
        """Read and validate the workload now (before connecting); raises WorkloadError."""
        return cls(load_workload(path) if path else None)

    async def on_host(self, host: Host) -> None:
        """Read the model's hf_config on the box, over the same connection as the probes."""
        if self.workload is not None:
            self.workload = await read_hf_config_remote(self.workload, host)

    def apply(self, pm: pluggy.PluginManager, findings: Findings) -> None:
        """Run the recommend hook and store its table as findings.sections['sizing']."""
        if self.workload is None:
            return
        from inferfit.plugins.sizing import sizing_table

        rec = pm.hook.inferfit_recommend(findings=findings, workload=self.workload)
        if rec is None:
            print("inferfit: no plugin returned a sizing recommendation", file=sys.stderr)
            return
        self.table = sizing_table(rec)
        findings.sections["sizing"] = dict(self.table)

    def print(self, target: str = "") -> None:
        if self.table is not None:
            from inferfit.plugins.sizing import print_verdict

            print_verdict(dict(self.table), target=target)


def exit_code(table: dict[str, object]) -> int:
    """0 fits and nothing to do, 1 actions recommended, 2 the model does not fit."""
    if table.get("fits") is False:
        return EXIT_FAIL
    return EXIT_WARN if table.get("actions") else EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "size",
        help="size a workload on saved findings, offline (what-if without the box)",
        description="Re-run the sizing plugin on a findings file and a workload profile: print "
        "the verdict (mode, actions, every figure with its formula and source) and optionally "
        "write the findings with [sizing] added. hf_config is read from this machine if the "
        "path exists. Exit codes: 0 fits and no action needed, 1 actions recommended, 2 the "
        "model does not fit, 3 a file could not be read.",
    )
    p.add_argument("findings", metavar="FINDINGS", help="findings file (TOML or .json)")
    p.add_argument("--workload", metavar="FILE", required=True,
                   help="workload profile (TOML, see configs/workloads/)")
    p.add_argument("--export", metavar="OUT",
                   help="write the findings with [sizing] to OUT (TOML; .json for JSON)")
    p.add_argument("--json", action="store_true", help="print the [sizing] table as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        step = SizingStep.load(args.workload)
        findings = Findings.load(args.findings)
    except (WorkloadError, FindingsError) as exc:
        print(f"inferfit: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    assert step.workload is not None
    step.workload = read_hf_config_local(step.workload)
    step.apply(make_plugin_manager(), findings)
    if step.table is None:
        return EXIT_UNKNOWN
    if args.export and not export_findings(findings, args.export, "findings with [sizing]"):
        return EXIT_UNKNOWN
    if args.json:
        import json

        print(json.dumps(step.table, indent=2))
    else:
        step.print(target=f"on {findings.target.name}")
    return exit_code(step.table)
