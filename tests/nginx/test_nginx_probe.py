"""The probe's paths: no python3 on the box, unreadable config, no nginx, live mode."""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import Sequence
from pathlib import Path

from inferfit.api import LiveProbe, ProbeContext
from inferfit.config import Config
from inferfit.hosts.base import Completed
from inferfit.hosts.local import LocalHost
from inferfit.hosts.ssh import SSHHost, SSHOptions
from inferfit.manager import Registry, make_plugin_manager
from inferfit.probes.nginx import FIND_SCRIPT, NginxProbe

from .conftest import AI_API_TEXT, FIXTURES

AI_LOG = FIXTURES / "ai_api-sample.log"


def _fakebin(tmp_path: Path, name: str, script: str) -> Path:
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    exe = d / name
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return d


def _cfg(tmp_path: Path, **keys: str) -> str:
    cfg = tmp_path / "c.toml"
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    cfg.write_text(f"[check]\nprobe_timeout_s = 600.0\n\n[probes.nginx]\n{body}")
    return str(cfg)


def _run(inferfit_cli, server, tmp_path: Path, cfg: str, name: str) -> dict:
    out = tmp_path / f"{name}.toml"
    r = inferfit_cli("check", "--probe", "nginx", "--config", cfg, "--export", str(out),
                     *server.cli())
    assert out.exists(), r.stderr
    return tomllib.loads(out.read_text())["probes"]["nginx"]


def test_registered_as_a_live_probe():
    reg = Registry.collect(make_plugin_manager(load_entry_points=False))
    assert isinstance(reg.probes["nginx"], LiveProbe)


class _NoPython(SSHHost):
    """The real sshd, on a box whose python3 is missing (a login shell may put its own first)."""

    async def run(self, argv: Sequence[str], *, timeout: float,
                  stdin: bytes | None = None) -> Completed:
        if argv and argv[0] == "python3":
            argv = ["sh", "-c", "exit 127"]
        return await super().run(argv, timeout=timeout, stdin=stdin)


async def test_without_python3_the_window_is_read_over_the_connection(sshd, tmp_path):
    log = tmp_path / "access.log"
    data = AI_LOG.read_bytes()
    log.write_bytes(data[:1000] + b"\xff\xfe not utf-8\n" + data[1000:].split(b"\n", 1)[1])
    opts = {"log_path": str(log), "log_format": AI_API_TEXT, "window": "all"}
    ctx = ProbeContext(options=opts, config=Config())
    results = {}
    for cls in (SSHHost, _NoPython):
        host = cls("box", SSHOptions(config_file=str(sshd.ssh_config)))
        try:
            results[cls.__name__] = await NginxProbe().check(host, ctx)
        finally:
            await host.close()
    on_box, here = results["SSHHost"].values, results["_NoPython"].values
    assert on_box["aggregated_on"] == "box"
    assert here["aggregated_on"] == "locally"
    assert (on_box["parser"], here["parser"]) == ("python", "c")  # the box script; the C scanner
    assert on_box["bad_lines"] == here["bad_lines"] == 1
    for key in ("lines", "status_counts", "request_time_ms_p99", "upstream_time_ms_p95",
                "upstream_retries", "qps_peak", "window_s"):
        assert here[key] == on_box[key], key
    # Only aggregates crossed in one case, the whole log in the other.
    assert here["bytes_transferred"] >= log.stat().st_size * 0.9
    assert on_box["bytes_transferred"] < log.stat().st_size / 5


def test_unreadable_nginx_config_says_what_to_set(sshd_factory, inferfit_cli, tmp_path):
    fake = _fakebin(tmp_path, "nginx", 'echo \'nginx: [emerg] open() "/etc/nginx/nginx.conf" '
                    "failed (13: Permission denied)' >&2\nexit 1\n")
    box = sshd_factory(path_prepend=[fake])
    got = _run(inferfit_cli, box, tmp_path, _cfg(tmp_path), "unreadable")
    assert got["status"] == "error"
    assert got["error_kind"] == "config_unreadable"
    assert "Permission denied" in got["summary"]
    assert "log_path" in got["fix"]
    assert "log_format" in got["fix"]


class _NoNginxHost(LocalHost):
    """The local machine, except that the discovery script finds no nginx."""

    async def run(self, argv: Sequence[str], *, timeout: float,
                  stdin: bytes | None = None) -> Completed:
        if len(argv) > 2 and argv[2] == FIND_SCRIPT:
            return Completed(tuple(argv), 0, "@@bin\n@@masters\n@@end\n", "", 0.0)
        return await super().run(argv, timeout=timeout, stdin=stdin)


async def test_no_nginx_and_no_log_path_is_skipped():
    ctx = ProbeContext(options={"log_path": "", "log_format": "", "window": "15m"},
                       config=Config())
    result = await NginxProbe().check(_NoNginxHost(), ctx)
    assert result.status == "skipped"
    assert "not installed" in result.summary
    assert "log_path" in result.summary


async def test_missing_log_file_is_an_error_with_a_fix(tmp_path):
    ctx = ProbeContext(options={"log_path": str(tmp_path / "nope.log"),
                                "log_format": "combined"}, config=Config())
    result = await NginxProbe().check(LocalHost(), ctx)
    assert result.status == "error"
    assert result.error_kind == "not_found"
    assert result.fix


