"""Pure parts of mixed mode: options, counting, state folding, parsers, registration."""

from __future__ import annotations

import asyncio
import time

import pytest

from inferfit.config import Config, ConfigError
from inferfit.manager import Registry, make_plugin_manager
from inferfit.plugins import batch_lease
from inferfit.plugins.batch_cgroup import parse_status as parse_cgroup
from inferfit.plugins.batch_common import (
    BatchOptions,
    BatchRefused,
    ControllerState,
    describe_state,
    fold_state,
    pause_count,
    split_for_pause,
)
from inferfit.plugins.batch_signal import parse_selection, selection_of


def test_options_are_checked_with_named_keys():
    with pytest.raises(BatchRefused, match="not configured") as info:
        BatchOptions.from_mapping({})
    assert info.value.kind == "not_configured"
    with pytest.raises(BatchRefused, match="unknown batch controller"):
        BatchOptions.from_mapping({"controller": "kill-all"})
    with pytest.raises(BatchRefused, match="lease_s"):
        BatchOptions.from_mapping({"controller": "signal", "lease_s": 0})
    with pytest.raises(BatchRefused, match="throttle_fraction"):
        BatchOptions.from_mapping({"controller": "signal", "throttle_fraction": 1.5})
    for bad in ("/tmp/x", "/sys/fs/cgroup", "/sys/fs/cgroup/../etc", "relative/path"):
        with pytest.raises(BatchRefused, match="below /sys/fs/cgroup"):
            BatchOptions.from_mapping({"controller": "cgroup", "cgroup": bad})
    opts = BatchOptions.from_mapping({"controller": "docker", "container": " a  b ",
                                      "lease_s": 2.5})
    assert opts.containers == ("a", "b")
    assert opts.lease_s == 3
    with pytest.raises(BatchRefused, match="exactly one"):
        selection_of(BatchOptions.from_mapping({"controller": "signal"}))
    with pytest.raises(BatchRefused, match="exactly one"):
        selection_of(BatchOptions.from_mapping({"controller": "signal", "pattern": "x",
                                                "pidfile": "/run/x.pid"}))


def test_shipped_defaults_hold_every_batch_key(tmp_path):
    cfg = Config.load(include_user=False, include_project=False)
    batch = cfg.get("batch")
    assert batch["controller"] == ""  # opt-in: nothing is paused until this is set
    assert batch["lease_s"] == 120
    assert batch["throttle_fraction"] == 0.5
    for key in ("pattern", "pidfile", "cgroup", "unit", "container", "lease_dir",
                "measure_url", "measure_requests", "measure_concurrency",
                "measure_timeout_s", "measure_settle_s"):
        assert key in batch
    bad = tmp_path / "bad.toml"
    bad.write_text('[batch]\nlease = 5\n')
    with pytest.raises(ConfigError, match=r"batch\.lease"):
        Config.load(bad, include_user=False, include_project=False)


def test_counting_and_folding():
    assert pause_count(4, 0.5) == 2
    assert pause_count(3, 0.5) == 2  # round up: at least the asked-for share
    assert pause_count(1, 0.1) == 1  # a throttle pauses at least one
    assert pause_count(5, 1.0) == 5
    assert pause_count(0, 1.0) == 0
    with pytest.raises(BatchRefused):
        pause_count(2, 0)
    assert split_for_pause(["a", "b", "c", "d"], ["c"], 2) == (["c", "a"], ["b", "d"])
    assert split_for_pause(["a", "b"], ["a", "b"], 1) == (["a"], ["b"])
    assert fold_state(0, 0) == "absent"
    assert fold_state(3, 0) == "running"
    assert fold_state(3, 3) == "paused"
    assert fold_state(3, 1) == "partly_paused"


