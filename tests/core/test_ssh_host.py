"""SSHHost against a real OpenSSH sshd on loopback: success paths and every failure class."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from inferfit.api import ProbeContext
from inferfit.config import Config
from inferfit.findings import ProbeResult
from inferfit.hosts import (
    AuthError,
    CommandTimeoutError,
    DNSError,
    HostKeyChangedError,
    HostKeyUnknownError,
    SSHHost,
    SSHOptions,
    SSHTarget,
    UnreachableError,
    sh,
)
from inferfit.runner import run_check


def host_for(server, **kw) -> SSHHost:
    return SSHHost("box", SSHOptions(config_file=str(server.ssh_config), **kw))


def write_alias(server, path: Path, **overrides: str) -> Path:
    fields = {
        "HostName": "127.0.0.1", "Port": str(server.port), "User": server.user,
        "IdentityFile": str(server.client_key), "IdentitiesOnly": "yes",
        "UserKnownHostsFile": str(server.known_hosts),
    }
    fields.update(overrides)
    body = "Host box\n" + "".join(f"    {k} {v}\n" for k, v in fields.items() if v)
    path.write_text(body)
    return path


@pytest.mark.parametrize(
    ("text", "host", "user", "port"),
    [
        ("box", "box", None, None),
        ("root@10.0.0.5", "10.0.0.5", "root", None),
        ("ops@gpu-7:2222", "gpu-7", "ops", 2222),
        ("[::1]:2200", "::1", None, 2200),
        ("fe80::1", "fe80::1", None, None),
    ],
)
def test_target_parsing(text: str, host: str, user: str | None, port: int | None) -> None:
    t = SSHTarget.parse(text)
    assert (t.host, t.user, t.port) == (host, user, port)


@pytest.mark.parametrize("bad", ["", "@host", "host:99999", "host:abc", "[::1", "a b"])
def test_target_parsing_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match=r"target|port|host"):
        SSHTarget.parse(bad)


async def test_run_stream_and_quoting(sshd) -> None:
    host = host_for(sshd)
    try:
        done = await host.run(["printf", "%s|", "a b", "$(id)", "; touch /tmp/nope"], timeout=10)
        assert done.ok
        assert done.stdout == "a b|$(id)|; touch /tmp/nope|"
        lines = [line async for line in host.stream(["seq", "1", "5"], timeout=10)]
        assert lines == ["1", "2", "3", "4", "5"]
        piped = await host.run(["cat"], timeout=10, stdin=b"hello\n")
        assert piped.stdout == "hello\n"
        missing = await host.run(["inferfit-no-such-binary"], timeout=10)
        assert missing.not_found
        assert missing.returncode == 127
        script = await host.run(sh('printf "%s" "$1"', "x;y $z"), timeout=10)
        assert script.stdout == "x;y $z"
        # many commands at once share one connection, under the channel limit
        many = await asyncio.gather(*(host.run(["echo", str(i)], timeout=20) for i in range(30)))
        assert [m.stdout.strip() for m in many] == [str(i) for i in range(30)]
    finally:
        await host.close()


async def test_command_timeout_ends_remote_process(sshd, tmp_path: Path) -> None:
    host = host_for(sshd)
    # a unique duration makes the remote process findable in ps
    marker = f"sleep 30.{os.getpid()}{time.monotonic_ns() % 100000}"
    try:
        with pytest.raises(CommandTimeoutError, match=r"did not finish within 0.5 s"):
            await host.run(marker.split(), timeout=0.5)
        still = await host.run(["sh", "-c", 'echo ok'], timeout=10)
        assert still.stdout.strip() == "ok", "connection unusable after a timeout"
    finally:
        await host.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if marker not in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                        text=True).stdout:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("remote command outlived its timeout")


async def test_unknown_host_key_refused_then_accept_new(sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    cfg = write_alias(sshd, tmp_path / "cfg", UserKnownHostsFile=str(known))
    host = SSHHost("box", SSHOptions(config_file=str(cfg)))
    with pytest.raises(HostKeyUnknownError) as err:
        await host.connect()
    assert "--accept-new-host-key" in str(err.value)
    assert known.read_text() == ""
    host = SSHHost("box", SSHOptions(config_file=str(cfg), accept_new_host_key=True))
    try:
        done = await host.run(["true"], timeout=10)
        assert done.ok
    finally:
        await host.close()
    recorded = known.read_text().split()
    assert recorded[0] == f"[127.0.0.1]:{sshd.port}"
    assert recorded[1:3] == sshd.host_key_line.split()[1:3]


async def test_changed_host_key_refused_even_with_accept_new(sshd, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    other_key = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    known.write_text(f"[127.0.0.1]:{sshd.port} {other_key}\n")
    cfg = write_alias(sshd, tmp_path / "cfg", UserKnownHostsFile=str(known))
    for accept in (False, True):
        host = SSHHost("box", SSHOptions(config_file=str(cfg), accept_new_host_key=accept))
        with pytest.raises(HostKeyChangedError) as err:
            await host.connect()
        assert "ssh-keygen -R" in str(err.value)
    assert len(known.read_text().splitlines()) == 1


async def test_wrong_client_key_is_auth_denied(sshd, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    cfg = write_alias(sshd, tmp_path / "cfg", IdentityFile=str(wrong))
    with pytest.raises(AuthError, match="refused every key"):
        await SSHHost("box", SSHOptions(config_file=str(cfg))).connect()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_closed_port_is_unreachable(sshd, tmp_path: Path) -> None:
    cfg = write_alias(sshd, tmp_path / "cfg", Port=str(_closed_port()))
    with pytest.raises(UnreachableError, match="connection refused"):
        await SSHHost("box", SSHOptions(config_file=str(cfg))).connect()


async def test_dns_failure(sshd, tmp_path: Path) -> None:
    cfg = write_alias(sshd, tmp_path / "cfg", HostName="nonexistent.invalid")
    with pytest.raises(DNSError, match=r"cannot resolve host name 'nonexistent\.invalid'"):
        await SSHHost("box", SSHOptions(config_file=str(cfg))).connect()


async def test_ssh_agent_and_proxyjump(
    sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No IdentityFile: the key comes from a real ssh-agent; a second alias jumps via the first."""
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while not sock.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(sshd.client_key)], env=env, check=True,
                       capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        cfg = tmp_path / "cfg"
        cfg.write_text(
            f"Host box\n    HostName 127.0.0.1\n    Port {sshd.port}\n    User {sshd.user}\n"
            f"    UserKnownHostsFile {sshd.known_hosts}\n"
            f"Host inner\n    HostName 127.0.0.1\n    Port {sshd.port}\n    User {sshd.user}\n"
            f"    UserKnownHostsFile {sshd.known_hosts}\n    ProxyJump box\n"
        )
        for alias in ("box", "inner"):
            host = SSHHost(alias, SSHOptions(config_file=str(cfg)))
            try:
                done = await host.run(["echo", alias], timeout=10)
            finally:
                await host.close()
            assert done.stdout.strip() == alias
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(5)


