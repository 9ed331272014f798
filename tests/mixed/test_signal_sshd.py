"""Controller `signal` over the real sshd: exact selection, pause/resume, lease, refusals."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from inferfit.plugins.batch_common import BatchRefused
from inferfit.plugins.batch_signal import CONTROLLER as SIGNAL


def _opts(lease_dir, **kw):
    return {"controller": "signal", "lease_s": 3, "lease_dir": str(lease_dir), **kw}


async def test_pattern_pauses_exactly_the_selection_and_resumes(box, workers, lease_dir, mx):
    marker = f"ifx-{uuid.uuid4().hex[:8]}"
    batch = workers.start(marker, 3)
    near = workers.start(marker + "x", 1) + workers.start(marker[:-1], 1)
    opts = _opts(lease_dir, pattern=workers.pattern(marker))
    host = mx.host(box)
    try:
        before = await SIGNAL.status(host, opts)
        assert before.state == "running"
        assert sorted(before.targets) == sorted(str(w.pid) for w in batch)

        paused = await SIGNAL.pause(host, opts)
        assert paused.state == "paused"
        assert [w.state() for w in batch] == ["T", "T", "T"]
        assert all(w.state() != "T" for w in near), "a near-miss process was stopped"
        assert all(w.progressing() for w in near)
        assert paused.lease is not None
        assert paused.lease.watchdog_alive

        resumed = await SIGNAL.resume(host, opts)
        assert resumed.state == "running"
        assert all(w.state() != "T" for w in batch)
        assert all(w.progressing() for w in batch)
        assert resumed.lease is None  # resume drops the lease; the watchdog exits
    finally:
        await host.close()


async def test_near_miss_pattern_is_refused_and_touches_nothing(box, workers, lease_dir, mx):
    marker = f"ifx-{uuid.uuid4().hex[:8]}"
    batch = workers.start(marker, 2)
    host = mx.host(box)
    try:
        near_misses = (
            workers.pattern(marker[:-1]),  # one character short
            workers.pattern(marker + "0"),  # one character more
            workers.pattern(marker).rsplit(" ", 1)[0],  # a prefix of the command line
        )
        for near in near_misses:
            with pytest.raises(BatchRefused) as info:
                await SIGNAL.pause(host, _opts(lease_dir, pattern=near))
            assert info.value.kind == "no_target"
            assert "exactly" in info.value.message
        # a substring of the command line is a near miss too
        with pytest.raises(BatchRefused):
            await SIGNAL.pause(host, _opts(lease_dir, pattern=marker))
        assert all(w.state() != "T" for w in batch)
    finally:
        await host.close()


async def test_a_too_broad_pattern_is_refused(box, workers, lease_dir, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    host = mx.host(box)
    try:
        with pytest.raises(BatchRefused) as info:
            await SIGNAL.pause(host, _opts(lease_dir, pattern=".*"))
        assert info.value.kind == "selection_too_broad"
        assert "nothing was changed" in info.value.message
        assert batch[0].state() != "T"
    finally:
        await host.close()


async def test_pidfile_and_throttle_fraction(box, workers, lease_dir, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 4)
    pidfile = workers.pidfile("batch.pid", batch)
    opts = _opts(lease_dir, pidfile=str(pidfile))
    host = mx.host(box)
    try:
        half = await SIGNAL.pause(host, opts, fraction=0.5)
        assert half.state == "partly_paused"
        assert sum(w.state() == "T" for w in batch) == 2
        assert len(half.paused_targets) == 2
        full = await SIGNAL.pause(host, opts, fraction=1.0)
        assert full.state == "paused"
        assert all(w.state() == "T" for w in batch)
        back = await SIGNAL.pause(host, opts, fraction=0.25)  # throttle down from a full pause
        assert sum(w.state() == "T" for w in batch) == 1
        assert back.state == "partly_paused"
        done = await SIGNAL.resume(host, opts)
        assert done.state == "running"
        assert all(w.state() != "T" for w in batch)
    finally:
        await host.close()


async def test_cgroup_members_selection(box, workers, lease_dir, cgroup_v2, mx):
    inside = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2, cgroup=cgroup_v2)
    outside = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    opts = _opts(lease_dir, cgroup=str(cgroup_v2))
    host = mx.host(box)
    try:
        state = await SIGNAL.pause(host, opts)
        assert state.state == "paused"
        assert [w.state() for w in inside] == ["T", "T"]
        assert outside[0].state() != "T"
        await SIGNAL.resume(host, opts)
        assert all(w.state() != "T" for w in inside)
    finally:
        await host.close()


async def test_missing_targets_are_refused_clearly(box, workers, lease_dir, tmp_path, mx):
    host = mx.host(box)
    try:
        with pytest.raises(BatchRefused) as info:
            await SIGNAL.pause(host, _opts(lease_dir, pidfile=str(tmp_path / "nope.pid")))
        assert info.value.kind == "no_target"
        assert "does not exist" in info.value.message
        # a stale pidfile: the pid is not running any more
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = tmp_path / "stale.pid"
        stale.write_text(f"{dead.pid}\n")
        with pytest.raises(BatchRefused) as info:
            await SIGNAL.pause(host, _opts(lease_dir, pidfile=str(stale)))
        assert info.value.kind == "no_target"
        garbage = tmp_path / "garbage.pid"
        garbage.write_text("12ab\n")
        with pytest.raises(BatchRefused) as info:
            await SIGNAL.pause(host, _opts(lease_dir, pidfile=str(garbage)))
        assert info.value.kind == "bad_pidfile"
        with pytest.raises(BatchRefused) as info:
            await SIGNAL.pause(host, _opts(lease_dir, pattern="a", pidfile=str(stale)))
        assert info.value.kind == "config"
    finally:
        await host.close()


async def test_lease_expiry_resumes_and_renew_extends(box, workers, lease_dir, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    opts = _opts(lease_dir, pidfile=str(workers.pidfile("b.pid", batch)))
    host = mx.host(box)
    try:
        from inferfit.plugins import batch_lease

        state = await SIGNAL.pause(host, opts)
        assert state.state == "paused"
        # renew twice past the original expiry: still paused
        for _ in range(2):
            time.sleep(2)
            lease = await batch_lease.renew(host, str(lease_dir), state.lease_name, 3)
            assert lease is not None
            assert lease.expires_in_s >= 2
        assert all(w.state() == "T" for w in batch)
        # stop renewing: the box resumes by itself within TTL (+ poll slack)
        t0 = time.monotonic()
        assert mx.wait_for(lambda: all(w.state() != "T" for w in batch), 3 + 5)
        assert time.monotonic() - t0 >= 1.0
        assert all(w.progressing() for w in batch)
        after = await SIGNAL.status(host, opts)
        assert after.state == "running"
        assert after.lease is None
        # a renew after expiry does not bring the lease back
        assert await batch_lease.renew(host, str(lease_dir), state.lease_name, 3) is None
    finally:
        await host.close()


@pytest.fixture
def nobody_sleeper():
    """A process owned by uid 65534 (nobody), started by this test; killed by PID."""
    secs = f"{random.randint(5000, 9000)}.{random.randint(100, 999)}"
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             "sleep", secs])
    yield proc, secs
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(5)


@pytest.fixture
def sshd_without_cap_kill(private_sshd):
    """A private sshd whose sessions lack CAP_KILL: root that may only signal its own uid."""
    server = private_sshd()
    server.stop()
    log = (server.dir / "sshd-nokill.log").open("wb")
    server.proc = subprocess.Popen(
        ["setpriv", "--bounding-set=-kill", "--inh-caps=-kill", "/usr/sbin/sshd", "-D", "-e",
         "-f", str(server.dir / "sshd_config")], stdout=log, stderr=log)
    import socket

    def listening():
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", server.port),
                                                                     0.2):
            return True
        return False

    assert _wait(listening, 10)
    return server


def _wait(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


async def test_a_process_the_user_may_not_signal_is_refused(
        sshd_without_cap_kill, nobody_sleeper, workers, lease_dir, tmp_path, mx):
    proc, secs = nobody_sleeper
    own = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    pidfile = tmp_path / "mixed.pid"
    pidfile.write_text(f"{own[0].pid}\n{proc.pid}\n")
    host = mx.host(sshd_without_cap_kill)
    try:
        for opts in (_opts(lease_dir, pidfile=str(pidfile)),
                     _opts(lease_dir, pattern=f"sleep {mx.ere_escape(secs)}")):
            with pytest.raises(BatchRefused) as info:
                await SIGNAL.pause(host, opts)
            assert info.value.kind == "permission_denied"
            assert str(proc.pid) in info.value.message
            assert "nothing was paused" in info.value.message
        assert mx.proc_state(proc.pid) != "T"
        assert own[0].state() != "T", "a refused pause must not stop the rest either"
        assert not list(lease_dir.glob("*.wd")) or all(
            not (lease_dir / p.name.replace(".wd", "")).exists() for p in lease_dir.glob("*.wd"))
    finally:
        await host.close()


async def test_pid_1_is_never_signalled(box, workers, lease_dir, tmp_path, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    pidfile = tmp_path / "evil.pid"
    pidfile.write_text(f"{batch[0].pid}\n1\n")
    host = mx.host(box)
    try:
        with pytest.raises(BatchRefused) as info:
            await SIGNAL.pause(host, _opts(lease_dir, pidfile=str(pidfile)))
        assert info.value.kind == "selection_too_broad"
        assert batch[0].state() != "T"
    finally:
        await host.close()


async def test_default_lease_dir_is_private_under_home(box, workers, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    opts = {"controller": "signal", "pidfile": str(workers.pidfile("b.pid", batch)),
            "lease_s": 30}
    host = mx.host(box)
    try:
        state = await SIGNAL.pause(host, opts)
        home = Path((await host.run(["sh", "-c", 'echo "$HOME"'], timeout=30)).stdout.strip())
        lease_dir = home / ".cache" / "inferfit" / "batch"
        assert (lease_dir / state.lease_name).is_file()
        assert oct(lease_dir.stat().st_mode & 0o777) == "0o700"
        await SIGNAL.resume(host, opts)
        assert not (lease_dir / state.lease_name).exists()
        assert batch[0].state() != "T"
    finally:
        await host.close()
