"""Options, the target survey and the refusals, on recorded survey output (no commands)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inferfit.probes.disk import build_values, fio_argv, judge
from inferfit.probes.disk_target import (
    GIB,
    DiskOptions,
    OptionError,
    Plan,
    install_hint,
    parse_size,
    parse_survey,
    plan_target,
    read_options,
)
from inferfit.probes.fio_parse import parse_fio_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fio"


def survey(name: str):  # type: ignore[no-untyped-def]
    return parse_survey((FIXTURES / name).read_text())


def test_defaults_read_twice_and_safe() -> None:
    opts = read_options({})
    assert opts == DiskOptions()
    assert opts.jobs == ("seq_read", "rand_read")
    assert not opts.allow_write
    assert opts.size_bytes == GIB


@pytest.mark.parametrize(("text", "value"), [
    ("1G", GIB), ("512M", 512 << 20), ("512MiB", 512 << 20), ("4096", 4096), ("1.5g", 3 << 29),
    (2048, 2048),
])
def test_sizes(text: str | int, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize(("raw", "kind", "words"), [
    ({"size": "lots"}, "bad_config", "probes.disk.size"),
    ({"directory": "relative/dir"}, "bad_config", "not an absolute path"),
    ({"model_path": "/dev/nvme0n1"}, "refused_device", "never reads or writes devices"),
    ({"model_path": "/srv/../dev/sda"}, "refused_device", "never reads or writes devices"),
    ({"directory": "/dev"}, "refused_device", "/dev"),
    ({"directory": "/proc/self"}, "refused_device", "/proc"),
    ({"directory": "/srv", "jobs": ["seq_read", "seq_write"]}, "write_not_allowed",
     "writes are off by default"),
    ({"directory": "/srv", "jobs": ["rand_write"]}, "write_not_allowed", "allow_write"),
    ({"model_path": "/srv/m", "jobs": ["seq_write"], "allow_write": True}, "write_refused",
     "model files are never written"),
    ({"jobs": ["trim"]}, "bad_config", "unknown job"),
    ({"ioengine": "libaio; rm -rf /"}, "bad_config", "not an engine name"),
    ({"runtime_s": 0}, "bad_config", "runtime_s"),
])
def test_option_refusals(raw: dict[str, object], kind: str, words: str) -> None:
    with pytest.raises(OptionError) as info:
        read_options(raw)
    assert info.value.kind == kind
    assert words in info.value.message
    assert info.value.fix


def test_survey_of_a_directory_on_ext4() -> None:
    s = survey("survey-dir.txt")
    assert s.fio_path == "/usr/bin/fio"
    assert s.fio_version == "fio-3.33"
    assert {"libaio", "io_uring", "psync"} <= set(s.engines)
    assert s.kind == "dir"
    assert s.readable
    assert s.writable
    assert (s.device, s.fstype, s.mount) == ("/dev/vda", "ext4", "/")
    assert s.fs_avail_bytes is not None
    assert s.fs_avail_bytes > GIB
    assert s.os_release["ID"] == "debian"
    assert s.mem_total_bytes is not None
    assert s.mem_total_bytes > GIB


def test_test_file_plan_names_a_file_inside_the_directory() -> None:
    opts = read_options({"directory": "/tmp/rec", "size": "16M", "free_margin_gib": 1.0})
    plan = plan_target(opts, survey("survey-dir.txt"), ".inferfit-fio-x.tmp")
    assert isinstance(plan, Plan)
    assert plan.test_file == "/tmp/rec/.inferfit-fio-x.tmp"
    assert plan.files == (plan.test_file,)
    argv = fio_argv(plan, opts, direct=True, engine="libaio")
    assert argv[0] == "fio"
    assert "--readonly" not in argv
    assert f"--size={16 << 20}" in argv
    assert "--direct=1" in argv
    assert "--output-format=json" in argv
    assert "--status-interval=1" in argv
    assert [a for a in argv if a.startswith("--rw=")] == ["--rw=read", "--rw=randread"]


def test_refuses_when_free_space_would_drop_below_the_margin() -> None:
    s = survey("survey-dir.txt")
    assert s.fs_avail_bytes is not None
    free_gib = s.fs_avail_bytes / GIB
    opts = read_options({"directory": "/tmp/rec", "size": "1G",
                         "free_margin_gib": free_gib + 10})
    refusal = plan_target(opts, s, "t")
    assert isinstance(refusal, OptionError)
    assert refusal.kind == "insufficient_free_space"
    assert "below the safety margin" in refusal.message
    assert "/dev/vda" in refusal.message
    nearly_full = dataclasses.replace(s, fs_avail_bytes=300 << 20, fs_size_bytes=GIB)
    refusal = plan_target(read_options({"directory": "/x", "size": "512M", "free_margin_gib": 0,
                                        "free_margin_pct": 0}), nearly_full, "t")
    assert isinstance(refusal, OptionError)
    assert refusal.kind == "insufficient_free_space"
    assert "would leave 0 MiB free" in refusal.message


def test_refuses_a_block_device_found_on_the_box() -> None:
    s = survey("survey-block.txt")
    assert s.kind == "block"
    for raw in ({"model_path": "/srv/disk"}, {"directory": "/srv/disk"}):
        refusal = plan_target(read_options(raw), s, "t")
        assert isinstance(refusal, OptionError)
        assert refusal.kind == "refused_device"
    # a path that only resolves into /dev (a symlink) is refused as well
    linked = dataclasses.replace(s, kind="file", realpath="/dev/sda")
    refusal = plan_target(read_options({"model_path": "/srv/weights"}), linked, "t")
    assert isinstance(refusal, OptionError)
    assert refusal.kind == "refused_device"


def test_missing_directory_is_not_created() -> None:
    refusal = plan_target(read_options({"directory": "/tmp/rec/nope"}),
                          survey("survey-missing.txt"), "t")
    assert isinstance(refusal, OptionError)
    assert refusal.kind == "target_missing"


def test_model_directory_reads_only_the_safetensors_read_only() -> None:
    s = survey("survey-model-dir.txt")
    opts = read_options({"model_path": "/tmp/rec/model"})
    plan = plan_target(opts, s, "t")
    assert isinstance(plan, Plan)
    assert plan.mode == "model"
    assert plan.test_file == ""
    assert plan.model_bytes == 3_000_000 + 2_000_000  # config.json not counted
    assert sorted(Path(f).name for f in plan.files) == [
        "model 00002-of-00002.safetensors", "model-00001-of-00002.safetensors"]
    argv = fio_argv(plan, opts, direct=True, engine="io_uring")
    assert "--readonly" in argv
    assert not any(a.startswith("--size") for a in argv)
    assert "--ioengine=io_uring" in argv


def test_colons_in_file_names_are_escaped_for_fio() -> None:
    plan = Plan("model", "/m", ("/m/a:b.safetensors", "/m/c.safetensors"), model_bytes=2)
    argv = fio_argv(plan, DiskOptions(), direct=True, engine="libaio")
    assert "--filename=/m/a\\:b.safetensors:/m/c.safetensors" in argv


@pytest.mark.parametrize(("release", "command"), [
    ({"ID": "debian"}, "sudo apt-get install -y fio"),
    ({"ID": "ubuntu", "ID_LIKE": "debian"}, "sudo apt-get install -y fio"),
    ({"ID": "rocky", "ID_LIKE": "rhel centos fedora", "VERSION_ID": "9.3"},
     "sudo dnf install -y fio"),
    ({"ID": "centos", "VERSION_ID": "7"}, "sudo yum install -y fio"),
    ({"ID": "amzn", "VERSION_ID": "2"}, "sudo yum install -y fio"),
    ({"ID": "amzn", "VERSION_ID": "2023"}, "sudo dnf install -y fio"),
    ({"ID": "opensuse-leap", "ID_LIKE": "suse opensuse"}, "sudo zypper install -y fio"),
    ({"ID": "alpine"}, "sudo apk add fio"),
    ({"ID": "arch"}, "sudo pacman -S --noconfirm fio"),
    ({}, "install the fio package with the box's package manager"),
])
def test_install_command_per_distro(release: dict[str, str], command: str) -> None:
    assert install_hint(release) == command


def _values(model_bytes: int | None, **opts: object) -> tuple[str, str, list[str]]:
    report = parse_fio_json((FIXTURES / "fio-seqread-1m.json").read_text())
    report = dataclasses.replace(
        report, jobs=(dataclasses.replace(report.jobs[0], name="seq_read"),))
    options = read_options({"model_path": "/m", **opts})
    plan = Plan("model", "/m", ("/m/a.safetensors",), model_bytes=model_bytes)
    values = build_values(report, plan, options, survey("survey-dir.txt"), direct=True,
                          engine="libaio")
    status, summary, notes = judge(values, options)
    return status, summary, notes


def test_model_load_estimate_and_thresholds() -> None:
    bw = 2573053852
    status, summary, notes = _values(bw * 10)  # 10 s
    assert status == "ok"
    assert "loads in ≥ 10.0 s" in summary
    assert "2454 MiB/s" in summary
    assert any("lower bound" in n for n in notes)
    assert _values(bw * 61)[0] == "warn"
    assert _values(bw * 301)[0] == "fail"
    assert _values(bw * 20, model_load_warn_s=10.0, model_load_fail_s=15.0)[0] == "fail"
    assert "loads in" not in _values(None)[1]
