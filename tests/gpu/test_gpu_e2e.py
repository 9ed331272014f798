"""End to end: `inferfit check --probe gpu` through a real sshd whose PATH starts with a
fake nvidia-smi replaying recorded captures and driver failures."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.hosts.ssh import SSHHost, SSHOptions
from inferfit.probes.gpu import GpuProbe

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# Generous limits: these tests share two CPU cores with other work and must not mistake
# a slow machine for a hung nvidia-smi (that case has its own test below).
PATIENT = "[check]\nprobe_timeout_s = 300.0\n[probes.gpu]\ncommand_timeout_s = 120.0\n"


def check_gpu(inferfit_cli: Any, server: Any, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "findings.toml"
    cfg = tmp_path / "patient.toml"
    cfg.write_text(PATIENT)
    result = inferfit_cli("check", "--probe", "gpu", "--config", str(cfg), "--export", str(out),
                          *server.cli(), timeout=400)
    assert out.exists(), result.stderr
    doc = tomllib.loads(out.read_text())
    return result, doc["probes"]["gpu"]


def test_a100_mig_capture(sshd_factory, fake_box, inferfit_cli, tmp_path):
    box = fake_box()
    box.set("qx", fixture_text("influxdata__telegraf__a100-sxm4-v12.xml"))
    box.set("list", fixture_text("influxdata__telegraf__issue-5812.a100-mig.list.txt"))
    box.set("dmesg", "")
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert gpu["status"] == "ok"
    assert gpu["driver_version"] == "535.54.03"
    assert gpu["cuda_version"] == "12.2"
    assert gpu["gpu_count"] == 4
    dev0 = gpu["devices"][0]
    assert dev0["name"] == "NVIDIA A100-SXM4-80GB"
    assert dev0["memory_total_mib"] == 81920
    assert dev0["memory_class_gb"] == 80
    assert dev0["mig_enabled"] is True
    assert dev0["power_draw_w"] == 67.03
    assert dev0["pcie_gen_current"] == 4
    assert dev0["pcie_width_current"] == 16
    migs = dev0["mig_devices"]
    assert [m["profile"] for m in migs] == ["1g.20gb"] * 4
    assert [m["gpu_instance_id"] for m in migs] == [3, 4, 5, 6]
    assert all(m["memory_total_mib"] == 19968 for m in migs)
    # The other three GPUs appear from nvidia-smi -L, flagged as not described.
    assert [d["index"] for d in gpu["devices"]] == [0, 1, 2, 3]
    assert gpu["devices"][3]["uuid"] == "GPU-69ec2344-ebac-b028-f88f-452abb3d7f11"
    assert "MIG on 1 GPU(s) with 4 instance(s)" in gpu["summary"]
    assert gpu["kernel_log_source"] == "dmesg"
    assert gpu["xid_events"] == []
    assert "A100" in result.stdout


def test_h100_capture_via_query_csv(sshd_factory, fake_box, inferfit_cli, tmp_path):
    """The H100 capture has no -q -x output; the fake answers it as unsupported and the
    probe falls back to the --query-gpu CSV the capture does have."""
    box = fake_box()
    box.set("query", fixture_text("utkuozdemir__h100-590.48.01.idle.query.csv"))
    box.set("table", fixture_text("utkuozdemir__h100-590.48.01.idle.table.txt"))
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert gpu["source"] == "nvidia-smi --query-gpu"
    assert gpu["driver_version"] == "590.48.01"
    dev = gpu["devices"][0]
    assert dev["name"] == "NVIDIA H100 80GB HBM3"
    assert dev["power_draw_w"] == 69.85
    assert dev["power_limit_w"] == 700.0
    assert dev["memory_total_mib"] == 81559
    assert dev["memory_class_gb"] == 80
    assert dev["pcie_gen_current"] == 5
    assert dev["pcie_width_max"] == 16
    assert dev["ecc_errors_uncorrected"] == 0
    assert dev["mig_enabled"] is False
    assert dev["health"] == "ok"
    assert any("fewer details" in n for n in gpu["notes"])
    assert "-q -x" in box.calls()


def test_t4_capture_warns(sshd_factory, fake_box, inferfit_cli, tmp_path):
    box = fake_box()
    box.set("qx", fixture_text("influxdata__telegraf__tesla-t4.xml"))
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 1  # warn
    assert gpu["status"] == "warn"
    dev = gpu["devices"][0]
    assert dev["health"] == "warn"
    assert dev["pcie_width_current"] == 8
    assert dev["pcie_width_max"] == 16
    assert any("x8 of x16" in r for r in dev["reasons"])
    assert any("python (pid 5762" in r for r in dev["reasons"])


def test_topology_and_xid_fail(sshd_factory, fake_box, inferfit_cli, tmp_path):
    box = fake_box()
    box.set("qx", fixture_text("influxdata__telegraf__dual-a5000-v13.excerpt.xml"))
    box.set("topo", fixture_text("noonghunna__club-3090__issue-1229.2gpu-phb.topo.txt"))
    box.set("dmesg", fixture_text("kernel-log.xid.txt"))
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 2  # fail
    assert gpu["status"] == "fail"
    assert gpu["topology"]["interconnect"] == "pcie"
    assert gpu["topology"]["matrix"] == [["X", "PHB"], ["PHB", "X"]]
    xids = {e["xid"] for e in gpu["xid_events"]}
    assert {13, 48, 64, 79, 94, 109} <= xids
    assert any("XID 79 (GPU has fallen off the bus)" in n for n in gpu["notes"])
    assert gpu["devices"][0]["power_draw_w"] == 6.52  # v13 instant_power_draw


FAILURES = [
    # (name, rc, stdout, stderr, error_kind)
    ("driver-not-loaded", 9,
     fixture_text("GoogleCloudPlatform__compute-gpu-installation__pr-18.couldnt-communicate.txt"),
     "", "driver_not_loaded"),
    ("driver-not-loaded-typographic", 9,
     fixture_text("GoogleCloudPlatform__compute-gpu-installation__pr-18.couldnt-communicate.txt")
     .replace("couldn't", "couldn\u2019t"), "", "driver_not_loaded"),
    ("version-mismatch", 18,
     fixture_text("anderskm__gputil__issue-55.driver-library-mismatch.txt"), "",
     "driver_library_mismatch"),
    ("inforom", 14, "WARNING: infoROM is corrupted at gpu 0000:0A:00.0\n", "",
     "inforom_corrupted"),
    ("gpu-lost", 15, "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  "
     "Reboot the system to recover this GPU\n", "", "gpu_lost"),
    ("no-devices", 6,
     fixture_text("NVIDIA__open-gpu-kernel-modules__issue-862.no-devices-were-found.txt"), "",
     "no_devices"),
    ("no-supported", 255, "No supported GPUs were found\n", "", "no_supported_gpus"),
]


@pytest.mark.parametrize(("name", "rc", "stdout", "stderr", "kind"), FAILURES,
                         ids=[f[0] for f in FAILURES])
def test_driver_failures(sshd_factory, fake_box, inferfit_cli, tmp_path, name, rc, stdout,
                         stderr, kind):
    box = fake_box()
    box.set("all", stdout=stdout, stderr=stderr, rc=rc)
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 3, result.stdout  # could not check
    assert gpu["status"] == "error"
    assert gpu["error_kind"] == kind
    assert gpu["fix"]
    assert "\n" not in gpu["fix"]
    assert "devices" not in gpu
    assert "fix:" in result.stdout


def test_failure_classes_have_distinct_fixes():
    from inferfit.probes.gpu_events import FIXES

    kinds = [f[4] for f in FAILURES]
    assert len({FIXES[k][1] for k in kinds}) == len(set(kinds))


def test_no_gpu_on_box_is_skipped(sshd_factory, fake_box, inferfit_cli, tmp_path):
    """nvidia-smi absent and no /dev/nvidia* (this machine): skipped, exit 0."""
    assert not any(Path("/dev").glob("nvidia*"))
    box = fake_box(with_smi=False)
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert gpu["status"] == "skipped"
    assert gpu["error_kind"] == "no_gpu"
    assert "no NVIDIA GPU" in gpu["summary"]


def test_hung_nvidia_smi_is_named(sshd_factory, fake_box, inferfit_cli, tmp_path):
    box = fake_box()
    (box.bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 30\n")
    server = sshd_factory(path_prepend=[box.bin_dir])
    cfg = tmp_path / "gpu.toml"
    cfg.write_text("[probes.gpu]\ncommand_timeout_s = 1.0\n")
    out = tmp_path / "f.toml"
    result = inferfit_cli("check", "--probe", "gpu", "--config", str(cfg), "--export", str(out),
                          *server.cli())
    gpu = tomllib.loads(out.read_text())["probes"]["gpu"]
    assert result.returncode == 3
    assert gpu["error_kind"] == "nvidia_smi_hung"


def test_watch_streams_samples_and_stops(sshd_factory, fake_box, home, tmp_path):
    box = fake_box()
    box.set("stream", "0, 97, 19818, 81559, 631.95\n1, 3, 120, 81559, [N/A]\n")
    server = sshd_factory(path_prepend=[box.bin_dir])
    probe = GpuProbe()
    ctx = ProbeContext(options={"sample_interval_ms": 200}, config=Config())

    async def run() -> list[Any]:
        host = SSHHost("box", SSHOptions(config_file=str(server.ssh_config)))
        samples = []
        try:
            stream = probe.watch(host, ctx)
            async for sample in stream:
                samples.append(sample)
                if len(samples) == 3:
                    break
            await stream.aclose()  # type: ignore[attr-defined]
        finally:
            await host.close()
        return samples

    samples = asyncio.run(asyncio.wait_for(run(), 60))
    assert len(samples) == 3
    for sample in samples:
        assert sample.probe == "gpu"
        assert sample.values["gpus"] == [
            {"index": 0, "util_gpu_pct": 97.0, "memory_used_mib": 19818.0,
             "memory_total_mib": 81559.0, "power_draw_w": 631.95},
            {"index": 1, "util_gpu_pct": 3.0, "memory_used_mib": 120.0,
             "memory_total_mib": 81559.0},
        ]
    # The remote nvidia-smi loop ends once the stream is closed (bounded wait).
    pid = int((box.data / "stream.pid").read_text())
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            break
        asyncio.run(asyncio.sleep(0.1))
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
        pytest.fail("the remote nvidia-smi kept running after the stream was closed")


def test_inforom_warning_next_to_good_xml_warns(sshd_factory, fake_box, inferfit_cli, tmp_path):
    box = fake_box()
    box.set("qx", fixture_text("influxdata__telegraf__a100-sxm4-v12.xml"),
            stderr="WARNING: infoROM is corrupted at gpu 0000:01:00.0\n")
    server = sshd_factory(path_prepend=[box.bin_dir])
    result, gpu = check_gpu(inferfit_cli, server, tmp_path)
    assert result.returncode == 1
    assert gpu["status"] == "warn"
    assert any("infoROM is corrupted" in n for n in gpu["notes"])
    assert gpu["devices"][0]["name"] == "NVIDIA A100-SXM4-80GB"


def test_bad_source_is_a_config_error(sshd_factory, fake_box, inferfit_cli, tmp_path):
    cfg = tmp_path / "gpu.toml"
    cfg.write_text('[probes.gpu]\nsource = "dcgm"\n')
    box = fake_box()
    server = sshd_factory(path_prepend=[box.bin_dir])
    out = tmp_path / "f.toml"
    result = inferfit_cli("check", "--probe", "gpu", "--config", str(cfg), "--export", str(out),
                          *server.cli())
    assert result.returncode == 3
    gpu = tomllib.loads(out.read_text())["probes"]["gpu"]
    assert gpu["error_kind"] == "bad_config"
