"""Batch controller ``docker``: ``docker pause`` / ``docker unpause`` containers.

``[batch] container`` names one or more containers (names or ids, separated by
spaces); a throttle pauses a fraction of them. State is read back with
``docker inspect`` (State.Status, State.Paused, State.Pid) on every call. A
docker daemon that is down or refuses the login user is a clear refusal.
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
    refusal_lines,
)

INSPECT_FORMAT = "{{.Name}} {{.State.Status}} {{.State.Paused}} {{.State.Pid}}"

_STATUS = batch_lease.PRELUDE + r"""
fmt=$1; ldir=$2; lname=$3
shift 3
command -v docker >/dev/null 2>&1 || { echo "refuse nodocker"; exit 0; }
for c; do
  out=$(docker inspect --type container --format "$fmt" -- "$c" 2>&1)
  echo "ctr $? $c"
  printf '%s\n' "$out" | head -n 3 | sed 's/^/out /'
done
lr "${ldir:-$HOME/.cache/inferfit/batch}/$lname"
"""

_FUNCS = APPLY + r"""
stop1() {
  _p=$(docker inspect --type container --format '{{.State.Paused}}' -- "$1" 2>/dev/null)
  [ "$_p" = true ] || _o=$(docker pause -- "$1" 2>&1) || case $_o in
    *"already paused"*) ;;
    *) echo "fail $1 $_o" | head -n 1 ;;
  esac
}
cont1() {
  _o=$(docker unpause -- "$1" 2>&1) || case $_o in
    *"not paused"*) ;;
    *) echo "fail $1 $_o" | head -n 1 ;;
  esac
}
"""

_PAUSE = batch_lease.pause_script(_FUNCS)


@dataclass(frozen=True)
class ContainerInfo:
    ref: str  # as configured
    rc: int
    name: str = ""
    status: str = ""  # running | paused | exited | created | restarting | dead
    paused: bool = False
    pid: int = 0
    error: str = ""

    @property
    def exists(self) -> bool:
        return self.rc == 0 and bool(self.status)


def parse_status(text: str) -> tuple[list[ContainerInfo], list[str], batch_lease.Lease | None]:
    """Parse ``ctr RC REF`` + ``out ...`` blocks (pure; tested on recorded docker output)."""
    items: list[ContainerInfo] = []
    outs: list[list[str]] = []
    lines = text.splitlines()
    for line in lines:
        tag, _, rest = line.partition(" ")
        if tag == "ctr":
            rc, _, ref = rest.partition(" ")
            items.append(ContainerInfo(ref.strip(), int(rc) if rc.isdigit() else 1))
            outs.append([])
        elif tag == "out" and outs:
            outs[-1].append(rest)
    parsed: list[ContainerInfo] = []
    for item, out in zip(items, outs, strict=True):
        fields = out[0].split() if out else []
        if item.rc == 0 and len(fields) >= 4:
            parsed.append(ContainerInfo(
                item.ref, 0, fields[0].lstrip("/"), fields[1], fields[2] == "true",
                int(fields[3]) if fields[3].isdigit() else 0,
            ))
        else:
            parsed.append(ContainerInfo(item.ref, item.rc or 1, error=" ".join(out)[:300]))
    return parsed, refusal_lines(lines), batch_lease.find_lease(lines)


def daemon_problem(items: list[ContainerInfo]) -> BatchRefused | None:
    for item in items:
        err = item.error
        if "Cannot connect to the Docker daemon" in err or "Is the docker daemon running" in err:
            return BatchRefused(f"the docker daemon is not reachable: {err}", kind="no_docker",
                                fix="start docker on the box, or use another controller")
        if "permission denied" in err.lower() and "docker" in err.lower():
            return BatchRefused(f"the login user may not use docker: {err}",
                                kind="permission_denied",
                                fix="connect as a user in the docker group (or root)")
    return None


class DockerController(ListController[ContainerInfo]):
    name = "docker"
    selection = "containers"
    missing = ("controller docker needs [batch] container", 'e.g. container = "batch-worker"')
    status_script = _STATUS
    status_prefix = (INSPECT_FORMAT,)
    pause_script = _PAUSE
    pause_note = "could not pause/unpause"
    resume_note = "could not unpause"

    def _parse(self, host: Host, text: str) -> tuple[list[ContainerInfo],
                                                     batch_lease.Lease | None]:
        items, refusals, lease = parse_status(text)
        if refusals:
            raise BatchRefused(f"docker is not installed on {host.name}", kind="no_docker",
                               fix="use controller signal or cgroup on this box")
        problem = daemon_problem(items)
        if problem:
            raise problem
        return items, lease

    def _readback(self, items: list[ContainerInfo]) -> Readback:
        present = [i for i in items if i.exists]
        paused = [i for i in present if i.paused]
        parts = [f"{i.name or i.ref} {i.status} (pid {i.pid})" for i in present]
        missing = [i.ref for i in items if not i.exists]
        if missing:
            parts.append(f"not found: {' '.join(missing)}")
        return Readback(fold_state(len(present), len(paused)), tuple(i.ref for i in present),
                        "; ".join(parts), tuple(i.ref for i in paused))

    def _check_pause(self, host: Host, items: list[ContainerInfo], fraction: float) -> None:
        missing = [i for i in items if not i.exists]
        if missing:
            raise BatchRefused(
                f"container {' '.join(shlex.quote(i.ref) for i in missing)} does not exist on "
                f"{host.name} ({missing[0].error or 'docker inspect failed'})",
                kind="no_target", fix="check [batch] container (docker ps)",
            )
        not_running = [i for i in items if i.status not in ("running", "paused")]
        if not_running:
            raise BatchRefused(
                f"container {not_running[0].ref} is {not_running[0].status}, not running",
                kind="no_target",
            )

    def _plan(self, items: list[ContainerInfo]) -> tuple[list[str], list[str]]:
        return [i.ref for i in items], [i.ref for i in items if i.paused]

    def _resume_entries(self, items: list[ContainerInfo]) -> list[str]:
        return [i.ref for i in items if i.paused]

    def _landed(self, items: list[ContainerInfo]) -> set[str] | None:
        return {i.ref for i in items if i.paused}


CONTROLLER = DockerController()


@hookimpl
def inferfit_register_batch_controllers(register: Callable[[BatchController], None]) -> None:
    register(CONTROLLER)
