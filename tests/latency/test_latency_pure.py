"""Pure parts: target validation, region config, statistics, verdicts, parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferfit.probes.latency import (
    Settings,
    choose_method,
    collect_agent,
    parse_agent_output,
    plan,
    region_findings,
    summary_line,
)
from inferfit.probes.latency_stats import (
    RegionConfigError,
    SampleSet,
    jitter,
    judge_region,
    min_samples_for,
    parse_regions,
    parse_target,
    percentile,
    percentile_notes,
    summarize,
)
from inferfit.probes.ping_parse import parse_curl, parse_ping

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "latency"


# -- targets ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "kind", "host", "port"),
    [
        ("127.0.0.1:443", "tcp", "127.0.0.1", 443),
        ("edge-1.example:8443", "tcp", "edge-1.example", 8443),
        ("[::1]:22", "tcp", "::1", 22),
        ("[fd00::1]", "icmp", "fd00::1", None),
        ("127.0.0.2", "icmp", "127.0.0.2", None),
        ("nonexistent.invalid", "icmp", "nonexistent.invalid", None),
        ("http://127.0.0.1:8080/healthz", "http", "127.0.0.1", 8080),
        ("https://edge.example/v1/ping?x=1", "http", "edge.example", 443),
    ],
)
def test_valid_targets(text: str, kind: str, host: str, port: int | None) -> None:
    spec = parse_target(text)
    assert (spec.kind, spec.host, spec.port) == (kind, host, port)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("127.0.0.1;touch /tmp/pwned", "shell characters"),
        ("$(id)", "shell characters"),
        ("`id`:22", "shell characters"),
        ("127.0.0.1:443 && id", "shell characters"),
        ("127.0.0.1|id", "shell characters"),
        ("-oProxyCommand=id", "not a host name"),
        ("::1:443", "in brackets"),
        ("127.0.0.1:0", "1 to 65535"),
        ("127.0.0.1:99999", "1 to 65535"),
        ("127.0.0.1:http", "1 to 65535"),
        ("[127.0.0.1]:22", "IPv6 addresses only"),
        ("ftp://127.0.0.1/", "only http"),
        ("http://user:pw@127.0.0.1/", "credentials"),
        ("bad_host!", "shell characters"),
        ("h\u00e9st:22", "non-ASCII"),
    ],
)
def test_hostile_or_bad_targets_are_rejected(text: str, words: str) -> None:
    with pytest.raises(RegionConfigError) as exc:
        parse_target(text, "'regions[0].targets[1]'")
    assert words in str(exc.value)
    assert "regions[0].targets[1]" in str(exc.value)


def test_region_config_errors_name_the_key() -> None:
    cases = [
        ({"regions": "eu"}, "array of tables"),
        ({"regions": [{"targets": ["127.0.0.1:1"]}]}, "'regions[0].name'"),
        ({"regions": [{"name": "a", "targets": []}]}, "'regions[0].targets'"),
        ({"regions": [{"name": "a", "targets": ["127.0.0.1:1"], "budget_ms_p95": -1}]},
         "'regions[0].budget_ms_p95'"),
        ({"regions": [{"name": "a", "targets": ["127.0.0.1:1"], "budget": 5}]},
         "unknown key(s) budget"),
        ({"regions": [{"name": "a", "targets": ["127.0.0.1:1"]},
                      {"name": "a", "targets": ["127.0.0.1:2"]}]}, "defined twice"),
        ({"regions": [{"name": "a", "targets": ["127.0.0.1:1", "$(id)"]}]},
         "'regions[0].targets[1]'"),
    ]
    for raw, words in cases:
        with pytest.raises(RegionConfigError) as exc:
            parse_regions(raw["regions"])
        assert words in str(exc.value), (raw, str(exc.value))


def test_regions_parse() -> None:
    regions = parse_regions([
        {"name": "eu", "targets": ["127.0.0.1:443", "127.0.0.2"], "budget_ms_p95": 50},
        {"name": "us", "targets": "127.0.0.3:80"},
    ])
    assert [r.name for r in regions] == ["eu", "us"]
    assert regions[0].budget_ms_p95 == 50.0
    assert regions[1].budget_ms_p95 is None
    assert [t.kind for t in regions[0].targets] == ["tcp", "icmp"]
    assert parse_regions(None) == []


# -- statistics ------------------------------------------------------------------
def test_percentile_nearest_rank_and_notes() -> None:
    values = sorted(float(v) for v in range(1, 21))  # 20 samples
    assert percentile(values, 50) == 10
    assert percentile(values, 95) == 19
    assert percentile(values, 99) == 20  # p99 of 20 samples is the max
    assert min_samples_for(99) == 100
    assert min_samples_for(95) == 20
    notes = percentile_notes("eu", 20)
    assert len(notes) == 1
    assert "p99 of 20 samples is the maximum" in notes[0]
    assert "100+" in notes[0]
    assert len(percentile_notes("eu", 10)) == 2
    assert percentile_notes("eu", 100) == []


def test_jitter_and_summary() -> None:
    assert jitter([10.0, 12.0, 11.0, 15.0]) == pytest.approx((2 + 1 + 4) / 3)
    assert jitter([1.0]) is None
    a = SampleSet(rtts_ms=[10.0, 12.0, 11.0], sent=4, lost=1)
    b = SampleSet(rtts_ms=[20.0, 20.0], sent=2, refused=2)
    out = summarize([a, b])
    assert out["samples"] == 5
    assert out["samples_sent"] == 6
    assert out["loss_pct"] == pytest.approx(16.667)
    assert out["refused_samples"] == 2
    assert out["rtt_ms_min"] == 10
    assert out["rtt_ms_max"] == 20
    assert out["rtt_ms_p50"] == 12
    assert out["rtt_ms_mean"] == pytest.approx(14.6)
    assert out["jitter_ms"] == pytest.approx((2 + 1 + 0) / 3)  # within each target only
    empty = summarize([SampleSet(errors={"dns": 1})])
    assert empty == {"samples": 0, "samples_sent": 0}


@pytest.mark.parametrize(
    ("p95", "loss", "budget", "verdict"),
    [
        (45.0, 1.0, 100.0, "ok"),
        (85.0, 0.0, 100.0, "warn"),  # above 80 % of the budget
        (101.0, 0.0, 100.0, "fail"),
        (10.0, 6.0, 100.0, "warn"),
        (10.0, 30.0, 100.0, "fail"),
        (500.0, 0.0, None, "ok"),
    ],
)
def test_judge_region(p95: float, loss: float, budget: float | None, verdict: str) -> None:
    got, reason = judge_region({"samples": 20, "rtt_ms_p95": p95, "loss_pct": loss}, budget, {})
    assert got == verdict, reason


def test_judge_unreachable() -> None:
    assert judge_region({"samples": 0}, 50.0, {})[0] == "unreachable"


# -- methods ---------------------------------------------------------------------
def test_choose_method_prefers_python_then_curl_then_ping() -> None:
    tcp, icmp, http = (parse_target(t) for t in ("127.0.0.1:22", "127.0.0.1", "http://127.0.0.1/"))
    assert choose_method(tcp, "auto", {"python3", "curl", "ping"})[0] == "tcp"
    assert choose_method(tcp, "auto", {"curl", "ping"})[0] == "tcp-curl"
    method, note = choose_method(tcp, "auto", {"ping"})
    assert method == "icmp"
    assert "port ignored" in note
    assert choose_method(tcp, "auto", set())[0] == "none"
    assert choose_method(icmp, "auto", {"python3", "ping"})[0] == "icmp"
    assert choose_method(icmp, "tcp", {"python3"})[0] == "none"
    assert choose_method(http, "auto", {"python3", "curl"})[0] == "http"
    assert choose_method(http, "auto", {"python3"})[0] == "tcp"
    assert choose_method(tcp, "icmp", {"python3", "ping"})[0] == "icmp"
    assert choose_method(tcp, "http", {"python3", "curl"})[0] == "http"


def test_settings_validation() -> None:
    assert Settings.from_options({}).samples == 20
    for bad in ({"samples": 0}, {"interval_ms": 0}, {"method": "udp"}):
        with pytest.raises(ValueError, match=r"probes\.latency\."):
            Settings.from_options(bad)


def test_agent_events_to_findings() -> None:
    text = "\n".join([
        '{"ev":"start","python":"3.11.2","tcp_info":true}',
        '{"ev":"resolve","t":0,"addr":"127.0.0.1","port":443}',
        '{"ev":"resolve","t":1,"error":"dns","detail":"Name or service not known"}',
        '{"ev":"s","t":0,"i":1,"k":"ok","ms":41.0}',
        '{"ev":"s","t":0,"i":0,"k":"refused","ms":40.0}',
        '{"ev":"s","t":0,"i":2,"k":"lost","ms":1040.0}',
        '{"ev":"s","t":0,"i":3,"k":"timeout"}',
        "garbage line",
        '{"ev":"end"}',
    ])
    sets = collect_agent(parse_agent_output(text), 2)
    assert sets[0].rtts_ms == [40.0, 41.0]  # send order, not arrival order
    assert (sets[0].sent, sets[0].lost, sets[0].refused) == (4, 2, 1)
    assert sets[1].errors == {"dns": 1}
    regions = parse_regions([
        {"name": "eu", "targets": ["127.0.0.1:443"], "budget_ms_p95": 50},
        {"name": "dns", "targets": ["nonexistent.invalid:443"]},
    ])
    jobs = plan(regions, "auto", {"python3"})
    jobs[0].result, jobs[1].result = sets
    settings = Settings()
    eu, notes = region_findings(regions[0], [jobs[0]], settings, {})
    assert eu["verdict"] == "fail"  # 2 of 4 lost: 50 % loss >= loss_pct_fail
    assert eu["verdict_reason"] == "50 % loss (fail at 25 %)"
    assert eu["loss_pct"] == 50.0
    assert eu["per_target"][0]["refused_samples"] == 1
    assert any("p95 of 2 samples" in n for n in notes)
    dns, _ = region_findings(regions[1], [jobs[1]], settings, {})
    assert dns["verdict"] == "unreachable"
    assert dns["unreachable_reason"].startswith("DNS failure: nonexistent.invalid:443")
    assert dns["per_target"][0]["error_kind"] == "dns"
    line = summary_line([eu, dns])
    assert line.startswith("2 regions: eu fail (p95 41 ms / 50, 50 % loss)")
    assert "dns unreachable" in line


# -- ping and curl output ----------------------------------------------------------
def test_parse_iputils_with_loss() -> None:
    s = parse_ping((FIX / "iputils-40ms-loss.txt").read_text())
    assert (s.sent, s.lost, len(s.rtts_ms)) == (20, 3, 17)
    assert s.rtts_ms[:3] == [42.3, 36.0, 38.0]
    assert min(s.rtts_ms) >= 35
    assert max(s.rtts_ms) <= 46


def test_parse_iputils_errors() -> None:
    dns = parse_ping((FIX / "iputils-dns-failure.txt").read_text())
    assert dns.errors == {"dns": 1}
    assert "Temporary failure in name resolution" in dns.detail
    route = parse_ping((FIX / "iputils-no-route.txt").read_text())
    assert route.errors == {"no_route": 1}
    assert not route.rtts_ms
    lo = parse_ping((FIX / "iputils-loopback.txt").read_text())
    assert lo.rtts_ms == [0.564, 0.024, 0.025]


def test_parse_busybox() -> None:
    five = parse_ping((FIX / "busybox-5-replies.txt").read_text())
    assert five.rtts_ms == [0.433, 0.139, 0.139, 0.152, 0.146]
    assert (five.sent, five.lost) == (5, 0)
    jit = parse_ping((FIX / "busybox-jitter.txt").read_text())
    stats = summarize([jit])
    assert stats["rtt_ms_max"] == 100.525
    assert stats["jitter_ms"] > 10
    gone = parse_ping((FIX / "busybox-100-loss.txt").read_text())
    assert (gone.sent, gone.lost, gone.rtts_ms) == (1, 1, [])
    bad = parse_ping("ping: bad address 'nonexistent.invalid'\n")
    assert bad.errors == {"dns": 1}


def test_parse_curl_lines() -> None:
    text = "\n".join([
        "@@1 0 0.000010 0.040120 0.080300 0.120500 200",
        "@@0 0 0.000020 0.041020 0.082000 0.130000 200",
        "@@2 28 0.000010 0.000000 0.000000 0.000000 000",
        "@@3 6 0.000000 0.000000 0.000000 0.000000 000",
        "@@end",
    ])
    t = parse_curl(text)
    assert t.samples.rtts_ms == [41.0, 40.11]
    assert (t.samples.sent, t.samples.lost) == (3, 1)
    assert t.samples.errors == {"dns": 1}
    assert t.tls_ms[0] == pytest.approx(40.98)
    assert t.ttfb_ms[1] == pytest.approx(120.49)
    # A TCP target timed with curl: connected, then -m expired: still a sample.
    only = parse_curl("@@0 28 0.000010 0.005010 0.000000 0.000000 000", connect_only=True)
    assert only.samples.rtts_ms == [5.0]
