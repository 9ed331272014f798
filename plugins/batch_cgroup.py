"""Batch controller ``cgroup``: freeze whole cgroups (v2 ``cgroup.freeze``, v1 ``freezer.state``).

``[batch] cgroup`` names one or more cgroup directories (absolute, below
/sys/fs/cgroup; separate several with spaces). Which interface to use is read
from the directory itself: ``cgroup.freeze`` (v2) or ``freezer.state`` (v1
freezer hierarchy). A throttle freezes a fraction of the listed cgroups; one
cgroup cannot be frozen in part (use controller ``signal`` with ``cgroup`` for that).

Refused: a directory that is missing or has no freezer, one the login user may
not write, and any cgroup that holds inferfit's own shell on the box (freezing
it would freeze the lease watchdog too). State is read back from
``cgroup.events`` (``frozen 1``) or ``freezer.state`` on every call.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferfit.plugins import batch_lease
from inferfit.plugins.batch_common import (
    BatchOptions,
    BatchRefused,
    ControllerState,
    fold_state,
    new_token,
    pause_count,
    refusal_lines,
    run_script,
    split_for_pause,
)

from inferfit.api import BatchController
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host

_STATUS = batch_lease.PRELUDE + r"""
ldir=$1; lname=$2
shift 2
for d; do
  if [ -f "$d/cgroup.freeze" ]; then
    v=2
    w=$(cat "$d/cgroup.freeze" 2>/dev/null)
    f=$(sed -n 's/^frozen //p' "$d/cgroup.events" 2>/dev/null)
    if [ "$f" = 1 ]; then st=frozen; elif [ "$w" = 1 ]; then st=freezing; else st=thawed; fi
    ctl=$d/cgroup.freeze
  elif [ -f "$d/freezer.state" ]; then
    v=1
    st=$(tr 'A-Z' 'a-z' <"$d/freezer.state" 2>/dev/null)
    ctl=$d/freezer.state
  elif [ -d "$d" ]; then
    echo "cg 0 nofreezer 0 0 0 $d"; continue
  else
    echo "cg 0 missing 0 0 0 $d"; continue
  fi
  n=$(wc -l <"$d/cgroup.procs" 2>/dev/null) || n=0
  own=0
  if find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | grep -qx "$$"; then own=1; fi
  wr=0
  [ -w "$ctl" ] && wr=1
  echo "cg $v ${st:-unknown} $n $own $wr $d"
