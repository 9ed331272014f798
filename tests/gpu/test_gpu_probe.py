"""GpuProbe.check / watch against a scripted in-process host: the paths the sshd tests
cannot reach on this machine (a GPU on the PCI bus without a driver, a single-GPU stream)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.hosts.base import Completed, Transport
from inferfit.probes.gpu import GpuProbe, parse_kernel_log

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


class ScriptedHost:
    """Answers run() by the first matching rule (argv predicate -> (rc, stdout, stderr))."""

    transport: Transport = "ssh"

    def __init__(self, rules: list[tuple[Callable[[Sequence[str]], bool], tuple[int, str, str]]],
                 stream_lines: list[str] | None = None) -> None:
        self.name = self.address = "scripted"
        self.rules = rules
        self.stream_lines = stream_lines or []
        self.ran: list[list[str]] = []
        self.stream_closed = False

    async def run(self, argv: Sequence[str], *, timeout: float,
                  stdin: bytes | None = None) -> Completed:
        self.ran.append(list(argv))
        for match, (rc, out, err) in self.rules:
            if match(argv):
                return Completed(tuple(argv), rc, out, err, 0.0)
        return Completed(tuple(argv), 127, "", f"{argv[0]}: command not found", 0.0)

    async def stream(self, argv: Sequence[str], *, timeout: float | None = None,
                     stdin: bytes | None = None) -> AsyncIterator[str]:
        try:
            for line in self.stream_lines:
                await asyncio.sleep(0)
                yield line
        finally:
            self.stream_closed = True

    async def close(self) -> None:
        return None


def is_script(argv: Sequence[str], marker: str) -> bool:
    return argv[0] == "sh" and marker in argv[2]


def ctx(**options: Any) -> ProbeContext:
    return ProbeContext(options=options, config=Config())


def test_gpu_on_pci_without_driver_is_not_installed():
    host = ScriptedHost([
        (lambda a: is_script(a, "@@devnodes"), (0, "@@devnodes\n@@pci\n0000:3b:00.0\n@@end\n", "")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx()))
    assert result.status == "error"
    assert result.error_kind == "not_installed"
    assert "0000:3b:00.0" in result.summary


def test_device_nodes_without_nvidia_smi_is_not_installed():
    host = ScriptedHost([
        (lambda a: is_script(a, "@@devnodes"),
         (0, "@@devnodes\n/dev/nvidia0\n/dev/nvidiactl\n@@pci\n@@end\n", "")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx()))
    assert result.error_kind == "not_installed"
    assert "/dev/nvidia0" in result.summary


def test_unreadable_xml_falls_back_to_table():
    table = (FIXTURES / "thamada__nvidia-smi__H100SXMx8_smi.table.txt").read_text()
    host = ScriptedHost([
        (lambda a: list(a) == ["nvidia-smi", "-q", "-x"], (0, "<nvidia_smi_log><gpu>", "")),
        (lambda a: list(a) == ["nvidia-smi"], (0, table, "")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx(read_kernel_log=False)))
    assert result.status == "ok"
    assert result.values["source"] == "nvidia-smi (table)"
    assert result.values["gpu_count"] == 8
    assert any("does not parse" in n for n in result.notes)


def test_nothing_readable_is_unparseable():
    host = ScriptedHost([
        (lambda a: list(a) == ["nvidia-smi", "-q", "-x"], (0, "garbage", "")),
        (lambda a: a[0] == "nvidia-smi", (0, "garbage", "")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx(read_kernel_log=False)))
    assert result.status == "error"
    assert result.error_kind == "unparseable"


def test_kernel_log_unreadable_is_a_note():
    xml = (FIXTURES / "influxdata__telegraf__a100-sxm4-v12.xml").read_text()
    host = ScriptedHost([
        (lambda a: list(a) == ["nvidia-smi", "-q", "-x"], (0, xml, "")),
        (lambda a: is_script(a, "dmesg"),
         (0, "@@dmesg-error dmesg: read kernel buffer failed: Operation not permitted\n"
             "@@journalctl-error No journal files were found.\n@@unreadable\n", "")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx()))
    assert result.status == "ok"
    assert "xid_events" not in result.values
    assert any("kernel log not readable" in n and "Operation not permitted" in n
               for n in result.notes)


def test_parse_kernel_log_journal():
    source, events, why = parse_kernel_log(
        "@@dmesg-error dmesg: read kernel buffer failed: Operation not permitted\n"
        "@@source journalctl -k\n"
        "Dec  2 11:38:47 worker4 kernel: NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE) has been detected\n")
    assert source == "journalctl -k"
    assert why is None
    assert events[0]["xid"] == 48


def test_watch_single_gpu_groups_and_closes_the_stream():
    host = ScriptedHost([], stream_lines=[
        "0, 10, 100, 1000, 50.5", "garbage", "0, 20, 200, 1000, 51.5", "0, 30, 300, 1000, [N/A]"])
    probe = GpuProbe()

    async def take() -> list[Any]:
        out = []
        async for sample in probe.watch(host, ctx(source="nvidia-smi")):
            out.append(sample.values["gpus"])
        return out

    samples = asyncio.run(take())
    assert [s[0]["util_gpu_pct"] for s in samples] == [10, 20, 30]
    assert "power_draw_w" not in samples[2][0]
    assert host.stream_closed


def test_watch_two_gpus_after_the_first_set_needs_no_repeat():
    lines = ["0, 1, 1, 10, 1", "1, 2, 2, 10, 2", "0, 3, 3, 10, 3", "1, 4, 4, 10, 4"]
    host = ScriptedHost([], stream_lines=lines)

    async def take() -> list[Any]:
        out = []
        stream = GpuProbe().watch(host, ctx(source="nvidia-smi"))
        async for sample in stream:
            out.append([g["util_gpu_pct"] for g in sample.values["gpus"]])
            if len(out) == 2:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return out

    assert asyncio.run(take()) == [[1, 2], [3, 4]]
    assert host.stream_closed


def test_xml_with_nonzero_exit_fails_with_the_reason():
    xml = (FIXTURES / "influxdata__telegraf__tesla-t4.xml").read_text()
    host = ScriptedHost([
        (lambda a: list(a) == ["nvidia-smi", "-q", "-x"],
         (15, xml, "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx(read_kernel_log=False)))
    assert result.status == "fail"
    assert result.values["devices"][0]["name"] == "Tesla T4"
    assert "GPU is lost" in result.notes[0]
    assert "fix: reboot the box" in result.notes[0]


def test_xml_without_gpus_is_no_devices():
    host = ScriptedHost([
        (lambda a: list(a) == ["nvidia-smi", "-q", "-x"],
         (0, "<?xml version='1.0'?><nvidia_smi_log><attached_gpus>0</attached_gpus>"
             "</nvidia_smi_log>", "")),
    ])
    result = asyncio.run(GpuProbe().check(host, ctx(read_kernel_log=False)))
    assert result.status == "error"
    assert result.error_kind == "no_devices"


ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if p.is_file())


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_no_fixture_crashes_the_probe(name):
    """Every capture as the answer to every nvidia-smi call (and as the kernel log):
    check() returns a result, never raises."""
    raw = (FIXTURES / name).read_text(encoding="utf-8")
    for rc in (0, 1):
        host = ScriptedHost([
            (lambda a: a[0] == "nvidia-smi", (rc, raw, "")),
            (lambda a: is_script(a, "dmesg"), (0, "@@source dmesg\n" + raw, "")),
        ])
        result = asyncio.run(GpuProbe().check(host, ctx()))
        assert result.status in ("ok", "warn", "fail", "error", "skipped")
        assert result.summary
