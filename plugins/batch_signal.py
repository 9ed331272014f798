"""Batch controller ``signal``: SIGSTOP/SIGCONT to an exact selection of processes.

The selection is one of (in [batch]):

* ``pidfile``  — the pid(s) written in that file on the box;
* ``pattern``  — ``pgrep -f -x PATTERN``: the *whole* command line must match the
  (extended) regular expression; a near miss or a substring matches nothing;
* ``cgroup``   — the members (``cgroup.procs``) of one cgroup directory.

Never signalled: pid 1, the controller's own shell and every ancestor of it (the
sshd session), and lease watchdogs. If the selection includes any of them the
pattern is too broad and the whole action is refused. Before anything is stopped,
every selected pid is checked with ``kill -0``; one the login user may not signal
refuses the whole action. Pids travel as ``PID:STARTTIME`` so a recycled pid is
never signalled.

State is read from ``/proc/PID/stat`` (state ``T`` = stopped) on every call.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferfit.api import BatchController
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host
from inferfit.plugins import batch_lease
from inferfit.plugins.batch_common import (
    APPLY,
    BatchOptions,
    BatchRefused,
    ControllerState,
    fail_notes,
    fold_state,
    pause_count,
    pause_with_lease,
    refusal_lines,
    resume_with_lease,
    run_script,
    split_for_pause,
)

_SELECT = batch_lease.PRELUDE + r"""
mode=$1; val=$2; ldir=$3; lname=$4
anc=" $$ "
p=$PPID
i=0
while [ -n "$p" ] && [ "$p" -gt 1 ] && [ "$i" -lt 64 ]; do
  anc="$anc$p "
  s=$(cat "/proc/$p/stat" 2>/dev/null) || break
  set -- ${s##*) }
  p=$2
  i=$((i + 1))
done
case $mode in
  pattern)
    command -v pgrep >/dev/null 2>&1 || { echo "refuse nopgrep"; exit 0; }
    pids=$(pgrep -f -x -- "$val" 2>/dev/null)
    rc=$?
    [ "$rc" -le 1 ] || { echo "refuse badpattern $rc"; exit 0; } ;;
  pidfile)
    [ -e "$val" ] || { echo "refuse nopidfile"; exit 0; }
    pids=$(cat -- "$val" 2>/dev/null) || { echo "refuse unreadable"; exit 0; } ;;
  cgroup)
    [ -f "$val/cgroup.procs" ] || { echo "refuse nocgroup"; exit 0; }
    pids=$(cat -- "$val/cgroup.procs" 2>/dev/null) || { echo "refuse unreadable"; exit 0; } ;;
esac
for p in $pids; do
  case $p in ''|*[!0-9]*) echo "bad $p"; continue ;; esac
  c=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
  if [ "$p" -le 1 ]; then echo "self $p init"; continue; fi
  case "$anc" in *" $p "*) echo "self $p $c" | cut -c1-200; continue ;; esac
  case "$c" in *" $MARK "*) echo "self $p lease watchdog"; continue ;; esac
  x=$(pst "$p") || { echo "gone $p"; continue; }
  if [ -z "$c" ]; then echo "self $p kernel thread"; continue; fi
  printf 'pid %s %s %.160s\n' "$p" "$x" "$c"
