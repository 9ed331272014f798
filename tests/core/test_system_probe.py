"""system probe parsing on recorded script output, and its verdicts."""

from __future__ import annotations

from pathlib import Path

from inferfit.probes.system import judge, parse_system

FIX = Path(__file__).parent.parent / "fixtures" / "system"


def test_parse_debian_vm_recording() -> None:
    v = parse_system((FIX / "debian12-vm.txt").read_text())
    assert v["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert v["os_id"] == "debian"
    assert v["kernel"] == "Linux 6.18.44-fc-v669"
    assert v["arch"] == "x86_64"
    assert v["cpu_cores"] == 2
    assert v["memory_gib"] == round(24684084 / 1024 / 1024, 2)
    assert v["swap_gib"] == 0
    assert v["swap_used_mib"] == 0
    assert v["uptime_s"] == 575
    assert [fs["mount"] for fs in v["filesystems"]] == ["/"]  # same mount listed once
    assert v["tools"]["fio"]
    assert not v["tools"]["nvidia-smi"]
    status, summary, notes = judge(v, {"free_gib_warn": 20.0, "swap_used_mib_warn": 256.0})
    assert status == "ok"
    assert "2 cores" in summary
    assert notes == ["not found on the box: nvidia-smi"]


def test_swapping_full_root_and_overload_warn() -> None:
    v = parse_system((FIX / "ubuntu-gpu-swapping.txt").read_text())
    assert v["cpu_model"] == "AMD EPYC 9454 48-Core Processor"
    assert v["swap_used_mib"] == round((8388604 - 7340028) / 1024, 1)
    assert v["link_mbit"] == 100000  # fastest physical link that is up
    assert [n["name"] for n in v["nics"]] == ["eno1", "ens5f0np0", "ens5f1np1"]
    assert "speed_mbit" not in v["nics"][2]
    status, _summary, notes = judge(v, {"free_gib_warn": 20.0, "swap_used_mib_warn": 256.0})
    assert status == "warn"
    text = "\n".join(notes)
    assert "GiB free on /" in text
    assert "/data" not in text
    assert "swap in use" in text
    assert "load 412.31 on 96 cores" in text
    assert "fio" in text  # missing tool named


def test_truncated_output_does_not_crash() -> None:
    text = (FIX / "ubuntu-gpu-swapping.txt").read_text()
    for cut in range(0, len(text), 37):
        values = parse_system(text[:cut])
        judge(values, {})


def test_load_threshold_is_configurable() -> None:
    v = parse_system((FIX / "ubuntu-gpu-swapping.txt").read_text())
    _s, _summary, notes = judge(v, {"load_per_core_warn": 5.0, "swap_used_mib_warn": 1e9,
                                    "free_gib_warn": 0.0})
    assert not any("load" in n for n in notes)
