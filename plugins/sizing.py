"""Built-in sizing plugin: findings + workload → realtime / batch / mixed / split, with reasons.

Implements ``inferfit_recommend`` as ``trylast`` (the hook is ``firstresult``,
so a team's own plugin replaces this one by returning a Recommendation).
The formulas live in ``sizing_math``, the figures read from findings in
``sizing_inputs``, the named rules in ``sizing_rules`` and ``sizing_plan``.
This module assembles the ``[sizing]`` findings table and prints the verdict.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from inferfit.api import Recommendation
from inferfit.findings import Findings, clean
from inferfit.hookspecs import hookimpl
from inferfit.plugins.sizing_inputs import observe
from inferfit.plugins.sizing_plan import size
from inferfit.workload import Workload

MIN_CONFIDENCE = 0.1
# Keys of [sizing] in print order (the rest follow); units in the names.
HEADLINE_KEYS = ("weights_bytes", "kv_bytes_per_token", "kv_budget_bytes", "max_tokens_in_cache",
                 "max_concurrency", "required_concurrency", "replicas", "bandwidth_mbit_needed",
                 "model_load_s", "batch_hours_needed", "batch_unit_cost")


def recommend(findings: Findings, workload: Workload) -> Recommendation:
    """Size ``workload`` on the box ``findings`` describe (pure; any subset of probes)."""
    obs = observe(findings)
    s = size(workload, obs)
    confidence = round(max(MIN_CONFIDENCE, 1.0 - s.penalty), 2)
    mode = str(s.t.pop("mode"))
    actions = s.actions
    table: dict[str, Any] = {
        "mode": mode,
        "actions": actions,
        "confidence": confidence,
        "workload": workload.name,
        "workload_file": workload.path,
        "model": workload.model.name or workload.model.hf_config or "",
    }
    table.update(s.t)
    if s.missing:
        table["missing_inputs"] = list(s.missing)
    if obs.notes:
        table["notes"] = list(obs.notes)
    table["reasons"] = s.reasons
    return Recommendation(mode=mode, actions=actions, confidence=confidence,
                          table=clean(table))


@hookimpl(trylast=True)
def inferfit_recommend(findings: Findings, workload: Any) -> Recommendation | None:
    if not isinstance(workload, Workload):
        return None
    return recommend(findings, workload)


def sizing_table(rec: Recommendation) -> dict[str, Any]:
    """The [sizing] table of a recommendation, whichever plugin made it."""
    table = dict(rec.table)
    table.setdefault("mode", rec.mode)
    table.setdefault("actions", list(rec.actions))
    table.setdefault("confidence", rec.confidence)
    return dict(clean(table))


# -- printing -------------------------------------------------------------------

def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}"
    return str(value)


def _action_detail(table: dict[str, Any], action: str) -> str:
    if action == "scale_out":
        split = "batch_replicas" in table
        parts = [f"{table['replicas']} box(es)" + (" for realtime" if split else "")
                 if "replicas" in table else ""]
        if split:
            parts.append(f"{table['batch_replicas']} for batch")
        if "instances_needed" in table:
            parts.append(f"{table['instances_needed']} instance(s)")
        return ", ".join(p for p in parts if p)
    if action == "throttle":
        return ", ".join(f"{k} {_fmt(v)}" for k, v in table.get("throttle", {}).items())
    if action == "reserve_realtime" and "reserve_realtime_pct" in table:
        return f"{table['reserve_realtime_pct']:g} % of the box"
    if action == "quantize" and "quantize_to" in table:
        return f"to {table['quantize_to']}"
    if action == "add_gpus" and "gpus_needed" in table:
        return f"{table['gpus_needed']} GPUs per instance"
    if action == "move_closer":
        return ", ".join(table.get("move_closer_regions", []))
    return ""


def verdict_lines(table: dict[str, Any], target: str = "") -> list[str]:
    """The verdict as plain lines: mode, actions, headline figures, reasons, missing inputs."""
    lines = [f"sizing{' ' + target if target else ''}: {table.get('workload', 'workload')} — "
             f"mode {table.get('mode', '?')}, confidence {table.get('confidence', 0):.2f}"]
    if "fits" in table:
        lines.append(f"  model fits: {_fmt(table['fits'])}")
    actions = table.get("actions") or []
    if actions:
        lines.append("  actions:")
        for a in actions:
            detail = _action_detail(table, a)
            lines.append(f"    - {a}" + (f": {detail}" if detail else ""))
    else:
        lines.append("  actions: none")
    figures = [f"{k} = {_fmt(table[k])}" for k in HEADLINE_KEYS if k in table]
    if figures:
        lines.append("  figures: " + "; ".join(figures))
    for r in table.get("reasons", []):
        lines.append(f"  [{r.get('rule')}] {r.get('says', '')}")
        if r.get("formula"):
            lines.append(f"      formula: {r['formula']}")
        figs = r.get("figures") or []
        if figs:
            lines.append("      from: " + "; ".join(
                f"{f.get('name')} = {_fmt(f.get('value'))} {f.get('unit', '')} "
                f"({f.get('source', '?')})" for f in figs))
    missing = table.get("missing_inputs") or []
    if missing:
        lines.append("  not judged / missing inputs (lower confidence):")
        lines.extend(f"    - {m}" for m in missing)
    return lines


def print_verdict(table: dict[str, Any], console: Console | None = None, target: str = "") -> None:
    console = console or Console(soft_wrap=True)
    for line in verdict_lines(table, target):
        console.print(line, markup=False, highlight=False)
