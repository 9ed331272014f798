"""The recommend hook (firstresult, ours trylast) and sizing on any subset of findings."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfit.api import Recommendation
from inferfit.findings import Findings
from inferfit.hookspecs import hookimpl
from inferfit.manager import make_plugin_manager
from inferfit.plugins.sizing import recommend
from inferfit.workload import load_workload

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sizing"
WORKLOADS = [load_workload(p) for p in sorted((REPO / "configs" / "workloads").glob("*.toml"))]
BOX = tomllib.loads((FIXTURES / "h100x8-mixed.toml").read_text())


class TeamPlugin:
    @hookimpl
    def inferfit_recommend(self, findings: Findings, workload: Any) -> Recommendation | None:
        return Recommendation("batch", ["split"], 0.42, {"note": "ours"})


class PassingPlugin:
    @hookimpl
    def inferfit_recommend(self, findings: Findings, workload: Any) -> Recommendation | None:
        return None


def test_builtin_sizing_is_registered_and_answers() -> None:
    pm = make_plugin_manager(load_entry_points=False)
    assert pm.has_plugin("inferfit.plugins.sizing")
    rec = pm.hook.inferfit_recommend(findings=Findings.from_dict(BOX), workload=WORKLOADS[3])
    assert isinstance(rec, Recommendation)
    assert rec.mode == rec.table["mode"] == "realtime"


def test_a_team_plugin_replaces_ours_and_a_passing_one_does_not() -> None:
    pm = make_plugin_manager(load_entry_points=False)
    pm.register(PassingPlugin(), name="passing")
    rec = pm.hook.inferfit_recommend(findings=Findings.from_dict(BOX), workload=WORKLOADS[0])
    assert rec.table.get("workload") == WORKLOADS[0].name  # ours answered
    pm.register(TeamPlugin(), name="team")
    rec = pm.hook.inferfit_recommend(findings=Findings.from_dict(BOX), workload=WORKLOADS[0])
    assert rec.table == {"note": "ours"}


def test_builtin_passes_on_something_that_is_not_a_workload() -> None:
    pm = make_plugin_manager(load_entry_points=False)
    assert pm.hook.inferfit_recommend(findings=Findings.from_dict(BOX),
                                      workload={"model": "x"}) is None


def _no_none(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_no_none(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_none(v) for v in value)
    return value is not None and not (isinstance(value, float) and not math.isfinite(value))


JUNK = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**13),
    st.just(0), st.text(max_size=4), st.booleans(), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _mangle(table: dict[str, Any], draw: Any) -> None:
    for key in list(table):
        if key in ("status", "summary", "duration_s", "notes", "error_kind", "fix"):
            continue
        value = table[key]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                _mangle(item, draw)
            if draw(st.booleans()):
                table[key] = value[: draw(st.integers(0, len(value)))]
        elif draw(st.integers(0, 3)) == 0:
            junk = draw(JUNK)
            if junk is None:
                del table[key]
            else:
                table[key] = junk


@st.composite
def box_docs(draw: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BOX)
    for name in list(doc["probes"]):
        if draw(st.booleans()):
            del doc["probes"][name]
        else:
            _mangle(doc["probes"][name], draw)
    if draw(st.booleans()):
        del doc["mixed"]
    else:
        _mangle(doc["mixed"], draw)
    return doc


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=box_docs(), index=st.integers(0, len(WORKLOADS) - 1))
def test_any_subset_of_findings_never_crashes(doc: dict[str, Any], index: int) -> None:
    findings = Findings.from_dict(doc)
    rec = recommend(findings, WORKLOADS[index])
    assert rec.mode in ("realtime", "batch", "mixed", "split")
    assert 0.1 <= rec.confidence <= 1.0
    assert _no_none(rec.table)
    tomllib.loads(tomli_w.dumps({"sizing": rec.table}))  # exports as TOML


def test_no_probes_at_all_for_every_example() -> None:
    empty = Findings.load(FIXTURES / "no-probes.toml")
    for w in WORKLOADS:
        rec = recommend(empty, w)
        assert rec.table["missing_inputs"]
        assert rec.confidence < 0.5


@st.composite
def workload_docs(draw: Any) -> dict[str, Any]:
    pos = st.integers(1, 200_000)
    model: dict[str, Any] = {"params": draw(st.floats(1e6, 2e12))}
    for key in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "hidden_size", "head_dim", "tensor_parallel", "max_context"):
        if draw(st.booleans()):
            model[key] = draw(st.integers(1, 16) if key == "tensor_parallel" else pos)
    model["weights_dtype"] = draw(st.sampled_from(["bf16", "fp8", "int4", "fp32"]))
    doc: dict[str, Any] = {"model": model}
    if draw(st.booleans()):
        doc["realtime"] = {"qps_peak": draw(st.floats(0.01, 1e4)),
                           "input_tokens": draw(pos), "output_tokens": draw(pos)}
        for key in ("ttft_ms_p95", "e2e_ms_p95", "e2e_ms_p99", "response_bytes", "tpot_ms"):
            if draw(st.booleans()):
                doc["realtime"][key] = draw(st.floats(0.1, 1e6))
    if draw(st.booleans()) or "realtime" not in doc:
        doc["batch"] = {"tasks_per_day": draw(st.floats(1, 1e9)),
                        "tokens_per_task": draw(pos),
                        "window_hours": draw(st.floats(0.1, 24))}
        if draw(st.booleans()):
            doc["cost"] = {"server_per_month": draw(st.floats(0, 1e6))}
    return doc


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=workload_docs(), box=box_docs())
def test_any_valid_workload_on_any_box_never_crashes(doc: dict[str, Any],
                                                     box: dict[str, Any]) -> None:
    from inferfit.workload import parse_workload

    rec = recommend(Findings.from_dict(box), parse_workload(doc, "w.toml"))
    assert _no_none(rec.table)
    tomllib.loads(tomli_w.dumps({"sizing": rec.table}))
