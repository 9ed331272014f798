"""Never left frozen: the CLI killed mid-pause, the SSH connection cut, 20 pause/resume
cycles; and `inferfit batch` exit codes, opt-in confirmation and the console seam."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from inferfit.config import Config
from inferfit.hosts import HostError
from inferfit.manager import Registry, make_plugin_manager
from inferfit.plugins.batch_session import BatchSession, ConsoleBatchControl
from inferfit.plugins.batch_signal import CONTROLLER as SIGNAL

TTL = 3
EXE = shutil.which("inferfit", path=str(Path(sys.executable).parent)) or "inferfit"


def _cfg(mx, tmp_path, workers, lease_dir, batch, **kw):
    table = {"controller": "signal", "pidfile": str(workers.pidfile("batch.pid", batch)),
             "lease_s": TTL, "lease_dir": str(lease_dir), **kw}
    return mx.config(tmp_path / "batch.toml", **table)


def test_cli_status_pause_resume_exit_codes(box, inferfit_cli, workers, lease_dir, tmp_path,
                                            mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    cfg = str(_cfg(mx, tmp_path, workers, lease_dir, batch))
    r = inferfit_cli("batch", "status", "--config", cfg, *box.cli())
    assert r.returncode == 0, r.stderr
    assert "running" in r.stdout
    assert all(str(w.pid) in r.stdout for w in batch)

    r = inferfit_cli("batch", "pause", "--config", cfg, *box.cli())  # no --yes, no tty
    assert r.returncode == 2
    assert "opt-in" in r.stderr
    assert "--yes" in r.stderr
    assert all(w.state() != "T" for w in batch)

    r = inferfit_cli("batch", "pause", "--yes", "--lease", "30", "--config", cfg, *box.cli())
    assert r.returncode == 0, r.stderr
    assert all(w.state() == "T" for w in batch)
    assert "resumes by itself in 30 s" in r.stderr

    r = inferfit_cli("batch", "status", "--json", "--config", cfg, *box.cli())
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["state"] == "paused"
    assert doc["lease"]["watchdog_alive"] is True
    assert 20 < doc["lease"]["expires_in_s"] <= 30

    r = inferfit_cli("batch", "throttle", "--yes", "--config", cfg, *box.cli())
    assert r.returncode == 0, r.stderr
    assert sum(w.state() == "T" for w in batch) == 1

    r = inferfit_cli("batch", "resume", "--config", cfg, *box.cli())
    assert r.returncode == 0, r.stderr
    assert all(w.state() != "T" for w in batch)
    assert all(w.progressing() for w in batch)


def test_cli_refusals(box, inferfit_cli, workers, lease_dir, tmp_path, mx):
    r = inferfit_cli("batch", "pause", "--yes", *box.cli())  # no [batch] config at all
    assert r.returncode == 2
    assert "not configured" in r.stderr
    cfg = mx.config(tmp_path / "c.toml", controller="signal",
                    pidfile=str(tmp_path / "missing.pid"), lease_dir=str(lease_dir))
    r = inferfit_cli("batch", "pause", "--yes", "--config", str(cfg), *box.cli())
    assert r.returncode == 2
    assert "does not exist" in r.stderr
    r = inferfit_cli("batch", "status", "--config", str(cfg), "-F",
                     str(box.ssh_config), "nonexistent.invalid")
    assert r.returncode in (2, 3)
    cfg = mx.config(tmp_path / "bad.toml", controller="signal", lease_s="soon")
    r = inferfit_cli("batch", "status", "--config", str(cfg), *box.cli())
    assert r.returncode == 3
    assert "lease_s" in r.stderr


def test_cli_killed_while_holding_a_pause_resumes_within_the_lease(
        box, home, workers, lease_dir, tmp_path, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    cfg = str(_cfg(mx, tmp_path, workers, lease_dir, batch))
    proc = subprocess.Popen([EXE, "batch", "pause", "--hold", "--yes", "--config", cfg,
                             *box.cli()], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=dict(os.environ))
    try:
        assert mx.wait_for(lambda: all(w.state() == "T" for w in batch), 30), \
            proc.stderr.read().decode() if proc.poll() is not None else "not paused"
        # held past the lease: the CLI renews it, the batch stays paused
        time.sleep(TTL + 1.5)
        assert all(w.state() == "T" for w in batch)
        proc.kill()
        proc.wait(10)
        t0 = time.monotonic()
        assert mx.wait_for(lambda: all(w.state() != "T" for w in batch), TTL + 5)
        assert time.monotonic() - t0 < TTL + 5
        assert all(w.progressing() for w in batch)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_hold_resumes_on_sigterm(box, home, workers, lease_dir, tmp_path, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 1)
    cfg = str(_cfg(mx, tmp_path, workers, lease_dir, batch, lease_s=60))
    proc = subprocess.Popen([EXE, "batch", "pause", "--hold", "--yes", "--config", cfg,
                             *box.cli()], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert mx.wait_for(lambda: batch[0].state() == "T", 30)
        proc.terminate()
        assert proc.wait(20) == 0
        assert batch[0].state() != "T"  # resumed at once, not after 60 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_ssh_connection_cut_while_paused_resumes_within_the_lease(
        private_sshd, workers, lease_dir, tmp_path, mx):
    server = private_sshd()
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    opts = {"controller": "signal", "pidfile": str(workers.pidfile("b.pid", batch)),
            "lease_s": TTL, "lease_dir": str(lease_dir)}
    host = mx.host(server)
    session = BatchSession(host, SIGNAL, opts, renew_every_s=1.0)
    try:
        await session.pause()
        assert all(w.state() == "T" for w in batch)
        assert session.countdown_s() is not None
        server.kill()  # sshd and every session process it forked: the network is gone
        t0 = time.monotonic()
        assert mx.wait_for(lambda: all(w.state() != "T" for w in batch), TTL + 5)
        assert time.monotonic() - t0 < TTL + 5
        assert all(w.progressing() for w in batch)
    finally:
        with contextlib.suppress(HostError):
            await session.close()
        await host.close()
    assert session.renew_error  # the console can show why the lease was not renewed


async def test_twenty_pause_resume_cycles_leave_nothing_frozen(private_sshd, workers, lease_dir,
                                                               mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 3)
    opts = {"controller": "signal", "pidfile": str(workers.pidfile("b.pid", batch)),
            "lease_s": 30, "lease_dir": str(lease_dir)}
    host = mx.host(private_sshd())
    session = BatchSession(host, SIGNAL, opts)
    try:
        for i in range(20):
            state = await (session.throttle() if i % 5 == 4 else session.pause())
            assert state.state in ("paused", "partly_paused")
            state = await session.resume()
            assert state.state == "running", f"cycle {i}: {state}"
            assert all(w.state() != "T" for w in batch), f"cycle {i}"
    finally:
        await session.close()
        await host.close()
    assert all(w.progressing() for w in batch)
    assert not list(lease_dir.glob("*.targets"))


async def test_console_seam_toggles_counts_down_and_resumes_on_close(
        box, workers, lease_dir, tmp_path, mx):
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    cfg = _cfg(mx, tmp_path, workers, lease_dir, batch, lease_s=60)
    registry = Registry.collect(make_plugin_manager())
    assert set(registry.batch_controllers) >= {"signal", "cgroup", "systemd", "docker"}
    assert ConsoleBatchControl.from_config(Config.load(include_user=False,
                                                       include_project=False),
                                           registry) is None  # not configured: no control
    control = ConsoleBatchControl.from_config(Config.load(cfg, include_user=False,
                                                          include_project=False), registry)
    assert control is not None
    host = mx.host(box)
    try:
        view = await control.status(host, "box")
        assert view.configured
        assert not view.paused
        assert view.text.startswith("running")
        view, message = await control.toggle(host, "box")
        assert view.paused
        assert "resumes in" in view.text
        assert "paused" in message
        assert all(w.state() == "T" for w in batch)
        view, message = await control.toggle(host, "box")
        assert not view.paused
        assert all(w.state() != "T" for w in batch)
        await control.toggle(host, "box")
        assert all(w.state() == "T" for w in batch)
        await control.close()  # quitting the console resumes what it paused
        assert all(w.state() != "T" for w in batch)
    finally:
        await host.close()


def test_interactive_confirmation_at_a_terminal(box, home, workers, lease_dir, tmp_path, mx):
    """Without --yes, a terminal gets the list of what would be paused and a y/N question."""
    import pty

    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    cfg = str(_cfg(mx, tmp_path, workers, lease_dir, batch, lease_s=60))
    for answer, code, stopped in (("n", 2, False), ("y", 0, True)):
        master, slave = pty.openpty()
        proc = subprocess.Popen([EXE, "batch", "pause", "--config", cfg, *box.cli()],
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(slave)
        try:
            os.write(master, f"{answer}\n".encode())
            out, err = proc.communicate(timeout=60)
        finally:
            os.close(master)
        assert proc.returncode == code, err.decode()
        text = out.decode()
        assert "would pause the batch" in text
        assert all(str(w.pid) in text for w in batch)
        assert "Proceed? [y/N]" in text
        assert all((w.state() == "T") == stopped for w in batch)
    r = subprocess.run([EXE, "batch", "resume", "--config", cfg, *box.cli()],
                       capture_output=True, timeout=60)
    assert r.returncode == 0
    assert all(w.state() != "T" for w in batch)
