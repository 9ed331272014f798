"""Pure parts of the latency probe: region config, target validation, statistics, verdicts.

Nothing here runs a command; every function is tested on plain data.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

TargetKind = Literal["tcp", "icmp", "http"]
Verdict = Literal["ok", "warn", "fail", "unreachable"]

EXAMPLE = "configs/regions.example.toml"
METHODS = ("auto", "tcp", "icmp", "http")

# Host names: letters, digits, '-', '_' and dots; no label starts with '-'.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}$")
# URL path/query characters we accept (no quotes, spaces, ';', '&', '|', '$', '`', ...).
_URL_REST = re.compile(r"^[A-Za-z0-9._~/%=+,:@?-]*$")
_SHELL_META = set(" \t\n\r;&|$`'\"\\<>(){}*!#")


class RegionConfigError(ValueError):
    """A [[regions]] entry that cannot be used; the message names the key."""


@dataclass(frozen=True)
class TargetSpec:
    """One validated target: ``host:port`` (TCP), ``host`` (ICMP) or an http(s) URL."""

    text: str
    kind: TargetKind
    host: str
    port: int | None = None
    url: str | None = None

    @property
    def host_port(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{shown}:{self.port}" if self.port else shown


@dataclass(frozen=True)
class Region:
    name: str
    targets: tuple[TargetSpec, ...]
    budget_ms_p95: float | None = None


def _check_host(host: str, where: str) -> str:
    if not host:
        raise RegionConfigError(f"{where}: empty host name")
    if ":" in host:
        try:
            return str(ipaddress.IPv6Address(host))
        except ValueError:
            raise RegionConfigError(f"{where}: {host!r} is not a valid IPv6 address") from None
    if len(host) > 253 or not all(_LABEL.match(label) for label in host.rstrip(".").split(".")):
        raise RegionConfigError(
            f"{where}: {host!r} is not a host name or IPv4 address "
            "(letters, digits, '-', '_' and dots only)"
        )
    return host


def _check_port(text: str, where: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise RegionConfigError(f"{where}: port {text!r} must be a number from 1 to 65535")
    return int(text)


def parse_target(text: str, where: str = "target") -> TargetSpec:
    """Validate one target string; raise RegionConfigError naming ``where`` if it is unsafe.

    Accepted: ``host:port``, ``[v6]:port`` (TCP), ``host``, ``[v6]`` (ICMP),
    ``http://host[:port]/path`` and ``https://...`` (HTTP timing).
    """
    if not isinstance(text, str):
        raise RegionConfigError(f"{where} must be a string, got {type(text).__name__}")
    bad = sorted(set(text) & _SHELL_META)
    if bad:
        raise RegionConfigError(
            f"{where}: {text!r} contains {''.join(bad)!r}; a target is host:port, host or a URL "
            "and may not contain spaces, quotes or shell characters"
        )
    if any(ord(c) < 32 or ord(c) > 126 for c in text):
        raise RegionConfigError(f"{where}: {text!r} contains control or non-ASCII characters")
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if parts.username or parts.password:
            raise RegionConfigError(f"{where}: {text!r}: credentials in a URL are not allowed")
        try:
            port = parts.port
        except ValueError:
            raise RegionConfigError(f"{where}: {text!r} has an invalid port") from None
        host = _check_host(parts.hostname or "", where)
        rest = parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.fragment or not _URL_REST.match(rest):
            raise RegionConfigError(
                f"{where}: {text!r}: the URL path has characters we do not send"
            )
        return TargetSpec(text, "http", host, port or (443 if parts.scheme == "https" else 80),
                          url=text)
    if "://" in text:
        raise RegionConfigError(f"{where}: {text!r}: only http:// and https:// URLs are measured")
    if text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep:
            raise RegionConfigError(f"{where}: {text!r}: unclosed '['")
        host = _check_host(inner, where)
        if ":" not in host:
            raise RegionConfigError(f"{where}: brackets are for IPv6 addresses only ({text!r})")
        if not rest:
            return TargetSpec(text, "icmp", host)
        if not rest.startswith(":"):
            raise RegionConfigError(f"{where}: unexpected text after ']' in {text!r}")
        return TargetSpec(text, "tcp", host, _check_port(rest[1:], where))
    if text.count(":") > 1:
        raise RegionConfigError(
            f"{where}: {text!r} looks like an IPv6 address: write it in brackets, "
            "e.g. [2001:db8::1]:443"
        )
    if ":" in text:
        host, _, port_text = text.partition(":")
        return TargetSpec(text, "tcp", _check_host(host, where), _check_port(port_text, where))
    return TargetSpec(text, "icmp", _check_host(text, where))


def parse_regions(raw: Any, where: str = "regions") -> list[Region]:
    """Validate the top-level ``[[regions]]`` array of tables."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RegionConfigError(
            f"'{where}' must be an array of tables ([[regions]]), got {type(raw).__name__}"
        )
    regions: list[Region] = []
    names: set[str] = set()
    for n, entry in enumerate(raw):
        here = f"{where}[{n}]"
        if not isinstance(entry, Mapping):
            raise RegionConfigError(f"'{here}' must be a table with name, targets, budget_ms_p95")
        unknown = sorted(set(entry) - {"name", "targets", "budget_ms_p95"})
        if unknown:
            raise RegionConfigError(
                f"'{here}' has unknown key(s) {', '.join(unknown)} "
                "(known: name, targets, budget_ms_p95)"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise RegionConfigError(f"'{here}.name' must be a non-empty string")
        if name in names:
            raise RegionConfigError(f"'{here}.name': region {name!r} is defined twice")
        names.add(name)
        targets = entry.get("targets")
        if isinstance(targets, str):
            targets = [targets]
        if not isinstance(targets, list) or not targets:
            raise RegionConfigError(f"'{here}.targets' must be a non-empty list of strings")
        specs = tuple(parse_target(t, f"'{here}.targets[{k}]'") for k, t in enumerate(targets))
        budget = entry.get("budget_ms_p95")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0
        ):
            raise RegionConfigError(f"'{here}.budget_ms_p95' must be a positive number of ms")
        regions.append(Region(name, specs, float(budget) if budget is not None else None))
    return regions


