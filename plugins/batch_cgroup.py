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
from collections.abc import Callable
from dataclasses import dataclass

from inferfit.api import BatchController
from inferfit.hookspecs import hookimpl
from inferfit.hosts.base import Host
from inferfit.plugins import batch_lease
from inferfit.plugins.batch_common import (
    APPLY,
    BatchRefused,
    ListController,
    Readback,
    fold_state,
    pause_failed,
)

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

_FUNCS = APPLY + r"""
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
# fz ENTRY V2 V1: write V2 to a v2 cgroup.freeze, V1 to a v1 freezer.state
fz() {
  _d=${1#?:}
  case $1 in
    2:*) echo "$2" 2>/dev/null >"$_d/cgroup.freeze" || echo "fail $_d" ;;
    1:*) echo "$3" 2>/dev/null >"$_d/freezer.state" || echo "fail $_d" ;;
  esac
}
stop1() { fz "$1" 1 FROZEN; }
cont1() { fz "$1" 0 THAWED; }
# Freezing completes asynchronously: apply waits for this.
landed() {
  _d=${1#?:}
  case $1 in
    2:*) grep -qx 'frozen 1' "$_d/cgroup.events" 2>/dev/null ;;
    1:*) grep -qx FROZEN "$_d/freezer.state" 2>/dev/null ;;
  esac
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


class CgroupController(ListController[CgroupInfo]):
    name = "cgroup"
    selection = "cgroups"
    missing = ("controller cgroup needs [batch] cgroup (one or more cgroup directories)",
               "e.g. cgroup = \"/sys/fs/cgroup/batch.slice\"")
    status_script = _STATUS
    pause_script = _PAUSE
    pause_note = "could not write the freezer of"
    resume_note = "could not thaw"
    resume_rest = True

    def _parse(self, host: Host, text: str) -> tuple[list[CgroupInfo],
                                                     batch_lease.Lease | None]:
        return parse_status(text)

    def _readback(self, items: list[CgroupInfo]) -> Readback:
        present = [i for i in items if i.exists]
        frozen = [i for i in present if i.frozen]
        missing = [i.path for i in items if not i.exists]
        procs = sum(i.nprocs for i in present)
        detail = (f"{len(frozen)} of {len(present)} cgroups frozen, {procs} processes"
                  if present else "no freezable cgroup")
        if missing:
            detail += f"; missing or without freezer: {' '.join(missing)}"
        return Readback(fold_state(len(present), len(frozen)), tuple(i.path for i in present),
                        detail, tuple(i.path for i in frozen))

    def _check_pause(self, host: Host, items: list[CgroupInfo], fraction: float) -> None:
        for info in items:
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
        if fraction < 1 and len(items) == 1:
            raise BatchRefused(
                "one cgroup cannot be frozen in part", kind="config",
                fix="list several cgroups in [batch] cgroup, or use controller = \"signal\" "
                "with the same cgroup to stop a fraction of its processes",
            )

    def _plan(self, items: list[CgroupInfo]) -> tuple[list[str], list[str]]:
        return [i.entry for i in items], [i.entry for i in items if i.frozen]

    def _resume_entries(self, items: list[CgroupInfo]) -> list[str]:
        return [i.entry for i in items if i.exists and i.state != "thawed"]

    def _refuse_pause(self, host: Host, code: str) -> BatchRefused:
        return _refused(code, host)

    def _pause_failed(self, host: Host, what: str) -> BatchRefused:
        return pause_failed(host, what)


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