def test_lease_parsing_and_countdown():
    lease = batch_lease.parse_lease_line("lease abc 1100 1000 4242 1", read_at=50.0)
    assert lease is not None
    assert lease.token == "abc"
    assert lease.expires_in_s == 100
    assert lease.watchdog_alive
    assert lease.remaining_s(now=80.0) == 70.0
    assert lease.remaining_s(now=500.0) == 0.0
    assert batch_lease.parse_lease_line("nolease 1000") is None
    assert batch_lease.parse_lease_line("lease abc x y") is None
    assert batch_lease.lease_name("signal", "pattern\0a") != batch_lease.lease_name(
        "signal", "pattern\0b")
    assert "/" not in batch_lease.lease_name("cgroup", "/sys/fs/cgroup/x")
    state = ControllerState("signal", "paused", ("1", "2"), "2 of 2 processes stopped",
                            paused_targets=("1", "2"),
                            lease=batch_lease.Lease("t", 90.0, 7, False, time.monotonic()))
    text = describe_state(state)
    assert "resumes in 90 s" in text or "resumes in 89 s" in text
    assert "WATCHDOG NOT RUNNING" in text


def test_selection_and_cgroup_parsers():
    sel = parse_selection(
        "self 812 sshd: root@notty\n"
        "pid 900 T 123456 0 python3 worker.py --batch\n"
        "pid 77 S 5555 1000 python3 worker.py --batch\n"
        "pid 78 Z 5556 1000 \n"
        "gone 901\nbad 12ab\n"
        "lease tok 1300 1200 4444 1\n")
    assert [p.pid for p in sel.procs] == [77, 900]
    assert sel.procs[1].stopped
    assert sel.procs[1].entry == "900:123456"
    assert sel.procs[0].uid == 1000
    assert sel.self_matches == ["812 sshd: root@notty"]
    assert sel.bad == ["12ab"]
    assert sel.lease is not None
    assert sel.lease.watchdog_pid == 4444
    assert parse_selection("refuse nopidfile\nnolease 5\n").refusals == ["nopidfile"]

    infos, lease = parse_cgroup(
        "cg 2 frozen 3 0 1 /sys/fs/cgroup/batch.slice\n"
        "cg 1 thawed 1 0 1 /sys/fs/cgroup/freezer/batch\n"
        "cg 0 missing 0 0 0 /sys/fs/cgroup/gone\nnolease 9\n")
    assert [i.frozen for i in infos] == [True, False, False]
    assert [i.exists for i in infos] == [True, True, False]
    assert infos[0].entry == "2:/sys/fs/cgroup/batch.slice"
    assert lease is None


def test_the_four_controllers_are_registered_plugins():
    registry = Registry.collect(make_plugin_manager(load_entry_points=False))
    for name in ("signal", "cgroup", "systemd", "docker"):
        controller = registry.batch_controllers[name]
        assert controller.name == name


def test_plugins_command_lists_the_controllers(inferfit_cli):
    r = inferfit_cli("plugins")
    assert r.returncode == 0, r.stderr
    for mod in ("batch_signal", "batch_cgroup", "batch_systemd", "batch_docker"):
        assert mod in r.stdout


def test_watchdog_and_scripts_take_values_only_as_arguments():
    """The remote scripts are constants: no config value is ever pasted into them."""
    for script in (batch_lease.WATCHDOG, batch_lease.RESUME):
        assert "{" not in script.replace("${", "").replace("{ ", "").replace("() {", "")
    assert batch_lease.MARKER in batch_lease.PRELUDE


class _ThirdParty:
    """A controller from another distribution: plain BatchState, no lease."""

    name = "ext"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.state = "running"

    async def status(self, host, options):
        from inferfit.api import BatchState

        self.calls.append("status")
        return BatchState(self.name, self.state)

    async def pause(self, host, options, *, fraction=1.0):
        self.calls.append(f"pause {fraction}")
        self.state = "paused"
        return await self.status(host, options)

    async def resume(self, host, options):
        self.calls.append("resume")
        self.state = "running"
        return await self.status(host, options)


async def test_session_works_with_a_third_party_controller():
    from inferfit.api import BatchController
    from inferfit.hosts import LocalHost
    from inferfit.plugins.batch_session import BatchSession

    ctl = _ThirdParty()
    assert isinstance(ctl, BatchController)
    session = BatchSession(LocalHost(), ctl, {"controller": "ext", "lease_s": 10},
                           renew_every_s=0.01)
    state = await session.toggle()
    assert state.state == "paused"
    assert session.countdown_s() is None  # no lease to count down
    assert session.header() == "batch: paused"
    await asyncio.sleep(0.05)
    assert session.renew_error is None
    assert session.paused_by_us
    await session.close()
    assert ctl.calls[-2:] == ["resume", "status"]
    assert not session.paused
