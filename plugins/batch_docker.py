"""Batch controller ``docker``: ``docker pause`` / ``docker unpause`` containers.

``[batch] container`` names one or more containers (names or ids, separated by
spaces); a throttle pauses a fraction of them. State is read back with
``docker inspect`` (State.Status, State.Paused, State.Pid) on every call. A
docker daemon that is down or refuses the login user is a clear refusal.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferfit.plugins import batch_lease
from inferfit.plugins.batch_common import (
    SETTLE_READS,
    SETTLE_S,
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

_FUNCS = r"""
pre() { return 0; }
apply() {
  _c=$1
  shift
  for _n; do
    if [ "$_c" -gt 0 ]; then
      _p=$(docker inspect --type container --format '{{.State.Paused}}' -- "$_n" 2>/dev/null)
      [ "$_p" = true ] || _o=$(docker pause -- "$_n" 2>&1) || case $_o in
        *"already paused"*) ;;
        *) echo "fail $_n $_o" | head -n 1 ;;
      esac
    else
      _o=$(docker unpause -- "$_n" 2>&1) || case $_o in
        *"not paused"*) ;;
        *) echo "fail $_n $_o" | head -n 1 ;;
      esac
    fi
    _c=$((_c - 1))
  done
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


class DockerController:
    name = "docker"

    def _opts(self, options: Mapping[str, Any]) -> BatchOptions:
        opts = BatchOptions.from_mapping(options, expect=self.name)
        if not opts.containers:
            raise BatchRefused("controller docker needs [batch] container", kind="config",
                               fix='e.g. container = "batch-worker"')
        return opts

    def _name(self, opts: BatchOptions) -> str:
        return batch_lease.lease_name(self.name, " ".join(opts.containers))

    async def _read(self, host: Host, opts: BatchOptions) -> tuple[list[ContainerInfo],
                                                                   batch_lease.Lease | None]:
        done = await run_script(host, _STATUS, INSPECT_FORMAT, opts.lease_dir, self._name(opts),
                                *opts.containers)
        items, refusals, lease = parse_status(done.stdout)
        if refusals:
            raise BatchRefused(f"docker is not installed on {host.name}", kind="no_docker",
                               fix="use controller signal or cgroup on this box")
        problem = daemon_problem(items)
        if problem:
            raise problem
        return items, lease

    def _state(self, opts: BatchOptions, items: list[ContainerInfo],
               lease: batch_lease.Lease | None, notes: tuple[str, ...] = ()) -> ControllerState:
        present = [i for i in items if i.exists]
        paused = [i for i in present if i.paused]
        parts = [f"{i.name or i.ref} {i.status} (pid {i.pid})" for i in present]
        missing = [i.ref for i in items if not i.exists]
        if missing:
            parts.append(f"not found: {' '.join(missing)}")
        return ControllerState(
            controller=self.name, state=fold_state(len(present), len(paused)),
            targets=tuple(i.ref for i in present), detail="; ".join(parts),
            paused_targets=tuple(i.ref for i in paused), lease=lease,
            lease_name=self._name(opts), notes=notes,
        )

    async def status(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = self._opts(options)
        items, lease = await self._read(host, opts)
        return self._state(opts, items, lease)

    async def pause(self, host: Host, options: Mapping[str, Any], *,
                    fraction: float = 1.0) -> ControllerState:
        opts = self._opts(options)
        items, _ = await self._read(host, opts)
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
        k = pause_count(len(items), fraction)
        paused = [i.ref for i in items if i.paused]
        chosen, others = split_for_pause([i.ref for i in items], paused, k)
        others = [o for o in others if o in paused]
        done = await run_script(host, _PAUSE, batch_lease.WATCHDOG, opts.lease_dir,
                                self._name(opts), new_token(), str(opts.lease_s), self.name,
                                str(k), *chosen, *others)
        lines = done.stdout.splitlines()
        refusals = refusal_lines(lines)
        if refusals or "paused" not in lines:
            raise BatchRefused(
                f"cannot pause on {host.name}: {refusals[0] if refusals else done.describe()}",
                kind="lease_failed", fix="set [batch] lease_dir to a writable directory",
            )
        notes = tuple(f"could not pause/unpause {line[5:]}" for line in lines
                      if line.startswith("fail "))
        want = set(chosen)
        for _ in range(SETTLE_READS):
            items, lease = await self._read(host, opts)
            if {i.ref for i in items if i.paused} >= want:
                break
            await asyncio.sleep(SETTLE_S)
        return self._state(opts, items, lease, notes)

    async def resume(self, host: Host, options: Mapping[str, Any]) -> ControllerState:
        opts = self._opts(options)
        items, _ = await self._read(host, opts)
        entries = [i.ref for i in items if i.paused]
        done = await run_script(host, batch_lease.RESUME, self.name, opts.lease_dir,
                                self._name(opts), *entries)
        notes = tuple(f"could not unpause {line[5:]}" for line in done.stdout.splitlines()
                      if line.startswith("fail "))
        items, lease = await self._read(host, opts)
        return self._state(opts, items, lease, notes)


CONTROLLER = DockerController()


@hookimpl
def inferfit_register_batch_controllers(register: Callable[[BatchController], None]) -> None:
    register(CONTROLLER)