done
lr "${ldir:-$HOME/.cache/inferfit/batch}/$lname"
"""

_FUNCS = APPLY + r"""
show() {
  for _e; do
    _p=${_e%%:*}
    _x=$(pst "$_p") || continue
    printf 'pid %s %s %.160s\n' "$_p" "$_x" "$(tr '\0' ' ' <"/proc/$_p/cmdline" 2>/dev/null)"
  done
}
pre() {
  shift
  _perm=""
  for _e; do
    _p=${_e%%:*}
    if same "$_p" "${_e#*:}" && ! kill -0 "$_p" 2>/dev/null; then _perm="$_perm $_p"; fi
  done
  [ -z "$_perm" ] && return 0
  echo "refuse perm$_perm"
  return 1
}
stop1() {
  _p=${1%%:*}
  if same "$_p" "${1#*:}"; then kill -STOP "$_p" 2>/dev/null || echo "fail $_p"; fi
}
cont1() {
  _p=${1%%:*}
  if same "$_p" "${1#*:}"; then
    _x=$(pst "$_p")
    [ "${_x%% *}" != T ] || kill -CONT "$_p" 2>/dev/null || echo "fail $_p"
  fi
}
# SIGSTOP lands asynchronously (the task must run to stop): apply waits for T.
landed() {
  _x=$(pst "${1%%:*}") || return 0
  [ "${_x%% *}" = T ]
}
"""

_PAUSE = batch_lease.pause_script(_FUNCS)


@dataclass(frozen=True)
class Proc:
    pid: int
    state: str  # /proc/PID/stat field 3: R S D T t Z ...
    starttime: str
    uid: int
    cmd: str

    @property
    def stopped(self) -> bool:
        return self.state == "T"

    @property
    def entry(self) -> str:
        return f"{self.pid}:{self.starttime}"


@dataclass
class Selection:
    procs: list[Proc] = field(default_factory=list)
    self_matches: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    lease: batch_lease.Lease | None = None


def parse_selection(text: str) -> Selection:
    """Parse the select script's output (pure; see tests/mixed for recordings)."""
    sel = Selection()
    lines = text.splitlines()
    sel.refusals = refusal_lines(lines)
    sel.lease = batch_lease.find_lease(lines)
    for line in lines:
        tag, _, rest = line.partition(" ")
        if tag == "pid":
            parts = rest.split(" ", 4)
            if len(parts) >= 4 and parts[0].isdigit() and parts[1] not in ("Z", "X"):
                sel.procs.append(Proc(int(parts[0]), parts[1], parts[2], _int(parts[3]),
                                      parts[4].strip() if len(parts) > 4 else ""))
        elif tag == "self":
            sel.self_matches.append(rest.strip())
        elif tag == "bad":
            sel.bad.append(rest.strip())
    sel.procs.sort(key=lambda p: p.pid)
    return sel


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def selection_of(opts: BatchOptions) -> tuple[str, str]:
    """(mode, value) of the configured selection; exactly one must be set."""
    chosen = [(m, v) for m, v in (("pidfile", opts.pidfile), ("pattern", opts.pattern),
                                  ("cgroup", " ".join(opts.cgroups))) if v]
    if len(chosen) != 1:
        what = "none" if not chosen else ", ".join(m for m, _ in chosen)
        raise BatchRefused(
            f"controller signal needs exactly one of [batch] pidfile, pattern or cgroup "
            f"(set: {what})",
            kind="config",
            fix="choose one selection so that what gets stopped is unambiguous",
        )
    mode, value = chosen[0]
    if mode == "cgroup" and len(opts.cgroups) != 1:
        raise BatchRefused("controller signal takes one cgroup directory", kind="config")
    return mode, value


def _refuse(code: str, mode: str, value: str, host: Host) -> BatchRefused:
    word, _, rest = code.partition(" ")
    quoted = shlex.quote(value)
    messages: dict[str, tuple[str, str, str]] = {
        "nopgrep": ("pgrep is not installed on the box", "no_pgrep",
                    "install procps, or select by pidfile or cgroup"),
        "badpattern": (f"pgrep rejected the pattern {quoted} (not a valid regular expression)",
                       "bad_pattern", "fix the regular expression in [batch] pattern"),
        "nopidfile": (f"pidfile {quoted} does not exist on {host.name}", "no_target",
                      "check [batch] pidfile; is the batch service running?"),
        "unreadable": (f"cannot read {quoted} on {host.name}", "permission_denied",
                       "connect as a user who may read it"),
        "nocgroup": (f"{quoted} is not a cgroup directory on {host.name}", "no_target",
                     "check [batch] cgroup (a directory with cgroup.procs)"),
        "perm": (f"the login user may not signal pid(s) {rest.strip()} on {host.name}; "
                 "nothing was paused", "permission_denied",
                 "connect as the user that owns the batch workers (or root)"),
        "leasedir": (f"cannot create the lease directory {rest} on {host.name}",
                     "lease_failed", "set [batch] lease_dir to a writable directory"),
        "leasewrite": (f"cannot write the lease file {rest}", "lease_failed",
                       "set [batch] lease_dir to a writable directory"),
        "watchdog": ("the lease watchdog did not start on the box; nothing was paused",
                     "lease_failed", "the box needs sh, setsid or nohup, and date"),
    }
    text, kind, fix = messages.get(word, (f"refused: {code}", "refused", ""))
    return BatchRefused(text, kind=kind, fix=fix)


