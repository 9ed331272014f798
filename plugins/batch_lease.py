"""The pause lease: a detached watchdog on the box that resumes batch work by itself.

Every built-in batch controller pauses *with* a lease. Before anything is
stopped, the pause script writes a lease file on the box (``TOKEN`` and an
expiry in epoch seconds, computed by the box's own clock) and starts this
watchdog with ``setsid nohup sh -c WATCHDOG ...`` so it outlives the SSH
session. The watchdog polls the lease file once a second:

* the file is gone, or holds another token  -> someone resumed, or a newer
  pause took over: exit without touching anything;
* the expiry has passed                     -> resume exactly what the pause
  stopped (pids checked against their start time, cgroups, units,
  containers), remove the lease file, exit.

Renewing rewrites the expiry (atomically, tmp + rename) under ``flock`` when
the box has it. An explicit resume resumes first and removes the file after,
so a dropped connection in between can only leave the watchdog to do it again.

Everything here is constant shell text; every value (paths, tokens, pids,
unit names) travels as a positional parameter through :func:`inferfit.hosts.sh`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from inferfit.hosts.base import Host, sh

MARKER = "inferfit-batch-lease"  # $0 of every watchdog: how the box can tell them apart
DEFAULT_DIR = "$HOME/.cache/inferfit/batch"  # expanded on the box when lease_dir is ""
MIN_LEASE_S = 2
RENEW_TIMEOUT_S = 20.0

# Shell functions every batch script starts with (POSIX sh: dash, bash, busybox ash).
PRELUDE = r"""
set -f
MARK=inferfit-batch-lease
# pst PID -> "STATE STARTTIME UID" from /proc/PID/stat; fails when the pid is gone
pst() {
  _p=$1
  _s=$(cat "/proc/$_p/stat" 2>/dev/null) || return 1
  [ -n "$_s" ] || return 1
  set -- ${_s##*) }
  _u=$(stat -c %u "/proc/$_p" 2>/dev/null) || _u=-1
  echo "$1 ${20} $_u"
}
# same PID STARTTIME -> true when PID is still the process that had STARTTIME
same() {
  _x=$(pst "$1") || return 1
  set -- $_x "$2"
  [ "$2" = "$4" ]
}
lk() {
  [ -d "${1%/*}" ] || return 0
  command exec 9>>"$1.lock" || return 0
  if command -v flock >/dev/null 2>&1; then flock -w 10 9 || :; fi
}
ulk() { command exec 9>&-; }
# lt LEASE K ENTRY...: record the first K entries next to the lease (resume reads them)
lt() {
  _l=$1
  _c=$2
  shift 2
  : >"$_l.targets.$$" || return 1
  for _i; do
    [ "$_c" -gt 0 ] || break
    _c=$((_c - 1))
    printf '%s\n' "$_i" >>"$_l.targets.$$"
  done
  mv -f "$_l.targets.$$" "$_l.targets"
}
# lw LEASE TOKEN TTL: write the lease atomically; prints "lease TOKEN EXPIRY NOW"
lw() {
  _n=$(date +%s)
  _e=$((_n + $3))
  printf '%s\n%s\n' "$2" "$_e" >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1" || return 1
  echo "lease $2 $_e $_n"
}
# lr LEASE: prints "lease TOKEN EXPIRY NOW WDPID ALIVE" or "nolease NOW"
lr() {
  _n=$(date +%s)
  if [ -f "$1" ] && { read -r _t; read -r _e; } 2>/dev/null <"$1"; then
    _w=$(cat "$1.wd" 2>/dev/null)
    _a=0
    case $_w in
      ''|*[!0-9]*) _w=0 ;;
      *) if tr '\0' ' ' <"/proc/$_w/cmdline" 2>/dev/null | grep -q "$MARK"; then _a=1; fi ;;
    esac
    echo "lease $_t $_e $_n $_w $_a"
  else
    echo "nolease $_n"
  fi
}
# resume_n KIND N ENTRY...: resume the first N entries of a pause
resume_n() {
  _k=$1
  _c=$2
  shift 2
  for _i; do
    [ "$_c" -gt 0 ] || break
    _c=$((_c - 1))
    case $_k in
      signal)
        if same "${_i%%:*}" "${_i#*:}"; then
          kill -CONT "${_i%%:*}" 2>/dev/null || echo "fail ${_i%%:*}"
        fi ;;
      cgroup)
        case $_i in
          2:*) echo 0 2>/dev/null >"${_i#2:}/cgroup.freeze" || echo "fail ${_i#2:}" ;;
          1:*) echo THAWED 2>/dev/null >"${_i#1:}/freezer.state" || echo "fail ${_i#1:}" ;;
        esac ;;
      systemd)
        systemctl thaw -- "$_i" >/dev/null 2>&1
        systemctl kill --signal=SIGCONT -- "$_i" >/dev/null 2>&1 || echo "fail $_i" ;;
      docker)
        docker unpause -- "$_i" >/dev/null 2>&1 || echo "fail $_i" ;;
    esac
  done
}
# wd_start WATCHDOG LEASE TOKEN KIND N ENTRY...: start the detached watchdog and wait
# (up to 3 s) until it reports its pid; fails when it did not start.
wd_start() {
  _wd=$1
  shift
  rm -f "$1.wd"
  if command -v setsid >/dev/null 2>&1; then
    setsid nohup sh -c "$_wd" "$MARK" "$@" </dev/null >/dev/null 2>&1 9>&- &
  else
    nohup sh -c "$_wd" "$MARK" "$@" </dev/null >/dev/null 2>&1 9>&- &
  fi
  _t=0
  while [ "$_t" -lt 150 ]; do
    [ -s "$1.wd" ] && return 0
    sleep 0.02 2>/dev/null || { sleep 1; _t=$((_t + 49)); }
    _t=$((_t + 1))
  done
  return 1
}
# lease_dir DIR: create the lease directory (private) and print it
lease_dir() {
  _d=${1:-$HOME/.cache/inferfit/batch}
  mkdir -p -- "$_d" 2>/dev/null && chmod 700 -- "$_d" 2>/dev/null
  [ -d "$_d" ] && [ -w "$_d" ] || return 1
  echo "$_d"
}
"""

# The watchdog itself: sh -c WATCHDOG inferfit-batch-lease LEASE TOKEN KIND N ENTRY...
WATCHDOG = PRELUDE + r"""
lease=$1; tok=$2; kind=$3; n=$4
shift 4
echo $$ >"$lease.wd.$$" && mv -f "$lease.wd.$$" "$lease.wd"
trap '' HUP
while :; do
  [ -f "$lease" ] || exit 0
  { read -r t; read -r e; } 2>/dev/null <"$lease" || exit 0
  [ "$t" = "$tok" ] || exit 0
  case $e in ''|*[!0-9]*) e=0 ;; esac
  if [ "$(date +%s)" -ge "$e" ]; then
    lk "$lease"
    if { read -r t; read -r e; } 2>/dev/null <"$lease" && [ "$t" = "$tok" ]; then
      case $e in ''|*[!0-9]*) e=0 ;; esac
      if [ "$(date +%s)" -ge "$e" ]; then
        resume_n "$kind" "$n" "$@" >/dev/null 2>&1
        rm -f "$lease"
        ulk
        exit 0
      fi
    fi
    ulk
  fi
  sleep 1
