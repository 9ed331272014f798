"""Controller `cgroup` over the real sshd: v2 cgroup.freeze and the v1 freezer."""

from __future__ import annotations

import uuid

import pytest

from inferfit.plugins.batch_cgroup import CONTROLLER as CGROUP
from inferfit.plugins.batch_common import BatchRefused


def _opts(lease_dir, cgroup, **kw):
    return {"controller": "cgroup", "cgroup": str(cgroup), "lease_s": 3,
            "lease_dir": str(lease_dir), **kw}


def _frozen(path) -> bool:
    if (path / "cgroup.events").exists():
        return "frozen 1" in (path / "cgroup.events").read_text().splitlines()
    return (path / "freezer.state").read_text().strip() == "FROZEN"


@pytest.mark.parametrize("version", ["v2", "v1"])
async def test_freeze_thaw_and_lease_expiry(version, request, box, workers, lease_dir, mx):
    cg = request.getfixturevalue(f"cgroup_{version}")
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2, cgroup=cg)
    outside = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    opts = _opts(lease_dir, cg)
    host = mx.host(box)
    try:
        assert (await CGROUP.status(host, opts)).state == "running"
        paused = await CGROUP.pause(host, opts)
        assert paused.state == "paused"
        assert paused.paused_targets == (str(cg),)
        assert _frozen(cg)
        # frozen tasks make no progress (read from the box: /proc/PID/stat shows them
        # sleeping, D or S, never running), the process outside keeps going
        assert all(mx.proc_state(w.pid) in ("D", "S") for w in batch)
        assert not any(w.progressing(0.5) for w in batch)
        assert outside[0].progressing()
        resumed = await CGROUP.resume(host, opts)
        assert resumed.state == "running"
        assert not _frozen(cg)
        assert all(w.progressing() for w in batch)
        # pause again and let the lease run out: the watchdog thaws by itself
        await CGROUP.pause(host, opts)
        assert _frozen(cg)
        assert mx.wait_for(lambda: not _frozen(cg), 3 + 5)
        assert all(w.progressing() for w in batch)
    finally:
        await host.close()


async def test_throttle_across_cgroups_and_refusals(box, workers, lease_dir, cgroup_v2,
                                                     cgroup_v1, tmp_path, mx):
    workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1, cgroup=cgroup_v2)
    workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1, cgroup=cgroup_v1)
    host = mx.host(box)
    try:
        both = _opts(lease_dir, f"{cgroup_v2} {cgroup_v1}")
        half = await CGROUP.pause(host, both, fraction=0.5)
        assert half.state == "partly_paused"
        assert _frozen(cgroup_v2) != _frozen(cgroup_v1)
        assert (await CGROUP.resume(host, both)).state == "running"
        assert not _frozen(cgroup_v2)
        assert not _frozen(cgroup_v1)

        with pytest.raises(BatchRefused) as info:
            await CGROUP.pause(host, _opts(lease_dir, cgroup_v2), fraction=0.5)
        assert "in part" in info.value.message
        with pytest.raises(BatchRefused) as info:
            await CGROUP.pause(host, _opts(lease_dir, f"{cgroup_v2}-nonexistent"))
        assert info.value.kind == "no_target"
        assert "does not exist" in info.value.message
        with pytest.raises(BatchRefused) as info:
            await CGROUP.pause(host, _opts(lease_dir, tmp_path))
        assert info.value.kind == "config"
        with pytest.raises(BatchRefused) as info:
            await CGROUP.pause(host, _opts(lease_dir, "/sys/fs/cgroup/unified/../unified"))
        assert info.value.kind == "config"
        assert not _frozen(cgroup_v2)
    finally:
        await host.close()


async def test_a_cgroup_holding_our_own_shell_is_refused(private_sshd, lease_dir, cgroup_v2,
                                                        workers, mx):
    """Freezing the cgroup of the SSH session would freeze the watchdog too: never."""
    server = private_sshd()
    # sessions of this sshd start inside the test cgroup, next to a batch worker
    (cgroup_v2 / "cgroup.procs").write_text(str(server.proc.pid))
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1, cgroup=cgroup_v2)
    host = mx.host(server)
    try:
        with pytest.raises(BatchRefused) as info:
            await CGROUP.pause(host, _opts(lease_dir, cgroup_v2))
        assert info.value.kind == "selection_too_broad"
        assert not _frozen(cgroup_v2)
        assert batch[0].progressing()
        # the root of the hierarchy has no freezer: refused as well
        with pytest.raises(BatchRefused) as info:
            await CGROUP.pause(host, _opts(lease_dir, cgroup_v2.parent))
        assert info.value.kind == "no_target"
    finally:
        await host.close()
