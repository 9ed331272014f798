"""What the batch controllers share: options, refusals, the read-back state, helpers.

A controller's answer is a :class:`ControllerState` — an :class:`inferfit.api.BatchState`
(the protocol type) with the lease and the per-target detail added. Everything in
it is read back from the box after the action, never remembered.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfit.plugins.batch_lease import MIN_LEASE_S, Lease

from inferfit.api import BatchState
from inferfit.hosts.base import Completed, Host, sh

SCRIPT_TIMEOUT_S = 30.0
# After a pause, how often (and how far apart) to re-read until the box shows it landed.
SETTLE_READS = 6
SETTLE_S = 0.5
CONTROLLERS = ("signal", "cgroup", "systemd", "docker")
CGROUP_ROOT = "/sys/fs/cgroup/"


class BatchRefused(Exception):
    """The box or the config says no: nothing was changed. ``kind`` goes into findings."""

    def __init__(self, message: str, *, kind: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} — {self.fix}" if self.fix else self.message


@dataclass(frozen=True)
class ControllerState(BatchState):
    """BatchState plus what the console and the CLI show: lease, paused targets, notes."""

    paused_targets: tuple[str, ...] = ()
    lease: Lease | None = None
    lease_name: str = ""
    notes: tuple[str, ...] = ()

    @property
    def paused_count(self) -> int:
        return len(self.paused_targets)


@dataclass(frozen=True)
class BatchOptions:
    """The [batch] table, checked. Lists (cgroup, unit, container) split on whitespace."""

    controller: str
    pattern: str = ""
    pidfile: str = ""
    cgroups: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()
    lease_s: int = 120
    throttle_fraction: float = 0.5
    lease_dir: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], *, expect: str | None = None) -> BatchOptions:
        controller = str(options.get("controller", "") or "")
        if not controller:
            raise BatchRefused(
                "batch control is not configured: [batch] controller is empty",
                kind="not_configured",
                fix='set [batch] controller = "signal" (or cgroup, systemd, docker) and its '
                "selection (pattern, pidfile, cgroup, unit or container) in the config",
            )
        if controller not in CONTROLLERS and expect is None:
            raise BatchRefused(
                f"unknown batch controller {controller!r}",
                kind="config", fix=f"use one of: {', '.join(CONTROLLERS)}",
            )
        if expect is not None and controller != expect:
            raise BatchRefused(
                f"[batch] controller is {controller!r}, not {expect!r}", kind="config"
            )
        lease = options.get("lease_s", 120)
        if not isinstance(lease, int | float) or isinstance(lease, bool) or lease < MIN_LEASE_S:
            raise BatchRefused(
                f"[batch] lease_s must be a number of seconds >= {MIN_LEASE_S}, got {lease!r}",
                kind="config", fix="a pause always carries a lease; pick e.g. 120",
            )
        frac = options.get("throttle_fraction", 0.5)
        if not isinstance(frac, int | float) or isinstance(frac, bool) or not 0 < frac <= 1:
            raise BatchRefused(
                f"[batch] throttle_fraction must be in (0, 1], got {frac!r}", kind="config"
            )
        cgroups = tuple(str(options.get("cgroup", "") or "").split())
        for path in cgroups:
            check_cgroup_path(path)
        return cls(
            controller=controller,
            pattern=str(options.get("pattern", "") or ""),
            pidfile=str(options.get("pidfile", "") or ""),
            cgroups=cgroups,
            units=tuple(str(options.get("unit", "") or "").split()),
            containers=tuple(str(options.get("container", "") or "").split()),
            lease_s=math.ceil(lease),
            throttle_fraction=float(frac),
            lease_dir=str(options.get("lease_dir", "") or ""),
            raw=dict(options),
        )


def check_cgroup_path(path: str) -> None:
    if not path.startswith(CGROUP_ROOT) or ".." in path.split("/") or path.rstrip("/") in (
        CGROUP_ROOT.rstrip("/"),
    ):
        raise BatchRefused(
            f"[batch] cgroup {path!r} must be a cgroup directory below {CGROUP_ROOT}",
            kind="config",
            fix="give the absolute path, e.g. /sys/fs/cgroup/batch.slice (v2) or "
            "/sys/fs/cgroup/freezer/batch (v1)",
        )


def new_token() -> str:
    return secrets.token_hex(8)


def pause_count(total: int, fraction: float) -> int:
    """How many of ``total`` targets a pause of ``fraction`` stops (at least one)."""
    if total <= 0:
        return 0
    if not 0 < fraction <= 1:
        raise BatchRefused(f"fraction must be in (0, 1], got {fraction!r}", kind="config")
    return min(total, max(1, math.ceil(fraction * total - 1e-9)))


def split_for_pause(items: Sequence[str], paused: Sequence[str], k: int) -> tuple[list[str],
                                                                                 list[str]]:
    """Choose the ``k`` items to have paused: already-paused ones first (no churn), then
    in the given order. Returns (to_pause, to_resume_or_leave)."""
    already = [i for i in items if i in set(paused)]
    rest = [i for i in items if i not in set(paused)]
    chosen = (already + rest)[:k]
    others = [i for i in items if i not in set(chosen)]
    return chosen, others


def fold_state(total: int, paused: int) -> str:
    if total == 0:
        return "absent"
    if paused == 0:
        return "running"
    if paused >= total:
        return "paused"
    return "partly_paused"


async def run_script(host: Host, script: str, *args: str,
                     timeout: float = SCRIPT_TIMEOUT_S) -> Completed:
    done = await host.run(sh(script, *args), timeout=timeout)
    if done.not_found:
        raise BatchRefused(
            f"{host.name}: cannot run sh on the box ({done.describe()})", kind="no_shell"
        )
    return done


def refusal_lines(lines: Sequence[str]) -> list[str]:
    return [line[len("refuse "):] for line in lines if line.startswith("refuse ")]


def describe_state(state: BatchState) -> str:
    """One line for the CLI and the console header."""
    lease = getattr(state, "lease", None)
    text = state.state.replace("_", " ")
    if state.detail:
        text += f" ({state.detail})"
    if isinstance(lease, Lease) and state.state in ("paused", "partly_paused"):
        left = lease.remaining_s()
        text += f" · resumes in {left:.0f} s"
        if not lease.watchdog_alive:
            text += " · WATCHDOG NOT RUNNING"
    return text
