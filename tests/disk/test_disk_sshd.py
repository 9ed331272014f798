"""The disk probe end to end: the real CLI, the real sshd, the real fio on this machine."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from inferfit.api import ProbeContext, Progress
from inferfit.config import Config
from inferfit.hosts import SSHHost, SSHOptions
from inferfit.probes.disk import DiskProbe

MIB = 1 << 20


def findings(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())["probes"]["disk"]  # type: ignore[no-any-return]


def test_measures_a_temp_dir_over_ssh_and_leaves_nothing(box, inferfit_cli, tmp_path, dh):
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target))
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 0, r.stderr
    d = findings(out)
    assert d["status"] == "ok"
    assert d["target_path"] == str(target)
    assert d["target_kind"] == "test_file"
    assert d["direct_io"] is True
    assert d["filesystem"]
    assert d["device"]
    assert d["runtime_s"] == 1.0
    assert d["test_file_bytes"] == 16 * MIB
    assert d["seq_read_mib_s"] > 0
    assert d["seq_read_gb_s"] == pytest.approx(d["seq_read_mib_s"] * MIB / 1e9, rel=0.01)
    assert d["rand_read_iops"] > 0
    for p in ("p50", "p95", "p99", "p99_9"):
        assert d[f"rand_read_clat_{p}_us"] > 0
    assert d["rand_read_clat_p50_us"] <= d["rand_read_clat_p99_us"]
    assert "seq read" in d["summary"]
    assert "IOPS" in d["summary"]
    # live progress reached the CLI's stderr with a fraction and a live figure
    assert "MiB/s" in r.stderr
    assert "%" in r.stderr
    # the test file is gone and no fio is left behind
    assert list(target.iterdir()) == []
    assert dh.fio_processes_on(target) == []


def test_model_files_are_read_read_only(box, inferfit_cli, tmp_path, dh):
    model = tmp_path / "model"
    model.mkdir()
    sizes = {"model-00001-of-00002.safetensors": 3 * MIB + 123,
             "model-00002-of-00002.safetensors": 2 * MIB}
    for name, size in sizes.items():
        (model / name).write_bytes(os.urandom(size))
    (model / "config.json").write_text('{"hidden_size": 64}')
    before = {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
              for p in model.iterdir()}
    cfg = dh.write_config(tmp_path / "c.toml", model_path=str(model), model_load_warn_s=600.0)
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 0, r.stderr
    d = findings(out)
    assert d["target_kind"] == "model"
    assert d["model_files"] == 2
    assert d["model_bytes"] == sum(sizes.values())
    expected = d["model_bytes"] / (d["seq_read_mib_s"] * MIB)
    assert d["model_load_s"] == pytest.approx(expected, rel=0.05, abs=0.01)
    assert any("lower bound" in n for n in d["notes"])
    after = {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
             for p in model.iterdir()}
    assert after == before  # nothing written, nothing added


def test_nothing_configured_is_skipped_with_the_keys_to_set(box, inferfit_cli, tmp_path):
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--export", str(out), *box.cli())
    assert r.returncode == 0, r.stderr
    d = findings(out)
    assert d["status"] == "skipped"
    assert "probes.disk.directory" in d["summary"]
    assert "probes.disk.model_path" in d["summary"]


def test_cancel_removes_the_test_file(box, cli_process, tmp_path, dh):
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target), runtime_s=60.0)
    proc = cli_process("check", "--probe", "disk", "--config", str(cfg), *box.cli())
    assert dh.wait_for(lambda: bool(dh.leftover_files(target)), 60), "fio never started"
    assert dh.wait_for(lambda: bool(dh.fio_processes_on(target)), 10)
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert dh.wait_for(lambda: not dh.leftover_files(target), 15), dh.leftover_files(target)
    assert dh.wait_for(lambda: not dh.fio_processes_on(target), 15)


def test_cut_connection_removes_the_test_file(box, cli_process, tmp_path, dh):
    server = box
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target), runtime_s=60.0)
    out = tmp_path / "f.toml"
    proc = cli_process("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                       *server.cli())
    assert dh.wait_for(lambda: bool(dh.leftover_files(target)), 60), "fio never started"
    server.kill()  # SIGKILL sshd and every process of the session: no trap runs there
    assert dh.wait_for(lambda: not dh.leftover_files(target), 20), dh.leftover_files(target)
    assert dh.wait_for(lambda: not dh.fio_processes_on(target), 20)
    proc.communicate(timeout=60)
    assert proc.returncode == 3
    d = findings(out)
    assert d["status"] == "error"
    assert d["error_kind"] == "connection_lost"


async def test_console_style_task_cancel_removes_the_test_file(box, home, tmp_path, dh):
    """The console cancels a running check by cancelling its task."""
    target = tmp_path / "target"
    target.mkdir()
    host = SSHHost("box", SSHOptions(config_file=str(box.ssh_config)))
    options = {"directory": str(target), "runtime_s": 60.0, "size": "16M", "timeout_s": 300.0,
               "free_margin_gib": 0.5}
    seen: list[Progress] = []
    ctx = ProbeContext(options=options, config=Config(), progress=seen.append)
    task = asyncio.create_task(DiskProbe().check(host, ctx))
    try:
        for _ in range(600):
            if any("read_mib_s" in p.values for p in seen):
                break
            await asyncio.sleep(0.1)
        live = [p for p in seen if "read_mib_s" in p.values]
        assert live, [p.message for p in seen]
        # what the console's progress bar and live figure are drawn from
        assert live[0].probe == "disk"
        assert live[0].values["read_mib_s"] > 0
        assert live[0].fraction is not None
        assert 0 < live[0].fraction < 1
        assert "MiB/s" in live[0].message
        assert dh.leftover_files(target)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await host.close()
    for _ in range(150):
        if not dh.leftover_files(target) and not dh.fio_processes_on(target):
            break
        await asyncio.sleep(0.1)
    assert dh.leftover_files(target) == []
    assert dh.fio_processes_on(target) == []


def test_refuses_a_nearly_full_filesystem(box, inferfit_cli, small_tmpfs, tmp_path, dh):
    (small_tmpfs / "ballast").write_bytes(b"\0" * (56 * MIB))  # 8 MiB of 64 left
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(small_tmpfs), size="16M",
                          free_margin_gib=0.0, free_margin_pct=0.0)
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 3
    d = findings(out)
    assert d["error_kind"] == "insufficient_free_space"
    assert "refusing to create a 16 MiB test file" in d["summary"]
    assert d["filesystem"] == "tmpfs"
    assert d["fix"]
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["ballast"]


def test_refuses_when_the_margin_exceeds_free_space(box, inferfit_cli, tmp_path, dh):
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target), free_margin_gib=1e6)
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 3
    assert findings(out)["error_kind"] == "insufficient_free_space"
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("key", ["model_path", "directory"])
def test_refuses_a_block_device(box, inferfit_cli, tmp_path, dh, key):
    node = tmp_path / "disk0"
    os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 200))  # a loop device number, unused
    link = tmp_path / "weights"
    link.symlink_to(node)
    for path in (str(node), str(link)):
        cfg = dh.write_config(tmp_path / "c.toml", **{key: path})
        out = tmp_path / "f.toml"
        r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                         *box.cli())
        assert r.returncode == 3, r.stderr
        d = findings(out)
        assert d["error_kind"] == "refused_device"
        assert "block device" in d["summary"]
    # /dev paths are refused before anything runs on the box
    cfg = dh.write_config(tmp_path / "c.toml", **{key: "/dev/vda"})
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 3
    assert findings(out)["error_kind"] == "refused_device"


def test_write_test_needs_the_opt_in(box, inferfit_cli, tmp_path, dh):
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target),
                          jobs=["seq_read", "seq_write"])
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 3
    d = findings(out)
    assert d["error_kind"] == "write_not_allowed"
    assert "allow_write" in d["fix"]
    assert "seq_write_mib_s" not in d
    assert list(target.iterdir()) == []
    # with the opt-in the write test runs on the probe's own file, which is removed
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target),
                          jobs=["seq_read", "seq_write"], allow_write=True)
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 0, r.stderr
    d = findings(out)
    assert d["seq_write_mib_s"] > 0
    assert d["seq_read_mib_s"] > 0
    assert list(target.iterdir()) == []


def test_odirect_refused_reruns_buffered_and_says_so(sshd_factory, inferfit_cli, tmp_path, dh,
                                                     odirect_refusing_fio):
    server = sshd_factory(path_prepend=[odirect_refusing_fio], setenv=dh.quiet_env)
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target))
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *server.cli())
    assert r.returncode == 1, r.stderr  # warn
    d = findings(out)
    assert d["status"] == "warn"
    assert d["direct_io"] is False
    assert d["seq_read_mib_s"] > 0
    assert any("include page cache" in n for n in d["notes"])
    assert "O_DIRECT refused" in r.stderr
    assert list(target.iterdir()) == []


def test_fio_missing_is_skipped_with_the_install_command(sshd_factory, inferfit_cli, tmp_path,
                                                         dh, path_without_fio):
    server = sshd_factory(setenv={"PATH": path_without_fio, **dh.quiet_env})
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target))
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *server.cli())
    assert r.returncode == 0, r.stderr
    d = findings(out)
    assert d["status"] == "skipped"
    assert d["error_kind"] == "fio_missing"
    assert d["fix"] == "sudo apt-get install -y fio"  # this machine is Debian
    assert list(target.iterdir()) == []


def test_missing_directory_is_an_error_and_not_created(box, inferfit_cli, tmp_path, dh):
    target = tmp_path / "absent" / "deeper"
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target))
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    assert r.returncode == 3
    assert findings(out)["error_kind"] == "target_missing"
    assert not (tmp_path / "absent").exists()


def direct_fio(fio: str, directory: Path, engine: str) -> dict[str, float]:
    """The probe's two jobs run by hand with fio on this machine (no SSH, no probe)."""
    testfile = directory / "direct.bin"
    try:
        done = subprocess.run(
            [fio, "--output-format=json", f"--filename={testfile}", f"--size={64 * MIB}",
             "--direct=1", f"--ioengine={engine}", "--runtime=2", "--time_based",
             "--name=seq_read", "--rw=read", "--bs=1M", "--iodepth=16",
             "--name=rand_read", "--stonewall", "--rw=randread", "--bs=4k", "--iodepth=16"],
            capture_output=True, text=True, timeout=120, check=True)
    finally:
        testfile.unlink(missing_ok=True)
    jobs = {j["jobname"]: j["read"] for j in json.loads(done.stdout)["jobs"]}
    return {
        "seq_read_mib_s": jobs["seq_read"]["bw_bytes"] / MIB,
        "rand_read_iops": jobs["rand_read"]["iops"],
        "rand_read_clat_p99_us": jobs["rand_read"]["clat_ns"]["percentile"]["99.000000"] / 1000,
    }


def test_figures_agree_with_a_direct_fio_run(box, inferfit_cli, tmp_path, dh):
    """Same jobs through the probe and by hand, before and after: within run-to-run noise.

    The machine is shared with other test suites, so the band is wide (x4 either way of
    the nearer direct run); it still catches unit mistakes (KiB vs bytes, ns vs µs).
    """
    target = tmp_path / "target"
    target.mkdir()
    cfg = dh.write_config(tmp_path / "c.toml", directory=str(target), runtime_s=2.0,
                          size="64M")
    out = tmp_path / "f.toml"
    before = direct_fio(dh.fio, target, "libaio")
    r = inferfit_cli("check", "--probe", "disk", "--config", str(cfg), "--export", str(out),
                     *box.cli())
    after = direct_fio(dh.fio, target, "libaio")
    assert r.returncode == 0, r.stderr
    d = findings(out)
    assert d["ioengine"] == "libaio"
    for key in ("seq_read_mib_s", "rand_read_iops", "rand_read_clat_p99_us"):
        ratios = [d[key] / run[key] for run in (before, after)]
        assert any(0.25 <= x <= 4 for x in ratios), (key, d[key], before[key], after[key])