# -- statistics ---------------------------------------------------------------
def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (always an observed value; p99 of 20 samples is the max)."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def min_samples_for(pct: float) -> int:
    """Samples needed before the pct-th percentile is distinct from the maximum."""
    return math.ceil(100.0 / (100.0 - pct) - 1e-9)


def jitter(ordered: Sequence[float]) -> float | None:
    """Mean absolute difference of consecutive samples (RFC 3550 style, unsmoothed)."""
    if len(ordered) < 2:
        return None
    return sum(abs(b - a) for a, b in itertools.pairwise(ordered)) / (len(ordered) - 1)


@dataclass
class SampleSet:
    """The outcome of probing one target: RTTs in send order plus what went wrong."""

    rtts_ms: list[float] = field(default_factory=list)
    sent: int = 0  # attempts that went onto the network (answered or lost)
    lost: int = 0  # timed out, or needed a retransmission (the first packet was dropped)
    refused: int = 0  # answered with a reset: still a round trip
    errors: dict[str, int] = field(default_factory=dict)  # error kind -> count
    detail: str = ""  # first error message, in words

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self.detail = self.detail or detail


def _r(value: float) -> float:
    return round(value, 3)


def summarize(sets: Sequence[SampleSet]) -> dict[str, Any]:
    """Figures for one or more targets pooled together (units in the key names)."""
    rtts = sorted(v for s in sets for v in s.rtts_ms)
    sent = sum(s.sent for s in sets)
    out: dict[str, Any] = {"samples": len(rtts), "samples_sent": sent}
    if sent:  # errors (DNS, no route) never left the box: they are not packet loss
        out["loss_pct"] = _r(100.0 * sum(s.lost for s in sets) / sent)
    refused = sum(s.refused for s in sets)
    if refused:
        out["refused_samples"] = refused
    if rtts:
        mean = sum(rtts) / len(rtts)
        out.update({
            "rtt_ms_min": _r(rtts[0]),
            "rtt_ms_p50": _r(percentile(rtts, 50)),
            "rtt_ms_p95": _r(percentile(rtts, 95)),
            "rtt_ms_p99": _r(percentile(rtts, 99)),
            "rtt_ms_max": _r(rtts[-1]),
            "rtt_ms_mean": _r(mean),
            "rtt_ms_stddev": _r(math.sqrt(sum((v - mean) ** 2 for v in rtts) / len(rtts))),
        })
    diffs = [abs(b - a) for s in sets for a, b in itertools.pairwise(s.rtts_ms)]
    if diffs:
        out["jitter_ms"] = _r(sum(diffs) / len(diffs))
    return out


