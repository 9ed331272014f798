"""Topology matrix, XID lines and failure classes on recorded text."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferfit.probes.gpu_events import (
    FIXES,
    classify_failure,
    failure_for_code,
    parse_topology,
    parse_xid,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_topology_8x_h100_nvlink():
    topo = parse_topology(text("HazyResearch__ThunderKittens__issue-167.h100x8.topo.txt"))
    assert topo is not None
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["interconnect"] == "nvlink"
    assert topo["nvlink_pairs"] == 28
    assert topo["pcie_pairs"] == 0
    assert topo["nvlinks_per_pair_min"] == topo["nvlinks_per_pair_max"] == 18
    assert topo["matrix"][0][:3] == ["X", "NV18", "NV18"]
    assert topo["cpu_affinity"][4] == "48-95,144-191"
    assert topo["numa_affinity"][7] == "1"


def test_topology_tab_separated_pcie():
    topo = parse_topology(text("noonghunna__club-3090__issue-1229.2gpu-phb.topo.txt"))
    assert topo is not None
    assert topo["matrix"] == [["X", "PHB"], ["PHB", "X"]]
    assert topo["interconnect"] == "pcie"
    assert topo["numa_affinity"] == ["0", "0"]


def test_topology_with_nic_columns_and_cut_short():
    topo = parse_topology(text("kubernetes__kubernetes__issue-53497.8gpu-pcie-nic.topo.txt"))
    assert topo is not None
    assert len(topo["matrix"][0]) == 8  # the mlx4_0 column is not a GPU
    assert topo["truncated"] is True
    assert topo["interconnect"] == "pcie"
    assert topo["cpu_affinity"][0] == "0-9,20-29"


def test_topology_mixed_links():
    body = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
            "GPU0\t X \tNV4\tSYS\t0-7\nGPU1\tNV4\t X \tNV2\t0-7\nGPU2\tSYS\tNV2\t X \t0-7\n")
    topo = parse_topology(body)
    assert topo is not None
    assert topo["interconnect"] == "mixed"
    assert topo["nvlink_pairs"] == 2
    assert topo["nvlinks_per_pair_min"] == 2


@pytest.mark.parametrize(
    "body", ["", "garbage", "GPU0\n", "\tGPU0\tCPU Affinity\nGPU0\t X \t0-3\n"])
def test_topology_nothing_to_say(body):
    assert parse_topology(body) is None


def test_xid_lines_of_every_shape():
    events = parse_xid(text("kernel-log.xid.txt"))
    by = {(e["xid"], e["pci"]): e for e in events}
    assert by[(13, "0000:cb:00")]["count"] == 1
    assert by[(109, "0000:cb:00")]["meaning"] == "context switch timeout"
    assert by[(48, "0000:07:00")]["message"].startswith("An uncorrectable double bit error")
    assert (64, "0000:07:00") in by
    assert by[(79, "0000:44:00")]["meaning"] == "GPU has fallen off the bus"
    # the multi-line "fallen off the bus" report without an Xid line counts as XID 79
    assert by[(79, "0000:b3:00")]["count"] == 1
    assert (45, "0000:dc:00") in by
    assert (94, "0000:9b:00") in by


def test_xid_repeated_lines_are_counted():
    line = "NVRM: Xid (PCI:0000:3b:00): 31, pid=42, name=python, Ch 00000010, intr 10000000\n"
    (event,) = parse_xid(line * 3)
    assert event["count"] == 3
    assert event["xid"] == 31


def test_xid_nothing():
    assert parse_xid("") == []
    log = "[ 0.0] Linux version 6.1\nNVRM: loading NVIDIA UNIX x86_64 Kernel Module"
    assert parse_xid(log) == []


@pytest.mark.parametrize(("rc", "stdout", "stderr", "kind"), [
    (127, "", "bash: line 1: nvidia-smi: command not found", "not_installed"),
    (9, text("GoogleCloudPlatform__compute-gpu-installation__pr-18.couldnt-communicate.txt"), "",
     "driver_not_loaded"),
    (9, "NVIDIA-SMI has failed because it couldn\u2019t communicate with the NVIDIA driver.", "",
     "driver_not_loaded"),
    (18, text("anderskm__gputil__issue-55.driver-library-mismatch.txt"), "",
     "driver_library_mismatch"),
    (14, "WARNING: infoROM is corrupted at gpu 0000:0A:00.0", "", "inforom_corrupted"),
    (15, "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.", "",
     "gpu_lost"),
    (6, text("NVIDIA__open-gpu-kernel-modules__issue-862.no-devices-were-found.txt"), "",
     "no_devices"),
    (255, "No supported GPUs were found", "", "no_supported_gpus"),
    (255, "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error", "",
     "nvml_unknown_error"),
    (4, "", "Insufficient Permissions", "no_permission"),
])
def test_classify_failure(rc, stdout, stderr, kind):
    found = classify_failure(rc, stdout, stderr)
    assert found is not None
    assert found.kind == kind
    assert found.fix == FIXES[kind][1]


def test_mismatch_names_the_library_version():
    found = classify_failure(
        18, text("anderskm__gputil__issue-55.driver-library-mismatch.txt"), "")
    assert found is not None
    assert "535.161" in found.summary


def test_unclassified_failure_is_none():
    assert classify_failure(2, "", "Invalid combination of input arguments.") is None


def test_nvml_codes_map_to_the_same_classes():
    assert failure_for_code(12).kind == "nvml_library_not_found"
    assert failure_for_code(9).kind == "driver_not_loaded"
    assert failure_for_code(18).kind == "driver_library_mismatch"
    assert failure_for_code(15).kind == "gpu_lost"
    assert failure_for_code(None).kind == "nvml_unknown_error"


def test_every_fix_is_one_sentence():
    for kind, (summary, fix) in FIXES.items():
        assert summary, kind
        assert fix, kind
        assert "\n" not in fix
        assert fix.replace("e.g. ", "").count(". ") == 0, kind