done
"""

_RENEW = PRELUDE + r"""
d=$(lease_dir "$1") || { echo "nodir"; exit 0; }
lease=$d/$2
lk "$lease"
if [ -f "$lease" ] && { read -r t; read -r e; } 2>/dev/null <"$lease"; then
  lw "$lease" "$t" "$3" >/dev/null
fi
ulk
lr "$lease"
"""

_READ = PRELUDE + r"""
d=${1:-$HOME/.cache/inferfit/batch}
lr "$d/$2"
"""


# Pause, generic part: sh -c PAUSE inferfit WATCHDOG LEASE_DIR NAME TOKEN TTL KIND K ENTRY...
# The controller's shell functions come first: ``pre K ENTRY...`` (print "refuse ..."
# lines and fail to refuse: nothing changed yet) and ``apply K ENTRY...`` (pause the
# first K entries, resume the rest). The lease and the watchdog exist before apply.
# ``show ENTRY...`` may print the state after the pause (the default prints nothing).
_PAUSE_BODY = r"""
wd=$1; ldir=$2; lname=$3; tok=$4; ttl=$5; kind=$6; k=$7
shift 7
d=$(lease_dir "$ldir") || { echo "refuse leasedir ${ldir:-$HOME/.cache/inferfit/batch}"; exit 0; }
lease=$d/$lname
pre "$k" "$@" || exit 0
lk "$lease"
if ! lw "$lease" "$tok" "$ttl" >/dev/null || ! lt "$lease" "$k" "$@"; then
  ulk; echo "refuse leasewrite $lease"; exit 0
