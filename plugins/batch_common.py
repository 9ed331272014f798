"""What the batch controllers share: options, refusals, the read-back state, helpers,
the pause/resume-with-lease steps, the shell ``apply`` loop, and :class:`ListController`
(the whole status/pause/resume flow of the cgroup, systemd and docker controllers).

A controller's answer is a :class:`ControllerState` — an :class:`inferfit.api.BatchState`
(the protocol type) with the lease and the per-target detail added. Everything in
it is read back from the box after the action, never remembered.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from inferfit.api import BatchState
from inferfit.hosts.base import Completed, Host, sh
from inferfit.plugins import batch_lease
from inferfit.plugins.batch_lease import MIN_LEASE_S, Lease

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


# The shell ``apply K ENTRY...`` every pause script runs: ``stop1 ENTRY`` for the first K
# entries, ``cont1 ENTRY`` for the rest, then wait (at most 5 s) until ``landed ENTRY``
# holds for each of the first K (a freeze or a SIGSTOP lands asynchronously). A controller
# defines stop1 and cont1 after this, and pre and landed where it needs more than these.
APPLY = r"""
pre() { return 0; }
landed() { return 0; }
apply() {
  _k=$1
  _c=$1
  shift
  for _e; do
    if [ "$_c" -gt 0 ]; then stop1 "$_e"; else cont1 "$_e"; fi
    _c=$((_c - 1))
  done
  _t=0
  while [ "$_t" -lt 50 ]; do
    _c=$_k
    _ok=1
    for _e; do
      [ "$_c" -gt 0 ] || break
      _c=$((_c - 1))
      landed "$_e" || _ok=0
    done
    [ "$_ok" = 1 ] && break
    sleep 0.1 2>/dev/null || sleep 1
    _t=$((_t + 1))
  done
}
"""


def fail_notes(text: str, prefix: str) -> tuple[str, ...]:
    """One note per ``fail WHAT`` line a pause or resume script printed."""
    return tuple(f"{prefix} {line[5:]}" for line in text.splitlines() if line.startswith("fail "))


def pause_failed(host: Host, what: str) -> BatchRefused:
    return BatchRefused(f"the pause script failed on {host.name}: {what}", kind="pause_failed")


def lease_refused(host: Host, what: str) -> BatchRefused:
    return BatchRefused(f"cannot pause on {host.name}: {what}", kind="lease_failed",
                        fix="set [batch] lease_dir to a writable directory")


async def pause_with_lease(host: Host, script: str, opts: BatchOptions, name: str,
                           controller: str, k: int, chosen: Sequence[str],
                           others: Sequence[str], *, refuse: Callable[[str], BatchRefused],
                           failed: Callable[[str], BatchRefused] | None = None) -> Completed:
    """Run a controller's pause script (lease, watchdog, then pause the first ``k`` of
    ``chosen + others``); a ``refuse`` line raises ``refuse(code)``, a script that did not
    reach "paused" raises ``failed(description)`` (default: :func:`pause_failed`)."""
    done = await run_script(host, script, batch_lease.WATCHDOG, opts.lease_dir, name,
                            new_token(), str(opts.lease_s), controller, str(k),
                            *chosen, *others)
    lines = done.stdout.splitlines()
    refusals = refusal_lines(lines)
    if refusals:
        raise refuse(refusals[0])
    if "paused" not in lines:
        raise failed(done.describe()) if failed else pause_failed(host, done.describe())
    return done


async def resume_with_lease(host: Host, controller: str, opts: BatchOptions, name: str,
                            entries: Sequence[str], note: str) -> tuple[str, ...]:
    """Resume ``entries`` and whatever the lease recorded, drop the lease; the notes."""
    done = await run_script(host, batch_lease.RESUME, controller, opts.lease_dir, name,
                            *entries)
    return fail_notes(done.stdout, note)


class Readback(NamedTuple):
    """What a controller makes of the targets it read back."""

    state: str
    targets: tuple[str, ...]
    detail: str
    paused: tuple[str, ...]


T = TypeVar("T")


class ListController(Generic[T]):
    """The flow of the controllers whose selection is a list of targets in one [batch] key
    (cgroup, unit, container): every call reads the targets back with the status script,
    a pause carries a lease, a resume drops it. A subclass says what is its own: the key,
    its scripts, how to parse and judge what it reads, and its refusals."""

    name: str
    selection: str  # the BatchOptions field holding the targets: cgroups, units, containers
    missing: tuple[str, str]  # (message, fix) when that field is empty
    status_script: str  # sh -c SCRIPT inferfit [PREFIX...] LEASE_DIR NAME TARGET...
    status_prefix: tuple[str, ...] = ()
    pause_script: str
    pause_note: str  # before each "fail WHAT" the pause script printed
    resume_note: str
    resume_rest: bool = False  # resume all the targets not chosen, not just the paused ones

    # -- what a subclass provides ------------------------------------------------------

    def _parse(self, host: Host, text: str) -> tuple[list[T], Lease | None]:
        """Parse the status script's output; raise BatchRefused where the box says no."""
        raise NotImplementedError

    def _readback(self, items: list[T]) -> Readback:
        raise NotImplementedError

    def _check_pause(self, host: Host, items: list[T], fraction: float) -> None:
        """Raise BatchRefused when these targets must not be paused (nothing changed yet)."""

    def _plan(self, items: list[T]) -> tuple[list[str], list[str]]:
        """(every target's pause-script entry, the entries of those already paused)."""
        raise NotImplementedError

    def _resume_entries(self, items: list[T]) -> list[str]:
        raise NotImplementedError

    def _landed(self, items: list[T]) -> set[str] | None:
        """The entries shown paused, to re-read until the pause lands; None: read once (the
        pause script waited for it)."""
        return None

    def _refuse_pause(self, host: Host, code: str) -> BatchRefused:
        return lease_refused(host, code)

    def _pause_failed(self, host: Host, what: str) -> BatchRefused:
        return lease_refused(host, what)

    def _pause_notes(self, text: str) -> tuple[str, ...]:
        return fail_notes(text, self.pause_note)

    # -- the shared flow ---------------------------------------------------------------

    def _selected(self, opts: BatchOptions) -> tuple[str, ...]:
        selected: tuple[str, ...] = getattr(opts, self.selection)
        return selected

    def _opts(self, options: Mapping[str, Any]) -> BatchOptions:
        opts = BatchOptions.from_mapping(options, expect=self.name)
        if not self._selected(opts):
            message, fix = self.missing
            raise BatchRefused(message, kind="config", fix=fix)
        return opts

    def _name(self, opts: BatchOptions) -> str:
        return batch_lease.lease_name(self.name, " ".join(self._selected(opts)))

    async def _read(self, host: Host, opts: BatchOptions) -> tuple[list[T], Lease | None]:
        done = await run_script(host, self.status_script, *self.status_prefix, opts.lease_dir,
                                self._name(opts), *self._selected(opts))
        return self._parse(host, done.stdout)

    def _state(self, opts: BatchOptions, items: list[T], lease: Lease | None,
               notes: tuple[str, ...] = ()) -> ControllerState:
        seen = self._readback(items)
        return ControllerState(
            controller=self.name, state=seen.state, targets=seen.targets, detail=seen.detail,
            paused_targets=seen.paused, lease=lease, lease_name=self._name(opts), notes=notes,
        )

    async def status(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = self._opts(options)
        items, lease = await self._read(host, opts)
        return self._state(opts, items, lease)

    async def pause(self, host: Host, options: Mapping[str, Any], *,
                    fraction: float = 1.0) -> ControllerState:
        opts = self._opts(options)
        items, _ = await self._read(host, opts)
        self._check_pause(host, items, fraction)
        k = pause_count(len(items), fraction)
        entries, paused = self._plan(items)
        chosen, others = split_for_pause(entries, paused, k)
        if not self.resume_rest:
            others = [o for o in others if o in paused]
        done = await pause_with_lease(
            host, self.pause_script, opts, self._name(opts), self.name, k, chosen, others,
            refuse=lambda code: self._refuse_pause(host, code),
            failed=lambda what: self._pause_failed(host, what),
        )
        notes = self._pause_notes(done.stdout)
        want = set(chosen)
        for _ in range(SETTLE_READS):
            items, lease = await self._read(host, opts)
            landed = self._landed(items)
            if landed is None or landed >= want:
                break
            await asyncio.sleep(SETTLE_S)
        return self._state(opts, items, lease, notes)

    async def resume(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = self._opts(options)
        items, _ = await self._read(host, opts)
        notes = await resume_with_lease(host, self.name, opts, self._name(opts),
                                        self._resume_entries(items), self.resume_note)
        items, lease = await self._read(host, opts)
        return self._state(opts, items, lease, notes)
