"""Batch controller ``systemd``: ``systemctl freeze/thaw UNIT``, else ``systemctl kill --signal``.

``[batch] unit`` names one or more units (separate with spaces). Pausing tries
``systemctl freeze`` (systemd >= 246 on the unified cgroup hierarchy); where the
box refuses it (older systemd, cgroup v1) it falls back to
``systemctl kill --signal=SIGSTOP``. Resuming (and the lease watchdog) runs
``systemctl thaw`` and ``systemctl kill --signal=SIGCONT``: each undoes one
method and does nothing to a unit paused by the other.

State is read back each time: ``systemctl show`` (LoadState, ActiveState,
FreezerState, MainPID, ControlGroup) and ``/proc/PID/stat`` of the unit's
processes (from its cgroup) for the signal method.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from inferfit.api import BatchController
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host
from inferfit.plugins import batch_lease
from inferfit.plugins.batch_common import (
    APPLY,
    BatchRefused,
    ListController,
    Readback,
    fail_notes,
    fold_state,
    refusal_lines,
)

SHOW_PROPERTIES = ("Id", "LoadState", "ActiveState", "SubState", "FreezerState", "MainPID",
                   "ControlGroup")

_STATUS = batch_lease.PRELUDE + r"""
ldir=$1; lname=$2
shift 2
command -v systemctl >/dev/null 2>&1 || { echo "refuse nosystemctl"; exit 0; }
for u; do
  echo "unit $u"
  out=$(systemctl show -p Id -p LoadState -p ActiveState -p SubState -p FreezerState \
        -p MainPID -p ControlGroup -- "$u" 2>&1)
  echo "rc $?"
  printf '%s\n' "$out" | head -n 20 | sed 's/^/show /'
  cg=$(printf '%s\n' "$out" | sed -n 's/^ControlGroup=//p')
  if [ -n "$cg" ]; then
    for b in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do
      if [ -f "$b$cg/cgroup.procs" ]; then
        for p in $(cat "$b$cg/cgroup.procs" 2>/dev/null); do
          x=$(pst "$p") && echo "pid $p $x"
        done
        break
      fi
    done
  fi
