"""Run probes against one host and fold their results into Findings.

The CLI's ``check``, the console and the fleet runner all go through here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

from inferfit.api import Probe, ProbeContext, Progress
from inferfit.config import Config
from inferfit.findings import Findings, ProbeResult, Target
from inferfit.hosts.base import Host, HostError
from inferfit.hosts.ssh import SSHHost

# Facts copied from the system probe into [target].
TARGET_FACTS = (
    "hostname", "os", "kernel", "arch", "cpu_model", "cpu_cores", "memory_gib", "swap_gib",
)


class UnknownProbeError(ValueError):
    pass


def select_probes(
    available: Mapping[str, Probe], wanted: Sequence[str] | None, config: Config
) -> list[Probe]:
    names = list(wanted or config.get("check.probes", []) or available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UnknownProbeError(
            f"unknown probe {', '.join(map(repr, unknown))}; "
            f"available: {', '.join(sorted(available))}"
        )
    return [available[n] for n in dict.fromkeys(names)]


async def run_probe(
    probe: Probe,
    host: Host,
    config: Config,
    progress: Callable[[Progress], None],
    *,
    selected: bool = False,
) -> ProbeResult:
    """Run one probe; every failure becomes a ProbeResult, never an exception."""
    ctx = ProbeContext(
        options=config.probe_options(probe.name), config=config, progress=progress,
        selected=selected,
    )
    timeout = float(ctx.options.get("timeout_s", config.get("check.probe_timeout_s", 120.0)))
    started = time.monotonic()
    progress(Progress(probe.name, "started"))
    try:
        async with asyncio.timeout(timeout):
            result = await probe.check(host, ctx)
    except TimeoutError:
        result = ProbeResult.error(
            probe.name, f"did not finish within {timeout:g} s", kind="probe_timeout",
            fix=f"raise probes.{probe.name}.timeout_s or check.probe_timeout_s",
        )
    except HostError as exc:
        result = ProbeResult.error(probe.name, exc.message, kind=exc.kind, fix=exc.fix)
    except Exception as exc:  # a broken probe marks itself failed; the others go on
        result = ProbeResult.error(
            probe.name, f"probe crashed: {type(exc).__name__}: {exc}", kind="probe_crashed",
            fix="this is a bug in the probe; please report it with the findings file",
        )
    result.duration_s = result.duration_s or time.monotonic() - started
    progress(Progress(probe.name, f"{result.status}: {result.summary}", 1.0))
    return result


def make_target(host: Host) -> Target:
    return Target(name=host.name, address=host.address, transport=host.transport)


async def run_check(
    host: Host,
    probes: Sequence[Probe],
    config: Config,
    progress: Callable[[Progress], None],
    *,
    selected: bool = False,
) -> Findings:
    """Connect (raising HostError when the box cannot be reached), then run probes concurrently."""
    if isinstance(host, SSHHost):
        await host.connect()
    findings = Findings(target=make_target(host))
    results = await asyncio.gather(
        *(run_probe(p, host, config, progress, selected=selected) for p in probes)
    )
    for result in results:
        findings.probes[result.name] = result
    system = findings.probes.get("system")
    if system is not None:
        for key in TARGET_FACTS:
            if key in system.values:
                findings.target.facts[key] = system.values[key]
    if isinstance(host, SSHHost) and host.connect_s is not None:
        findings.target.facts["ssh_connect_ms"] = round(host.connect_s * 1000, 1)
    return findings
