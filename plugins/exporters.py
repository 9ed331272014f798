"""Built-in exporters: JSON, JUnit XML, Prometheus text exposition, Markdown.

All render from the same findings (one box or a fleet). Registered through
``inferfit_register_exporters``; `inferfit export --format NAME` uses them.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from inferfit.findings import Findings, ProbeResult
from inferfit.hookspecs import hookimpl

# -- JSON ------------------------------------------------------------------------


class JsonExporter:
    """One findings document as JSON (as `check --json`); several as a JSON array."""

    name = "json"
    suffix = ".json"

    def render(self, findings: Sequence[Findings]) -> str:
        if len(findings) == 1:
            return findings[0].to_json()
        docs = [json.loads(f.to_json()) for f in findings]
        return json.dumps(docs, indent=2) + "\n"


# -- JUnit XML ---------------------------------------------------------------------


class JUnitExporter:
    """JUnit XML: a <testsuite> per box, a <testcase> per probe check.

    ok passes; warn passes with the warning in <system-out> (so CI stays green
    on warnings but shows them); fail is a <failure>; error (could not check)
    is an <error>; skipped is <skipped>. Follows the rules of the JUnit schema
    Jenkins, GitLab and GitHub reporters read (Ant format: testsuites >
    testsuite[name, tests, failures, errors] > testcase[name, classname, time]).
    """

    name = "junit"
    suffix = ".xml"

    def render(self, findings: Sequence[Findings]) -> str:
        root = ET.Element("testsuites", name="inferfit")
        totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        total_time = 0.0
        for f in findings:
            suite = self._suite(f)
            root.append(suite)
            for key in totals:
                totals[key] += int(suite.get(key, "0"))
            total_time += float(suite.get("time", "0"))
        for key, value in totals.items():
            if key != "skipped":
                root.set(key, str(value))
        root.set("time", _secs(total_time))
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"

    def _suite(self, f: Findings) -> ET.Element:
        t = f.target
        suite = ET.Element("testsuite", name=f"inferfit.{t.name}", hostname=_xml(t.address),
                           timestamp=f.created.strftime("%Y-%m-%dT%H:%M:%S"))
        props = ET.SubElement(suite, "properties")
        for key, value in [("transport", t.transport), ("tool", f.tool),
                           ("overall_status", f.status),
                           *((k, v) for k, v in sorted(t.facts.items())
                             if isinstance(v, str | int | float) and not isinstance(v, bool))]:
            ET.SubElement(props, "property", name=key, value=_xml(str(value)))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        time_total = 0.0
        for name, r in sorted(f.probes.items()):
            counts["tests"] += 1
            time_total += r.duration_s
            suite.append(self._case(t.name, name, r, counts))
        for key, value in counts.items():
            suite.set(key, str(value))
        suite.set("time", _secs(time_total))
        return suite

    def _case(self, host: str, name: str, r: ProbeResult, counts: dict[str, int]) -> ET.Element:
        case = ET.Element("testcase", name=name, classname=f"inferfit.{_xml(host)}",
                          time=_secs(r.duration_s))
        detail = "\n".join([*r.notes, *([f"fix: {r.fix}"] if r.fix else [])])
        message = _xml(r.summary)
        if r.status == "fail":
            counts["failures"] += 1
            el = ET.SubElement(case, "failure", message=message, type="fail")
            el.text = _xml(detail) or None
        elif r.status == "error":
            counts["errors"] += 1
            el = ET.SubElement(case, "error", message=message, type=r.error_kind or "error")
            el.text = _xml(detail) or None
        elif r.status == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=message)
        out = ET.SubElement(case, "system-out")
        out.text = _xml("\n".join([f"{r.status}: {r.summary}", *([detail] if detail else [])]))
        return case


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    """Drop characters XML 1.0 cannot carry (control bytes from tool output)."""
    return _XML_BAD.sub("", text)


def _secs(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


# -- Prometheus text exposition ---------------------------------------------------

STATUS_CODE = {"ok": 0, "skipped": 0, "warn": 1, "fail": 2, "error": 3}
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")
_LABEL_KEYS = ("name", "mount", "index", "id", "device")


def metric_name(*parts: str) -> str:
    name = "_".join(_NAME_BAD.sub("_", p).strip("_") for p in parts if p)
    name = re.sub(r"_+", "_", name)
    return name if re.match(r"[a-zA-Z_]", name) else f"_{name}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt_number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


class _Families:
    """Samples grouped by metric family: the text format wants each family together."""

    def __init__(self) -> None:
        self.help: dict[str, str] = {}
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}

    def add(self, name: str, labels: Mapping[str, str], value: float, help_text: str) -> None:
        self.help.setdefault(name, help_text)
        self.samples.setdefault(name, []).append((dict(labels), value))

    def render(self) -> str:
        lines: list[str] = []
        for name in sorted(self.samples):
            lines.append(f"# HELP {name} {self.help[name]}")
            lines.append(f"# TYPE {name} gauge")
            seen: set[tuple[tuple[str, str], ...]] = set()
            for labels, value in self.samples[name]:
                ident = tuple(sorted(labels.items()))
                if ident in seen:  # a duplicate series would make the whole file invalid
                    continue
                seen.add(ident)
                body = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(labels.items()))
                lines.append(f"{name}{{{body}}} {_fmt_number(value)}")
        return "\n".join(lines) + ("\n" if lines else "")


class PrometheusExporter:
    """Text exposition for node_exporter's textfile collector (no timestamps).

    Per box and probe: ``inferfit_probe_status`` (0 ok/skipped, 1 warn,
    2 fail, 3 error), ``inferfit_probe_duration_seconds``; every numeric or
    boolean value as ``inferfit_<probe>_<key>`` (units stay in the name, e.g.
    ``inferfit_disk_seq_read_mib_s``); lists of tables get the item's name,
    mount or index as a label; ``inferfit_last_check_timestamp_seconds``.
    """

    name = "prometheus"
    suffix = ".prom"

    def render(self, findings: Sequence[Findings]) -> str:
        fam = _Families()
        for f in findings:
            host = f.target.name
            base = {"host": host}
            fam.add("inferfit_last_check_timestamp_seconds", base, f.created.timestamp(),
                    "When inferfit checked the box (Unix time).")
            fam.add("inferfit_status", base, STATUS_CODE[f.status],
                    "Overall status: 0 ok, 1 warn, 2 fail, 3 could not check.")
            info = {**base, "transport": f.target.transport}
            for key in ("os", "kernel", "arch", "cpu_model"):
                value = f.target.facts.get(key)
                if isinstance(value, str):
                    info[key] = value
            fam.add("inferfit_target_info", info, 1, "Facts about the box, as labels.")
            for probe, r in sorted(f.probes.items()):
                labels = {**base, "probe": probe}
                fam.add("inferfit_probe_status", labels, STATUS_CODE[r.status],
                        "Probe status: 0 ok or skipped, 1 warn, 2 fail, 3 could not check.")
                fam.add("inferfit_probe_duration_seconds", labels, r.duration_s,
                        "How long the probe ran.")
                for metric, extra, value in _numbers(r.values):
                    fam.add(metric_name("inferfit", probe, metric), {**base, **extra}, value,
                            f"inferfit {probe} probe value {metric} (unit in the name).")
        return fam.render()


def _numbers(
    values: Mapping[str, Any], prefix: str = "", labels: Mapping[str, str] | None = None
) -> Iterator[tuple[str, dict[str, str], float]]:
    labels = dict(labels or {})
    for key, value in values.items():
        name = f"{prefix}_{key}" if prefix else str(key)
        if isinstance(value, bool):
            yield name, labels, 1.0 if value else 0.0
        elif isinstance(value, int | float):
            yield name, labels, float(value)
        elif isinstance(value, Mapping):
            yield from _numbers(value, name, labels)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            label_key = next((k for k in _LABEL_KEYS
                              if len({str(v.get(k)) for v in value}) == len(value)
                              and all(k in v for v in value)), None)
            label_name = metric_name(label_key or "item")
            for pos, item in enumerate(value):
                item_label = str(item[label_key]) if label_key else str(pos)
                yield from _numbers(item, name, {**labels, label_name: item_label})


# -- Markdown ----------------------------------------------------------------------

_ICON = {"ok": "✅ ok", "warn": "⚠️ warn", "fail": "❌ fail", "error": "⛔ error",
         "skipped": "➖ skipped"}


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


class MarkdownExporter:
    """A report for a ticket: a fleet table when there are several boxes, then each box."""

    name = "markdown"
    suffix = ".md"

    def render(self, findings: Sequence[Findings]) -> str:
        from inferfit.fleet import SUMMARY_COLUMNS, summary_rows

        out: list[str] = ["# inferfit report", ""]
        if len(findings) > 1:
            out += ["## Fleet", "", "| " + " | ".join(SUMMARY_COLUMNS) + " |",
                    "|" + "---|" * len(SUMMARY_COLUMNS)]
            for row in summary_rows(findings):
                out.append("| " + " | ".join(_md(x) for x in (
                    row.host, row.status, row.gpu, row.disk, row.worst_p95, row.verdict)) + " |")
            out.append("")
        for f in findings:
            out += self._box(f)
        return "\n".join(out).rstrip() + "\n"

    def _box(self, f: Findings) -> list[str]:
        t = f.target
        out = [f"## {_md(t.name)} — {_ICON[f.status]}", "",
               f"- address: `{t.address}` ({t.transport})",
               f"- checked: {f.created.isoformat()} by {f.tool}"]
        for key in ("os", "kernel", "cpu_model", "cpu_cores", "memory_gib"):
            if key in t.facts:
                out.append(f"- {key}: {_md(str(t.facts[key]))}")
        out += ["", "| probe | status | summary | time |", "|---|---|---|---|"]
        for name, r in sorted(f.probes.items()):
            out.append(f"| {name} | {_ICON[r.status]} | {_md(r.summary)} | {r.duration_s:.1f} s |")
        details = [(name, r) for name, r in sorted(f.probes.items()) if r.notes or r.fix]
        if details:
            out += ["", "### Notes", ""]
            for name, r in details:
                out += [f"- **{name}**: {_md(n)}" for n in r.notes]
                if r.fix:
                    out.append(f"- **{name}** fix: {_md(r.fix)}")
        sizing = f.sizing
        if sizing:
            out += ["", "### Sizing", "", f"- mode: **{sizing.get('mode', '?')}**"]
            out += [f"- action: {_md(str(a))}" for a in sizing.get("actions", [])]
        out.append("")
        return out


EXPORTERS = (JsonExporter(), JUnitExporter(), PrometheusExporter(), MarkdownExporter())


@hookimpl
def inferfit_register_exporters(register: Callable[[Any], None]) -> None:
    for exporter in EXPORTERS:
        register(exporter)