done
lr "${ldir:-$HOME/.cache/inferfit/batch}/$lname"
"""

_FUNCS = APPLY + r"""
stop1() {
  if _o=$(systemctl freeze -- "$1" 2>&1); then
    echo "method freeze $1"
  else
    echo "nofreeze $1 $_o" | head -n 1
    if systemctl kill --signal=SIGSTOP -- "$1" >/dev/null 2>&1; then
      echo "method signal $1"
    else
      echo "fail $1"
    fi
  fi
}
cont1() {
  systemctl thaw -- "$1" >/dev/null 2>&1
  systemctl kill --signal=SIGCONT -- "$1" >/dev/null 2>&1
}
"""

_PAUSE = batch_lease.pause_script(_FUNCS)
_NOT_BOOTED = ("has not been booted with systemd", "Failed to connect to bus",
               "System has not been booted")


@dataclass
class UnitInfo:
    name: str
    rc: int = 0
    props: dict[str, str] = field(default_factory=dict)
    pid_states: dict[int, str] = field(default_factory=dict)
    raw: list[str] = field(default_factory=list)

    @property
    def exists(self) -> bool:
        return self.rc == 0 and self.props.get("LoadState", "") not in ("", "not-found")

    @property
    def frozen(self) -> bool:
        return self.props.get("FreezerState", "") == "frozen"

    @property
    def signal_stopped(self) -> bool:
        return bool(self.pid_states) and all(s == "T" for s in self.pid_states.values())

    @property
    def paused(self) -> bool:
        return self.frozen or self.signal_stopped

    @property
    def partly(self) -> bool:
        return (self.props.get("FreezerState", "") in ("freezing", "thawing")
                or any(s == "T" for s in self.pid_states.values()))


def parse_status(text: str) -> tuple[list[UnitInfo], list[str], batch_lease.Lease | None]:
    """Parse the status script: per unit its rc, `systemctl show` lines and pid states."""
    units: list[UnitInfo] = []
    lines = text.splitlines()
    for line in lines:
        tag, _, rest = line.partition(" ")
        if tag == "unit":
            units.append(UnitInfo(rest.strip()))
        elif not units:
            continue
        elif tag == "rc" and rest.strip().lstrip("-").isdigit():
            units[-1].rc = int(rest)
        elif tag == "show":
            units[-1].raw.append(rest)
            key, sep, value = rest.partition("=")
            if sep and key in SHOW_PROPERTIES:
                units[-1].props[key] = value.strip()
        elif tag == "pid":
            parts = rest.split()
            if len(parts) >= 2 and parts[0].isdigit():
                units[-1].pid_states[int(parts[0])] = parts[1]
    return units, refusal_lines(lines), batch_lease.find_lease(lines)


def not_booted(units: list[UnitInfo]) -> str | None:
    for u in units:
        text = " ".join(u.raw)
        if u.rc != 0 and any(m in text for m in _NOT_BOOTED):
            return text.strip()[:200]
    return None


class SystemdController(ListController[UnitInfo]):
    name = "systemd"
    selection = "units"
    missing = ("controller systemd needs [batch] unit", 'e.g. unit = "batch-worker.service"')
    status_script = _STATUS
    pause_script = _PAUSE
    pause_note = "could not pause"
    resume_note = "could not resume"

    def _parse(self, host: Host, text: str) -> tuple[list[UnitInfo], batch_lease.Lease | None]:
        units, refusals, lease = parse_status(text)
        if refusals:
            raise BatchRefused(f"systemctl is not installed on {host.name}", kind="no_systemd",
                               fix="use controller signal, cgroup or docker on this box")
        why = not_booted(units)
        if why:
            raise BatchRefused(f"systemd is not running on {host.name}: {why}",
                               kind="no_systemd",
                               fix="use controller signal or cgroup on this box")
        return units, lease

    def _readback(self, items: list[UnitInfo]) -> Readback:
        present = [u for u in items if u.exists]
        paused = [u for u in present if u.paused]
        state = fold_state(len(present), len(paused))
        if state == "running" and any(u.partly for u in present):
            state = "partly_paused"
        parts = []
        for u in present:
            how = ("frozen" if u.frozen else "stopped (SIGSTOP)" if u.signal_stopped
                   else u.props.get("FreezerState") or u.props.get("ActiveState", "?"))
            parts.append(f"{u.name} {how}, {len(u.pid_states)} processes")
        missing = [u.name for u in items if not u.exists]
        if missing:
            parts.append(f"not found: {' '.join(missing)}")
        return Readback(state, tuple(u.name for u in present), "; ".join(parts),
                        tuple(u.name for u in paused))

    def _check_pause(self, host: Host, items: list[UnitInfo], fraction: float) -> None:
        missing = [u.name for u in items if not u.exists]
        if missing:
            raise BatchRefused(
                f"unit {' '.join(map(shlex.quote, missing))} does not exist on {host.name}",
                kind="no_target", fix="check [batch] unit (systemctl list-units)",
            )

    def _plan(self, items: list[UnitInfo]) -> tuple[list[str], list[str]]:
        return [u.name for u in items], [u.name for u in items if u.paused or u.partly]

    def _resume_entries(self, items: list[UnitInfo]) -> list[str]:
        return [u.name for u in items if u.exists and (u.paused or u.partly)]

    def _landed(self, items: list[UnitInfo]) -> set[str] | None:
        return {u.name for u in items if u.paused}  # freezing and SIGSTOP land asynchronously

    def _pause_notes(self, text: str) -> tuple[str, ...]:
        return tuple(
            f"{line.split(' ', 2)[1]}: systemctl freeze refused, used SIGSTOP "
            f"({line.split(' ', 2)[2] if line.count(' ') >= 2 else ''})".rstrip()
            for line in text.splitlines() if line.startswith("nofreeze ")
        ) + fail_notes(text, self.pause_note)


CONTROLLER = SystemdController()


@hookimpl
def inferfit_register_batch_controllers(register: Callable[[BatchController], None]) -> None:
    register(CONTROLLER)
