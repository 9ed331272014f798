"""Exporters: JUnit XML validates against the consumers' schema, Prometheus text parses
with prometheus_client, Markdown and JSON carry the same findings; `inferfit export`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree
from prometheus_client.parser import text_string_to_metric_families

from inferfit.manager import Registry, make_plugin_manager

SCHEMA = Path(__file__).resolve().parent.parent / "fixtures" / "fleet" / "junit.xsd"


@pytest.fixture
def exporters():
    return Registry.collect(make_plugin_manager(load_entry_points=False)).exporters


@pytest.fixture
def fleet_findings(findings_factory, findings_maker):
    ok = findings_factory("gpu-01")
    slow = findings_factory("gpu-02", seq=900.0, disk_status="fail")
    odd = findings_maker("gpu-03 \"odd\" <box>", {
        "system": ("warn", {"cpu_cores": 8, "notes_count": 1,
                            "filesystems": [{"mount": "/", "free_gib": 3.5}]}),
        "gpu": ("skipped", {}),
        "disk": ("error", {}),
    })
    odd.probes["disk"].error_kind = "tool_missing"
    odd.probes["disk"].fix = "install fio (apt install fio)"
    odd.probes["system"].notes.append("control \x01 char & <xml> in a note")
    return [ok, slow, odd]


def test_builtin_exporters_are_registered(exporters):
    assert {"json", "junit", "prometheus", "markdown"} <= set(exporters)
    assert exporters["junit"].suffix == ".xml"


def test_junit_validates_against_schema_one_case_per_check(exporters, fleet_findings):
    text = exporters["junit"].render(fleet_findings)
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    doc = etree.fromstring(text.encode())
    assert schema.validate(doc), schema.error_log
    suites = doc.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "inferfit.gpu-01", "inferfit.gpu-02", 'inferfit.gpu-03 "odd" <box>']
    cases = {(s.get("name"), c.get("name")): c for s in suites for c in s.findall("testcase")}
    assert len(cases) == 4 + 4 + 3
    failed = cases[("inferfit.gpu-02", "disk")]
    assert failed.find("failure").get("message") == "disk fail"
    err = cases[('inferfit.gpu-03 "odd" <box>', "disk")].find("error")
    assert err.get("type") == "tool_missing"
    assert "fix: install fio" in err.text
    assert cases[('inferfit.gpu-03 "odd" <box>', "gpu")].find("skipped") is not None
    warn = cases[('inferfit.gpu-03 "odd" <box>', "system")]
    assert warn.find("failure") is None
    assert "warn: system warn" in warn.find("system-out").text
    assert (doc.get("tests"), doc.get("failures"), doc.get("errors")) == ("11", "1", "1")
    assert suites[2].get("skipped") == "1"


def test_prometheus_text_parses_with_prometheus_client(exporters, fleet_findings):
    text = exporters["prometheus"].render(fleet_findings)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    status = {(s.labels["host"], s.labels["probe"]): s.value
              for s in families["inferfit_probe_status"].samples}
    assert status[("gpu-02", "disk")] == 2
    assert status[('gpu-03 "odd" <box>', "disk")] == 3
    assert status[("gpu-01", "gpu")] == 0
    seq = {s.labels["host"]: s.value for s in families["inferfit_disk_seq_read_mib_s"].samples}
    assert seq == {"gpu-01": 2400.0, "gpu-02": 900.0}
    p95 = {(s.labels["host"], s.labels["name"]): s.value
           for s in families["inferfit_latency_regions_rtt_ms_p95"].samples}
    assert p95[("gpu-01", "us")] == 41.0
    free = {(s.labels["host"], s.labels["mount"]): s.value
            for s in families["inferfit_system_filesystems_free_gib"].samples}
    assert free[('gpu-03 "odd" <box>', "/")] == 3.5
    gpus = {(s.labels["host"], s.labels["index"]) for s in
            families["inferfit_gpu_devices_memory_total_mib"].samples}
    assert ("gpu-01", "1") in gpus
    assert all(f.type == "gauge" for f in families.values())
    # node_exporter's textfile collector refuses timestamps on samples.
    assert all(s.timestamp is None for f in families.values() for s in f.samples)


def test_markdown_report(exporters, fleet_findings):
    md = exporters["markdown"].render(fleet_findings)
    assert md.startswith("# inferfit report")
    assert "| host | status | GPU | disk | worst region p95 | verdict |" in md
    assert "| gpu-01 | ok | 2× NVIDIA H100 | 2,400 MiB/s read | us 41 ms | fit |" in md
    assert "| gpu-02 | fail |" in md
    assert "- **disk** fix: install fio (apt install fio)" in md
    single = exporters["markdown"].render(fleet_findings[:1])
    assert "## Fleet" not in single
    assert "## gpu-01" in single


def test_json_exporter(exporters, fleet_findings):
    one = json.loads(exporters["json"].render(fleet_findings[:1]))
    assert one["target"]["name"] == "gpu-01"
    many = json.loads(exporters["json"].render(fleet_findings))
    assert [d["target"]["name"] for d in many][:2] == ["gpu-01", "gpu-02"]
    assert many[1]["probes"]["disk"]["seq_read_mib_s"] == 900.0


def test_export_cli_reads_a_directory(inferfit_cli, tmp_path, fleet_findings):
    d = tmp_path / "collected"
    for f in fleet_findings:
        f.write(d / f"{f.target.name.split()[0]}.toml")
    (d / "notes.toml").write_text("just = 'a note'\n")
    out = tmp_path / "report.xml"
    r = inferfit_cli("export", "--format", "junit", str(d), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "skipped" in r.stderr
    assert "notes.toml" in r.stderr
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    assert schema.validate(etree.parse(str(out)))
    r = inferfit_cli("export", "-f", "prometheus", str(d / "gpu-01.toml"))
    assert r.returncode == 0
    assert 'inferfit_disk_seq_read_mib_s{host="gpu-01"} 2400' in r.stdout
    r = inferfit_cli("export", "-f", "yaml", str(d))
    assert r.returncode == 3
    assert "no exporter named 'yaml'; available: json, junit, markdown" in r.stderr
    r = inferfit_cli("export", "-f", "json", str(tmp_path / "missing.toml"))
    assert r.returncode == 3
    assert "cannot read" in r.stderr