async def test_bad_window_is_a_config_error(tmp_path):
    ctx = ProbeContext(options={"log_path": str(AI_LOG), "log_format": AI_API_TEXT,
                                "window": "soon"}, config=Config())
    result = await NginxProbe().check(LocalHost(), ctx)
    assert result.error_kind == "bad_config"


async def test_watch_yields_samples_each_second_and_survives_rotation(tmp_path):
    log = tmp_path / "live.log"
    log.write_bytes(b"")
    lines = AI_LOG.read_bytes().splitlines()
    ctx = ProbeContext(options={"log_path": str(log), "log_format": AI_API_TEXT},
                       config=Config())
    samples = []

    async def writer() -> None:
        await asyncio.sleep(1.5)
        with log.open("ab") as fh:
            fh.write(b"\n".join(lines[:30]) + b"\n")
        await asyncio.sleep(2.0)
        log.rename(tmp_path / "live.log.1")  # logrotate's move-and-reopen
        await asyncio.sleep(0.5)
        log.write_bytes(b"\n".join(lines[30:50]) + b"\n")

    task = asyncio.create_task(writer())
    gen = NginxProbe().watch(LocalHost(), ctx)
    try:
        async for s in gen:
            samples.append(s)
            if sum(x.values["qps"] for x in samples) >= 50 or len(samples) >= 20:
                break
    finally:
        await gen.aclose()
        await task
    assert sum(x.values["qps"] for x in samples) == 50
    last = samples[-1].values
    assert last["window_s"] == 60
    assert last["requests_window"] == 50
    assert "p95_ms" in last
    assert "p99_ms" in last
    assert all(s.probe == "nginx" for s in samples)
    assert all(x.values["5xx"] >= 0 for x in samples)


async def test_watch_over_ssh_survives_non_utf8_bytes(sshd, tmp_path):
    log = tmp_path / "live-ssh.log"
    log.write_bytes(b"")
    lines = AI_LOG.read_bytes().splitlines()
    host = SSHHost("box", SSHOptions(config_file=str(sshd.ssh_config)))
    ctx = ProbeContext(options={"log_path": str(log), "log_format": AI_API_TEXT},
                       config=Config())
    odd = lines[1].replace(b"/v1/chat/completions", b"/v1/\xff\xfe")

    async def writer() -> None:
        await asyncio.sleep(2.0)
        with log.open("ab") as fh:
            fh.write(b"\n".join([*lines[:20], odd]) + b"\n")

    task = asyncio.create_task(writer())
    gen = NginxProbe().watch(host, ctx)
    seen = ticks = 0
    try:
        async for s in gen:
            seen += s.values["qps"]
            ticks += 1
            if seen >= 21 or s.values["bad_lines"] or ticks >= 30:  # bounded
                break
    finally:
        await gen.aclose()
        await task
        await host.close()
    assert seen == 21


def test_the_remote_script_stands_alone_and_parses_as_python37():
    import ast

    from inferfit.probes import nginx_remote

    src = nginx_remote.script()
    assert "from inferfit" not in src
    assert "import inferfit" not in src
    ast.parse(src, feature_version=(3, 7))


async def test_an_empty_log_is_skipped_not_a_warning(tmp_path):
    log = tmp_path / "access.log"
    log.write_bytes(b"")
    ctx = ProbeContext(options={"log_path": str(log), "log_format": "combined"},
                       config=Config())
    result = await NginxProbe().check(LocalHost(), ctx)
    assert result.status == "skipped"
    assert result.error_kind == "empty_log"


async def test_workers_setting_reaches_the_box_script(tmp_path, monkeypatch):
    """A 34 MB log: `workers = 2` reads it in two processes, `workers = 1` in one; same figures."""
    monkeypatch.setenv("INFERFIT_NGINX_NATIVE", "0")  # the script a box runs, on this machine
    log = tmp_path / "big.log"
    data = AI_LOG.read_bytes()
    with log.open("wb") as fh:
        for _ in range(48):
            fh.write(data)
    got = {}
    for workers in (1, 2):
        opts = {"log_path": str(log), "log_format": AI_API_TEXT, "window": "all",
                "workers": workers}
        result = await NginxProbe().check(LocalHost(), ProbeContext(options=opts, config=Config()))
        got[workers] = result.values
    assert (got[1]["workers"], got[2]["workers"]) == (1, 2)
    assert got[1]["lines"] == got[2]["lines"] == 3519 * 48
    for key in ("status_counts", "request_time_ms_p99", "upstream_retries", "qps_peak"):
        assert got[1][key] == got[2][key], key


async def test_a_bad_workers_setting_is_a_config_error():
    opts = {"log_path": str(AI_LOG), "log_format": AI_API_TEXT, "workers": "many"}
    result = await NginxProbe().check(LocalHost(), ProbeContext(options=opts, config=Config()))
    assert (result.status, result.error_kind) == ("error", "bad_config")
    assert "probes.nginx.workers" in (result.fix or "")
