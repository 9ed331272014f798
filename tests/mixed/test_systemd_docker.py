"""Controllers `systemd` and `docker`: command building and parsing against recorded behaviour.

There is no systemd (PID 1) nor docker daemon here, so a private sshd puts fake
`systemctl`/`docker` first on PATH (tests/fixtures/mixed/bin). The fakes print the
formats and messages recorded from the real tools (tests/fixtures/mixed/recorded) and
act on real test processes, so the state the controllers read back is real.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from inferfit.plugins.batch_common import BatchRefused
from inferfit.plugins.batch_docker import CONTROLLER as DOCKER
from inferfit.plugins.batch_docker import parse_status as parse_docker
from inferfit.plugins.batch_systemd import CONTROLLER as SYSTEMD
from inferfit.plugins.batch_systemd import parse_status as parse_systemd

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "mixed"
UNIT = "batch-worker.service"


@pytest.fixture
def fake(private_sshd, tmp_path):
    d = tmp_path / "fake"
    (d / "units").mkdir(parents=True)
    (d / "containers").mkdir()
    server = private_sshd(path_prepend=[FIX / "bin"], setenv={"FAKE_DIR": str(d)})
    return server, d


def _calls(d: Path) -> list[str]:
    return (d / "calls.log").read_text().splitlines() if (d / "calls.log").exists() else []


def _frozen(cg: Path) -> bool:
    return "frozen 1" in (cg / "cgroup.events").read_text().splitlines()


async def test_systemd_freeze_thaw_and_lease(fake, workers, cgroup_v2, lease_dir, mx):
    server, d = fake
    (d / "units" / UNIT).write_text(str(cgroup_v2))
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2, cgroup=cgroup_v2)
    opts = {"controller": "systemd", "unit": UNIT, "lease_s": 3, "lease_dir": str(lease_dir)}
    host = mx.host(server)
    try:
        state = await SYSTEMD.status(host, opts)
        assert state.state == "running"
        assert state.targets == (UNIT,)
        paused = await SYSTEMD.pause(host, opts)
        assert paused.state == "paused"
        assert "frozen" in paused.detail
        assert _frozen(cgroup_v2)
        assert f"freeze -- {UNIT}" in _calls(d)
        assert not any(w.progressing(0.4) for w in batch)
        resumed = await SYSTEMD.resume(host, opts)
        assert resumed.state == "running"
        assert not _frozen(cgroup_v2)
        assert f"thaw -- {UNIT}" in _calls(d)
        await SYSTEMD.pause(host, opts)
        assert mx.wait_for(lambda: not _frozen(cgroup_v2), 3 + 5), "watchdog did not thaw"
    finally:
        await host.close()


async def test_systemd_without_freeze_falls_back_to_signals(fake, workers, cgroup_v2, lease_dir,
                                                            mx):
    server, d = fake
    (d / "mode").write_text("old")
    (d / "units" / UNIT).write_text(str(cgroup_v2))
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2, cgroup=cgroup_v2)
    opts = {"controller": "systemd", "unit": UNIT, "lease_s": 3, "lease_dir": str(lease_dir)}
    host = mx.host(server)
    try:
        paused = await SYSTEMD.pause(host, opts)
        assert paused.state == "paused"
        assert all(w.state() == "T" for w in batch)
        assert any("Unknown operation freeze" in n for n in paused.notes)
        assert f"kill --signal=SIGSTOP -- {UNIT}" in _calls(d)
        resumed = await SYSTEMD.resume(host, opts)
        assert resumed.state == "running"
        assert all(w.state() != "T" for w in batch)
        assert f"kill --signal=SIGCONT -- {UNIT}" in _calls(d)
    finally:
        await host.close()


async def test_systemd_refusals(fake, lease_dir, mx):
    server, d = fake
    opts = {"controller": "systemd", "unit": "nope.service", "lease_dir": str(lease_dir)}
    host = mx.host(server)
    try:
        assert (await SYSTEMD.status(host, opts)).state == "absent"
        with pytest.raises(BatchRefused) as info:
            await SYSTEMD.pause(host, opts)
        assert info.value.kind == "no_target"
        assert "nope.service" in info.value.message
        (d / "mode").write_text("notbooted")
        with pytest.raises(BatchRefused) as info:
            await SYSTEMD.pause(host, opts)
        assert info.value.kind == "no_systemd"
        assert "not been booted with systemd" in info.value.message
    finally:
        await host.close()


async def test_docker_pause_unpause_throttle_and_lease(fake, workers, lease_dir, mx):
    server, d = fake
    batch = workers.start(f"ifx-{uuid.uuid4().hex[:8]}", 2)
    for name, w in zip(("worker-a", "worker-b"), batch, strict=True):
        (d / "containers" / name).write_text(str(w.pid))
    opts = {"controller": "docker", "container": "worker-a worker-b", "lease_s": 3,
            "lease_dir": str(lease_dir)}
    host = mx.host(server)
    try:
        state = await DOCKER.status(host, opts)
        assert state.state == "running"
        assert state.targets == ("worker-a", "worker-b")
        half = await DOCKER.pause(host, opts, fraction=0.5)
        assert half.state == "partly_paused"
        assert half.paused_targets == ("worker-a",)
        assert next(w.state() for w in batch) == "T"
        assert batch[1].state() != "T"
        full = await DOCKER.pause(host, opts)
        assert full.state == "paused"
        assert not full.notes
        assert "pause -- worker-b" in _calls(d)
        assert _calls(d).count("pause -- worker-a") == 1
        resumed = await DOCKER.resume(host, opts)
        assert resumed.state == "running"
        assert "unpause -- worker-a" in _calls(d)
        assert "unpause -- worker-b" in _calls(d)
        await DOCKER.pause(host, opts)
        assert mx.wait_for(lambda: all(w.state() != "T" for w in batch), 3 + 5)
    finally:
        await host.close()


async def test_docker_refusals(fake, lease_dir, mx):
    server, d = fake
    opts = {"controller": "docker", "container": "ghost", "lease_dir": str(lease_dir)}
    host = mx.host(server)
    try:
        with pytest.raises(BatchRefused) as info:
            await DOCKER.pause(host, opts)
        assert info.value.kind == "no_target"
        assert "No such container: ghost" in info.value.message
        (d / "mode").write_text("nodaemon")
        with pytest.raises(BatchRefused) as info:
            await DOCKER.status(host, opts)
        assert info.value.kind == "no_docker"
        assert "Is the docker daemon running" in info.value.message
    finally:
        await host.close()


def test_parsers_on_recorded_output():
    show = (FIX / "recorded" / "systemctl-show-frozen.txt").read_text()
    text = f"unit {UNIT}\nrc 0\n" + "".join(f"show {line}\n" for line in show.splitlines())
    text += "pid 4242 S 100 0\n"
    units, refusals, lease = parse_systemd(text + "nolease 5\n")
    assert not refusals
    assert lease is None
    assert units[0].frozen
    assert units[0].paused
    assert units[0].props["MainPID"] == "4242"
    old = (FIX / "recorded" / "systemctl-show-old.txt").read_text()
    text = f"unit {UNIT}\nrc 0\n" + "".join(f"show {line}\n" for line in old.splitlines())
    units, _, _ = parse_systemd(text + "pid 1 T 5 0\npid 2 T 6 0\n")
    assert not units[0].frozen
    assert units[0].signal_stopped
    gone = (FIX / "recorded" / "systemctl-show-not-found.txt").read_text()
    units, _, _ = parse_systemd("unit nope.service\nrc 0\n"
                                + "".join(f"show {line}\n" for line in gone.splitlines()))
    assert not units[0].exists

    items, _, _ = parse_docker(
        "ctr 0 a\nout /a paused true 4242\nctr 1 b\nout Error: No such container: b\n"
        "lease tok 110 100 77 1\n")
    assert items[0].paused
    assert items[0].pid == 4242
    assert items[0].name == "a"
    assert not items[1].exists
    assert "No such container" in items[1].error