fi
if ! wd_start "$wd" "$lease" "$tok" "$kind" "$k" "$@"; then
  rm -f "$lease" "$lease.targets"; ulk; echo "refuse watchdog"; exit 0
fi
apply "$k" "$@"
ulk
echo "paused"
show "$@"
lr "$lease"
"""

# Resume: sh -c RESUME inferfit KIND LEASE_DIR NAME ENTRY...: resume the entries given and
# those the lease recorded, then drop the lease (after, never before, the resume).
RESUME = PRELUDE + r"""
kind=$1; ldir=$2; lname=$3
shift 3
lease=${ldir:-$HOME/.cache/inferfit/batch}/$lname
lk "$lease"
if [ -f "$lease.targets" ]; then set -- "$@" $(cat "$lease.targets"); fi
resume_n "$kind" $# "$@"
rm -f "$lease" "$lease.targets"
ulk
echo "resumed"
"""


def pause_script(kind_functions: str) -> str:
    """The complete pause script for a controller's ``pre``/``apply``/``show`` functions."""
    return PRELUDE + "show() { :; }\n" + kind_functions + _PAUSE_BODY


@dataclass(frozen=True)
class Lease:
    """A lease as read back from the box."""

    token: str
    expires_in_s: float  # by the box's clock, at the moment it was read
    watchdog_pid: int
    watchdog_alive: bool
    read_at: float  # local time.monotonic() when read

    def remaining_s(self, now: float | None = None) -> float:
        """Seconds left now, counting down from the read (never negative)."""
        elapsed = (time.monotonic() if now is None else now) - self.read_at
        return max(0.0, self.expires_in_s - elapsed)


def lease_name(controller: str, key: str) -> str:
    """The lease file's name for one controller and selection (stable, path-safe)."""
    digest = hashlib.sha256(f"{controller}\0{key}".encode()).hexdigest()[:16]
    return f"{controller}-{digest}"


def parse_lease_line(line: str, read_at: float | None = None) -> Lease | None:
    """Parse ``lease TOKEN EXPIRY NOW WDPID ALIVE`` (or ``nolease NOW``) -> Lease or None."""
    parts = line.split()
    if len(parts) < 4 or parts[0] != "lease":
        return None
    try:
        expiry, now = int(parts[2]), int(parts[3])
        pid = int(parts[4]) if len(parts) > 4 else 0
    except ValueError:
        return None
    alive = len(parts) > 5 and parts[5] == "1"
    return Lease(
        token=parts[1],
        expires_in_s=float(max(0, expiry - now)),
        watchdog_pid=pid,
        watchdog_alive=alive,
        read_at=time.monotonic() if read_at is None else read_at,
    )


def find_lease(lines: list[str]) -> Lease | None:
    for line in lines:
        if line.startswith("lease ") or line.startswith("nolease"):
            return parse_lease_line(line)
    return None


async def renew(host: Host, lease_dir: str, name: str, ttl_s: int) -> Lease | None:
    """Push the expiry of an existing lease ``ttl_s`` seconds out; None when there is none.

    Never creates a lease: when someone resumed (file gone) it stays gone.
    """
    done = await host.run(sh(_RENEW, lease_dir, name, str(int(ttl_s))), timeout=RENEW_TIMEOUT_S)
    return find_lease(done.stdout.splitlines())


async def read(host: Host, lease_dir: str, name: str) -> Lease | None:
    done = await host.run(sh(_READ, lease_dir, name), timeout=RENEW_TIMEOUT_S)
    return find_lease(done.stdout.splitlines())