done
lr "${ldir:-$HOME/.cache/inferfit/batch}/$lname"
"""

_FUNCS = r"""
pre() {
  shift
  for _e; do
    _d=${_e#?:}
    if find "$_d" -name cgroup.procs -exec cat {} + 2>/dev/null | grep -qx "$$"; then
      echo "refuse own $_d"; return 1
    fi
    case $_e in
      2:*) [ -w "$_d/cgroup.freeze" ] || { echo "refuse perm $_d"; return 1; } ;;
      1:*) [ -w "$_d/freezer.state" ] || { echo "refuse perm $_d"; return 1; } ;;
    esac
  done
}
apply() {
  _k=$1
  _c=$1
  shift
  for _e; do
    _d=${_e#?:}
    if [ "$_c" -gt 0 ]; then
      case $_e in
        2:*) echo 1 2>/dev/null >"$_d/cgroup.freeze" || echo "fail $_d" ;;
        1:*) echo FROZEN 2>/dev/null >"$_d/freezer.state" || echo "fail $_d" ;;
      esac
    else
      case $_e in
        2:*) echo 0 2>/dev/null >"$_d/cgroup.freeze" || echo "fail $_d" ;;
        1:*) echo THAWED 2>/dev/null >"$_d/freezer.state" || echo "fail $_d" ;;
      esac
    fi
    _c=$((_c - 1))
  done
  # Freezing completes asynchronously: wait (at most 5 s) for it.
  _t=0
  while [ "$_t" -lt 50 ]; do
    _c=$_k
    _ok=1
    for _e; do
      [ "$_c" -gt 0 ] || break
      _c=$((_c - 1))
      _d=${_e#?:}
      case $_e in
        2:*) grep -qx 'frozen 1' "$_d/cgroup.events" 2>/dev/null || _ok=0 ;;
        1:*) grep -qx FROZEN "$_d/freezer.state" 2>/dev/null || _ok=0 ;;
      esac
    done
    [ "$_ok" = 1 ] && break
    sleep 0.1 2>/dev/null || sleep 1
    _t=$((_t + 1))
  done
}
"""

_PAUSE = batch_lease.pause_script(_FUNCS)


@dataclass(frozen=True)
class CgroupInfo:
    path: str
    version: int  # 2, 1, or 0 when missing / not freezable
    state: str  # frozen | freezing | thawed | missing | nofreezer
    nprocs: int
    holds_self: bool
    writable: bool

    @property
    def entry(self) -> str:
        return f"{self.version}:{self.path}"

    @property
    def frozen(self) -> bool:
        return self.state == "frozen"

    @property
    def exists(self) -> bool:
        return self.version in (1, 2)


def parse_status(text: str) -> tuple[list[CgroupInfo], batch_lease.Lease | None]:
    """Parse ``cg V STATE NPROCS OWN WRITABLE DIR`` lines and the lease (pure)."""
    infos = []
    for line in text.splitlines():
        parts = line.split(" ", 6)
        if parts[0] != "cg" or len(parts) < 7:
            continue
        try:
            version, nprocs = int(parts[1]), int(parts[3])
        except ValueError:
            continue
        infos.append(CgroupInfo(parts[6], version, parts[2], nprocs, parts[4] == "1",
                                parts[5] == "1"))
    return infos, batch_lease.find_lease(text.splitlines())


class CgroupController:
    name = "cgroup"

    def _opts(self, options: Mapping[str, Any]) -> BatchOptions:
        opts = BatchOptions.from_mapping(options, expect=self.name)
        if not opts.cgroups:
            raise BatchRefused(
                "controller cgroup needs [batch] cgroup (one or more cgroup directories)",
                kind="config", fix="e.g. cgroup = \"/sys/fs/cgroup/batch.slice\"",
            )
        return opts

    def _name(self, opts: BatchOptions) -> str:
        return batch_lease.lease_name(self.name, " ".join(opts.cgroups))

    async def _read(self, host: Host, opts: BatchOptions) -> tuple[list[CgroupInfo],
                                                                   batch_lease.Lease | None]:
        done = await run_script(host, _STATUS, opts.lease_dir, self._name(opts), *opts.cgroups)
        return parse_status(done.stdout)

    def _state(self, opts: BatchOptions, infos: list[CgroupInfo],
               lease: batch_lease.Lease | None, notes: tuple[str, ...] = ()) -> ControllerState:
        present = [i for i in infos if i.exists]
        frozen = [i for i in present if i.frozen]
        missing = [i.path for i in infos if not i.exists]
        state = fold_state(len(present), len(frozen))
        procs = sum(i.nprocs for i in present)
        detail = (f"{len(frozen)} of {len(present)} cgroups frozen, {procs} processes"
                  if present else "no freezable cgroup")
        if missing:
            detail += f"; missing or without freezer: {' '.join(missing)}"
        return ControllerState(
            controller=self.name, state=state, targets=tuple(i.path for i in present),
            detail=detail, paused_targets=tuple(i.path for i in frozen), lease=lease,
            lease_name=self._name(opts), notes=notes,
        )

    async def status(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = self._opts(options)
        infos, lease = await self._read(host, opts)
        return self._state(opts, infos, lease)

    async def pause(self, host: Host, options: Mapping[str, Any], *,
                    fraction: float = 1.0) -> ControllerState:
        opts = self._opts(options)
        infos, _ = await self._read(host, opts)
        for info in infos:
            if not info.exists:
                what = "does not exist" if info.state == "missing" else "has no freezer"
                raise BatchRefused(
                    f"cgroup {shlex.quote(info.path)} {what} on {host.name}", kind="no_target",
                    fix="check [batch] cgroup: a v2 cgroup (cgroup.freeze) or a directory "
                    "in the v1 freezer hierarchy",
                )
            if info.holds_self:
                raise BatchRefused(
                    f"cgroup {info.path} holds inferfit's own shell on {host.name}; freezing "
                    "it would freeze the session and the lease watchdog",
                    kind="selection_too_broad",
                    fix="put only the batch workers into that cgroup",
                )
            if not info.writable:
                raise BatchRefused(
                    f"the login user may not freeze {info.path} on {host.name}",
                    kind="permission_denied",
                    fix="connect as root, or delegate the cgroup to the login user",
                )
        if fraction < 1 and len(infos) == 1:
            raise BatchRefused(
                "one cgroup cannot be frozen in part", kind="config",
                fix="list several cgroups in [batch] cgroup, or use controller = \"signal\" "
                "with the same cgroup to stop a fraction of its processes",
            )
        k = pause_count(len(infos), fraction)
        entries = [i.entry for i in infos]
        chosen, others = split_for_pause(entries, [i.entry for i in infos if i.frozen], k)
        done = await run_script(host, _PAUSE, batch_lease.WATCHDOG, opts.lease_dir,
                                self._name(opts), new_token(), str(opts.lease_s), self.name,
                                str(k), *chosen, *others)
        lines = done.stdout.splitlines()
        refusals = refusal_lines(lines)
        if refusals:
            raise _refused(refusals[0], host)
        if "paused" not in lines:
            raise BatchRefused(f"the pause script failed on {host.name}: {done.describe()}",
                               kind="pause_failed")
        notes = tuple(f"could not write the freezer of {line[5:]}" for line in lines
                      if line.startswith("fail "))
        infos, lease = await self._read(host, opts)
        return self._state(opts, infos, lease, notes)

    async def resume(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = self._opts(options)
        infos, _ = await self._read(host, opts)
        entries = [i.entry for i in infos if i.exists and i.state != "thawed"]
        done = await run_script(host, batch_lease.RESUME, self.name, opts.lease_dir,
                                self._name(opts), *entries)
        notes = tuple(f"could not thaw {line[5:]}" for line in done.stdout.splitlines()
                      if line.startswith("fail "))
        infos, lease = await self._read(host, opts)
        return self._state(opts, infos, lease, notes)


def _refused(code: str, host: Host) -> BatchRefused:
    word, _, rest = code.partition(" ")
    if word == "perm":
        return BatchRefused(f"the login user may not freeze {rest} on {host.name}",
                            kind="permission_denied", fix="connect as root")
    if word == "own":
        return BatchRefused(f"cgroup {rest} holds inferfit's own shell on {host.name}",
                            kind="selection_too_broad")
    if word == "watchdog":
        return BatchRefused("the lease watchdog did not start on the box; nothing was paused",
                            kind="lease_failed")
    return BatchRefused(f"cannot pause on {host.name}: {code}", kind="lease_failed",
                        fix="set [batch] lease_dir to a writable directory on the box")


CONTROLLER = CgroupController()


@hookimpl
def inferfit_register_batch_controllers(register: Callable[[BatchController], None]) -> None:
    register(CONTROLLER)