class SignalController:
    name = "signal"

    async def select(self, host: Host, opts: BatchOptions) -> tuple[str, str, Selection]:
        mode, value = selection_of(opts)
        name = batch_lease.lease_name(self.name, f"{mode}\0{value}")
        done = await run_script(host, _SELECT, mode, value, opts.lease_dir, name)
        sel = parse_selection(done.stdout)
        if sel.refusals:
            raise _refuse(sel.refusals[0], mode, value, host)
        if sel.self_matches:
            raise BatchRefused(
                f"the {mode} {shlex.quote(value)} also selects processes inferfit must never "
                f"stop ({'; '.join(sel.self_matches)[:300]}); nothing was changed",
                kind="selection_too_broad",
                fix="make the pattern match the batch workers' full command line exactly",
            )
        if sel.bad:
            raise BatchRefused(
                f"{shlex.quote(value)} holds something that is not a pid: "
                f"{' '.join(sel.bad)[:100]}",
                kind="bad_pidfile",
            )
        return mode, name, sel

    def _state(self, mode: str, value: str, name: str, sel: Selection,
               notes: tuple[str, ...] = ()) -> ControllerState:
        stopped = [p for p in sel.procs if p.stopped]
        state = fold_state(len(sel.procs), len(stopped))
        if state == "absent":
            detail = f"no process matches the {mode} {value}"
        else:
            detail = f"{len(stopped)} of {len(sel.procs)} processes stopped"
        return ControllerState(
            controller=self.name,
            state=state,
            targets=tuple(str(p.pid) for p in sel.procs),
            detail=detail,
            paused_targets=tuple(str(p.pid) for p in stopped),
            lease=sel.lease,
            lease_name=name,
            notes=notes,
        )

    async def status(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = BatchOptions.from_mapping(options, expect=self.name)
        mode, name, sel = await self.select(host, opts)
        return self._state(mode, selection_of(opts)[1], name, sel)

    async def pause(self, host: Host, options: Mapping[str, Any], *,
                    fraction: float = 1.0) -> ControllerState:
        opts = BatchOptions.from_mapping(options, expect=self.name)
        mode, name, sel = await self.select(host, opts)
        value = selection_of(opts)[1]
        if not sel.procs:
            raise BatchRefused(
                f"no process on {host.name} matches the {mode} {shlex.quote(value)}"
                + (" exactly (pgrep -f -x: the whole command line must match; a near miss "
                   "does not count)" if mode == "pattern" else ""),
                kind="no_target",
                fix="check that the batch workers run and that the selection names them",
            )
        k = pause_count(len(sel.procs), fraction)
        entries = [p.entry for p in sel.procs]
        chosen, others = split_for_pause(entries, [p.entry for p in sel.procs if p.stopped], k)
        done = await pause_with_lease(
            host, _PAUSE, opts, name, self.name, k, chosen, others,
            refuse=lambda code: _refuse(code, mode, value, host),
        )
        notes = fail_notes(done.stdout, "could not signal pid")
        after = parse_selection(done.stdout)  # the script printed the state it left
        return self._state(mode, value, name, after, notes)

    async def resume(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = BatchOptions.from_mapping(options, expect=self.name)
        mode, value = selection_of(opts)
        name = batch_lease.lease_name(self.name, f"{mode}\0{value}")
        try:
            _, _, sel = await self.select(host, opts)
            entries = [p.entry for p in sel.procs if p.stopped]
        except BatchRefused as exc:
            if exc.kind != "no_target":
                raise
            entries = []  # the lease's record still resumes what the pause stopped
        notes = await resume_with_lease(host, self.name, opts, name, entries,
                                        "could not signal pid")
        try:
            _, _, after = await self.select(host, opts)
        except BatchRefused as exc:
            if exc.kind != "no_target":
                raise
            after = Selection()
        return self._state(mode, value, name, after, notes)


CONTROLLER = SignalController()


@hookimpl
def inferfit_register_batch_controllers(register: Callable[[BatchController], None]) -> None:
    register(CONTROLLER)