def percentile_notes(name: str, samples: int) -> list[str]:
    notes = []
    for pct in (95, 99):
        need = min_samples_for(pct)
        if 0 < samples < need:
            notes.append(
                f"{name}: p{pct} of {samples} samples is the maximum; "
                f"{need}+ samples are needed for a distinct p{pct} (raise probes.latency.samples)"
            )
    return notes


UNREACHABLE_WORDS = {
    "dns": "DNS failure",
    "timeout": "timeout",
    "no_route": "no route",
    "reset": "connection reset",
    "tool": "no tool to measure with",
    "error": "error",
}


def unreachable_reason(sets: Mapping[str, SampleSet], timeout_ms: float) -> str:
    """Why nothing answered, in words: 'DNS failure: ...', 'timeout: ...', 'no route: ...'."""
    parts = []
    for target, s in sets.items():
        if s.errors:
            kind = max(s.errors, key=lambda k: s.errors[k])
            words = UNREACHABLE_WORDS.get(kind, kind)
            parts.append(f"{words}: {target}" + (f" ({s.detail})" if s.detail else ""))
        elif s.lost:
            parts.append(f"timeout: {target} did not answer within {timeout_ms:g} ms")
        else:
            parts.append(f"no samples: {target}")
    return "; ".join(parts)


def judge_region(
    stats: Mapping[str, Any],
    budget_ms_p95: float | None,
    options: Mapping[str, Any],
) -> tuple[Verdict, str]:
    """ok / warn / fail against the budget (and loss); 'unreachable' when nothing answered."""
    if not stats.get("samples"):
        return "unreachable", "no target answered"
    warn_pct = float(options.get("budget_warn_pct", 80.0))
    loss_warn = float(options.get("loss_pct_warn", 5.0))
    loss_fail = float(options.get("loss_pct_fail", 25.0))
    p95 = float(stats["rtt_ms_p95"])
    loss = float(stats.get("loss_pct", 0.0))
    if budget_ms_p95 is not None and p95 > budget_ms_p95:
        return "fail", f"p95 {p95:g} ms exceeds the budget of {budget_ms_p95:g} ms"
    if loss >= loss_fail:
        return "fail", f"{loss:g} % loss (fail at {loss_fail:g} %)"
    if budget_ms_p95 is not None and p95 > budget_ms_p95 * warn_pct / 100.0:
        return "warn", (f"p95 {p95:g} ms is above {warn_pct:g} % of the "
                        f"{budget_ms_p95:g} ms budget")
    if loss >= loss_warn:
        return "warn", f"{loss:g} % loss (warn at {loss_warn:g} %)"
    if budget_ms_p95 is None:
        return "ok", f"p95 {p95:g} ms (no budget set)"
    return "ok", f"p95 {p95:g} ms within the {budget_ms_p95:g} ms budget"