class SlowProbe:
    name = "slow"
    title = "Slow"

    async def check(self, host, ctx: ProbeContext) -> ProbeResult:
        await host.run(["sleep", "20"], timeout=30)
        return ProbeResult(self.name, "ok", "slept")


class QuickProbe:
    name = "quick"
    title = "Quick"

    async def check(self, host, ctx: ProbeContext) -> ProbeResult:
        done = await host.run(["echo", "fine"], timeout=10)
        return ProbeResult(self.name, "ok", done.stdout.strip())


async def test_sshd_killed_mid_probe(sshd_factory) -> None:
    server = sshd_factory()
    host = host_for(server)
    config = Config.load(include_user=False, include_project=False)
    check = asyncio.create_task(run_check(host, [QuickProbe(), SlowProbe()], config,
                                          lambda _p: None))
    await asyncio.sleep(1.0)
    server.kill()
    findings = await asyncio.wait_for(check, 60)
    await host.close()
    assert findings.probes["quick"].status == "ok"
    assert findings.probes["quick"].summary == "fine"
    slow = findings.probes["slow"]
    assert slow.status == "error"
    assert slow.error_kind == "connection_lost"
    assert "lost" in slow.summary


async def test_stream_closed_early_ends_quiet_remote_command(sshd, tmp_path: Path) -> None:
    """A quiet streaming command must not linger on the box after the panel stops."""
    # a command that prints once then stays quiet (as nvidia-smi -lms can, or a stalled tail)
    quiet = f"61.{time.monotonic_ns() % 10**9}"
    host = host_for(sshd)
    try:
        stream = host.stream(["sh", "-c", 'echo first; exec sleep "$1"', "sh", quiet])
        assert await stream.__anext__() == "first"
        await stream.aclose()
        done = await host.run(["echo", "still usable"], timeout=10)
        assert done.stdout.strip() == "still usable"
        ended = await host.run(["seq", "3"], timeout=10)
        assert ended.stdout.split() == ["1", "2", "3"]
        # a stream whose command ends by itself ends the iteration
        lines = [line async for line in host.stream(["printf", "a\\nb\\n"], timeout=10)]
        assert lines == ["a", "b"]
        # non-UTF-8 bytes (a log line from a scanner) are replaced, never fatal
        raw = [line async for line in host.stream(["printf", "ok\\377x\\n"], timeout=10)]
        assert raw == ["ok\ufffdx"]
    finally:
        await host.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if f"sleep {quiet}" not in ps:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("the quiet command outlived the closed stream on the box")
