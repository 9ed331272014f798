"""SSHHost: commands on a remote box over one asyncssh connection.

Honours OpenSSH client config the way ``ssh`` does (``~/.ssh/config`` or
``-F FILE``: Host aliases, Hostname, User, Port, IdentityFile, ProxyJump,
UserKnownHostsFile), the ssh-agent, and known_hosts verification.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import math
import os
import shlex
import socket
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from inferfit.hosts.base import (
    AuthError,
    CommandTimeoutError,
    Completed,
    ConnectionLostError,
    ConnectTimeoutError,
    DNSError,
    HostError,
    HostKeyChangedError,
    HostKeyUnknownError,
    Transport,
    UnreachableError,
    lines_until,
)

# OpenSSH's default MaxSessions is 10; stay below it.
MAX_CHANNELS = 8

# Runs "$@" under `timeout` when the box has it, else as is.
TIMEOUT_WRAPPER = (
    'limit=$1; shift; '
    'if command -v timeout >/dev/null 2>&1; then exec timeout -k 2 "$limit" "$@"; fi; '
    'exec "$@"'
)

# Streams (tail -F, nvidia-smi -lms) may be quiet for long: when the channel
# closes, sshd closes the command's stdin, so a watcher blocked reading stdin
# ends the command. OpenSSH ignores signal requests on non-pty sessions.
STREAM_WRAPPER = (
    'exec 3<&0; "$@" </dev/null & pid=$!; '
    '(cat <&3 >/dev/null 2>&1; kill "$pid" 2>/dev/null) >/dev/null 2>&1 & watcher=$!; '
    'exec 3<&-; wait "$pid"; status=$?; kill "$watcher" 2>/dev/null; exit "$status"'
)


@dataclass(frozen=True)
class SSHTarget:
    """What the user typed: ``[user@]host[:port]`` or an ssh-config alias."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> SSHTarget:
        text = text.strip()
        if not text:
            raise ValueError("empty target")
        user: str | None = None
        if "@" in text:
            user, _, text = text.rpartition("@")
            if not user:
                raise ValueError("target has an empty user name before '@'")
        port: int | None = None
        if text.startswith("["):  # [::1]:2222 or [host]:port
            host, sep, rest = text[1:].partition("]")
            if not sep:
                raise ValueError(f"unclosed '[' in target {text!r}")
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"unexpected text after ']' in {text!r}")
                port = _parse_port(rest[1:], text)
        elif text.count(":") == 1:
            host, _, port_text = text.partition(":")
            port = _parse_port(port_text, text)
        else:
            host = text  # bare name, or a bare IPv6 address
        if not host or any(c.isspace() for c in host):
            raise ValueError(f"invalid host in target {text!r}")
        return cls(host=host, user=user, port=port)

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


def _parse_port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"invalid port {text!r} in target {whole!r} (expected 1-65535)")
    return int(text)


@dataclass(frozen=True)
class SSHOptions:
    config_file: str | None = None  # -F
    identity_file: str | None = None  # -i
    port: int | None = None  # -p (the target's :port wins)
    accept_new_host_key: bool = False
    connect_timeout_s: float = 10.0
    keepalive_s: float = 15.0


class SSHHost:
    transport: Transport = "ssh"

    def __init__(self, target: SSHTarget | str, options: SSHOptions | None = None) -> None:
        self.target = SSHTarget.parse(target) if isinstance(target, str) else target
        self.options = options or SSHOptions()
        self.name = self.target.host
        self.address = str(self.target)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self._channels = asyncio.Semaphore(MAX_CHANNELS)
        self.connect_s: float | None = None

    # -- connection ------------------------------------------------------
    def _config_paths(self) -> list[str]:
        if self.options.config_file:
            return [self.options.config_file]
        default = Path.home() / ".ssh" / "config"
        return [str(default)] if default.is_file() else []

    def _connect_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "config": self._config_paths() or None,
            "host": self.target.host,
            "connect_timeout": self.options.connect_timeout_s,
            "login_timeout": self.options.connect_timeout_s,
            "keepalive_interval": self.options.keepalive_s,
            "keepalive_count_max": 3,
        }
        if not kwargs["config"]:
            kwargs["config"] = ()
        port = self.target.port or self.options.port
        if port:
            kwargs["port"] = port
        if self.target.user:
            kwargs["username"] = self.target.user
        if self.options.identity_file:
            kwargs["client_keys"] = [self.options.identity_file]
        return kwargs

    def _client_options(self) -> asyncssh.SSHClientConnectionOptions:
        try:
            return asyncssh.SSHClientConnectionOptions(**self._connect_kwargs())
        except (OSError, asyncssh.Error, ValueError) as exc:
            raise HostError(
                f"cannot read SSH settings for {self.address}: {exc}",
                fix="check the ssh config file (-F) and the key file (-i)",
            ) from exc

    def known_hosts_files(self) -> list[str]:
        """The user known_hosts files ssh would consult for this target."""
        opts = self._client_options()
        files = opts.known_hosts
        if isinstance(files, list | tuple) and files and all(isinstance(f, str) for f in files):
            return [os.path.expanduser(str(f)) for f in files]
        return [str(Path.home() / ".ssh" / "known_hosts")]

    async def connect(self) -> asyncssh.SSHClientConnection:
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            opts = self._client_options()
            host, port = str(opts.host), int(opts.port)
            if self.options.accept_new_host_key:
                await self._accept_new_host_key(host, port)
            started = time.monotonic()
            try:
                async with asyncio.timeout(self.options.connect_timeout_s + 5):
                    # Pass the config paths (not prebuilt options) so ProxyJump
                    # hops read the same -F file, as ssh does.
                    self._conn = await asyncssh.connect(**self._connect_kwargs())
            except asyncssh.HostKeyNotVerifiable as exc:
                raise self._host_key_error(host, port, exc) from None
            except asyncssh.PermissionDenied as exc:
                raise AuthError(
                    f"{opts.username}@{host}:{port} refused every key we offered ({exc.reason})",
                    fix="load the key into ssh-agent, pass -i KEY, or set IdentityFile "
                    "in ~/.ssh/config; check authorized_keys on the box",
                ) from None
            except socket.gaierror as exc:
                raise DNSError(
                    f"cannot resolve host name {host!r}: {exc.strerror}",
                    fix="check the spelling, the Hostname in ~/.ssh/config, or DNS",
                ) from None
            except ConnectionRefusedError:
                raise UnreachableError(
                    f"connection refused by {host}:{port}",
                    fix="is sshd running there and listening on that port? (-p / Port)",
                ) from None
            except TimeoutError:
                raise ConnectTimeoutError(
                    f"no SSH answer from {host}:{port} within "
                    f"{self.options.connect_timeout_s:g} s",
                    fix="check that the address is right and that no firewall drops the port",
                ) from None
            except asyncssh.DisconnectError as exc:
                raise UnreachableError(
                    f"{host}:{port} closed the SSH session during login: {exc.reason}",
                    fix="check sshd's log on the box",
                ) from None
            except OSError as exc:
                raise UnreachableError(
                    f"cannot reach {host}:{port}: {exc.strerror or exc}",
                    fix="check the network path (routing, VPN, firewall)",
                ) from None
            self.connect_s = time.monotonic() - started
            return self._conn

    def _host_key_error(self, host: str, port: int, exc: Exception) -> HostError:
        files = self.known_hosts_files()
        shown = f"[{host}]:{port}" if port != 22 else host
        if _known_hosts_has(files, host, port):
            return HostKeyChangedError(
                f"the host key of {shown} does not match the one in {files[0]}: "
                "it changed, or someone is intercepting the connection",
                fix=f"if the box was reinstalled, remove the old entry with "
                f"`ssh-keygen -R {shlex.quote(shown)} -f {shlex.quote(files[0])}` "
                "and connect again",
            )
        return HostKeyUnknownError(
            f"the host key of {shown} is not in {files[0]} ({exc})",
            fix="verify its fingerprint, then rerun with --accept-new-host-key to record it "
            f"(like StrictHostKeyChecking=accept-new), or `ssh {shlex.quote(self.address)}` once",
        )

    async def _accept_new_host_key(self, host: str, port: int) -> None:
        files = self.known_hosts_files()
        if _known_hosts_has(files, host, port):
            return  # known: normal verification decides; a changed key stays refused
        try:
            async with asyncio.timeout(self.options.connect_timeout_s + 5):
                key = await asyncssh.get_server_host_key(host, port)
        except (OSError, asyncssh.Error, TimeoutError):
            return  # the real connect reports the reason
        if key is None:
            return
        pattern = host if port == 22 else f"[{host}]:{port}"
        public = key.export_public_key("openssh").decode().strip()
        _append_line(Path(files[0]), f"{pattern} {public}")

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
            self._conn = None

    # -- commands ----------------------------------------------------------
    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
    ) -> Completed:
        conn = await self.connect()
        command = shlex.join(argv)
        # The box ends the command itself shortly after our deadline, so a
        # timed-out command never lingers there (OpenSSH ignores signal requests
        # on non-pty sessions; GNU timeout signals the whole process group).
        # Checked inline, so it costs no extra round trip per host.
        command = shlex.join(
            ["sh", "-c", TIMEOUT_WRAPPER, "inferfit", f"{math.ceil(timeout) + 1}", *argv]
        )
        started = time.monotonic()
        async with self._channels:
            try:
                async with asyncio.timeout(timeout):
                    proc = await _open_process(conn, command)
                    try:
                        out, err = await proc.communicate(stdin)
                        # sshd counts a session until its close is acknowledged:
                        # hold our slot until then so we never exceed MaxSessions.
                        proc.close()
                        await proc.wait_closed()
                    finally:
                        if proc.exit_status is None and proc.exit_signal is None:
                            _end_process(proc)
            except TimeoutError:
                raise CommandTimeoutError(
                    f"`{argv[0]}` did not finish within {timeout:g} s on {self.name}",
                    fix="raise the probe's timeout in the config, or check why the box is slow",
                ) from None
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError,
                    ConnectionResetError) as exc:
                self._conn = None
                raise self._lost(argv, exc) from None
            except asyncssh.ChannelOpenError as exc:
                if conn.is_closed():
                    self._conn = None
                    raise self._lost(argv, exc) from None
                raise HostError(
                    f"cannot open an SSH channel on {self.name}: {exc.reason}"
                ) from None
        if proc.exit_status is None:
            # The channel closed without an exit status: the connection died.
            self._conn = None
            raise self._lost(argv, None)
        return Completed(
            tuple(argv),
            int(proc.exit_status) if proc.exit_status >= 0 else 128 + 9,
            _decode(out),
            _decode(err),
            time.monotonic() - started,
        )

    def _lost(self, argv: Sequence[str], exc: BaseException | None) -> ConnectionLostError:
        why = f": {exc}" if exc else ""
        return ConnectionLostError(
            f"the SSH connection to {self.name} was lost while `{argv[0]}` ran{why}",
            fix="check the network and the box (did sshd restart or the box reboot?)",
        )

    async def stream(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> AsyncIterator[str]:
        conn = await self.connect()
        if stdin is None:
            command = shlex.join(["sh", "-c", STREAM_WRAPPER, "inferfit", *argv])
        else:
            command = shlex.join(argv)
        deadline = None if timeout is None else time.monotonic() + timeout
        async with self._channels:
            try:
                proc = await _open_process(
                    conn, command, stderr=asyncssh.DEVNULL, encoding="utf-8", errors="replace"
                )
            except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost) as exc:
                if conn.is_closed():
                    self._conn = None
                    raise self._lost(argv, exc) from None
                raise HostError(f"cannot open an SSH channel on {self.name}: {exc}") from None
            try:
                if stdin is not None:
                    proc.stdin.write(stdin.decode("utf-8", "replace"))
                    proc.stdin.write_eof()
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                async for line in lines_until(proc.stdout.readline, left):
                    yield line
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError) as exc:
                self._conn = None
                raise self._lost(argv, exc) from None
            finally:
                _end_process(proc)


async def _open_process(
    conn: asyncssh.SSHClientConnection, command: str, **kwargs: Any
) -> asyncssh.SSHClientProcess[Any]:
    """Open a session channel, retrying briefly while sshd still counts closed ones.

    sshd frees a session slot only after it has reaped the command, so a burst
    of short commands can meet "no more sessions" (open failed) for a moment.
    """
    for attempt in range(40):
        try:
            return await conn.create_process(command, **({"encoding": None} | kwargs))
        except asyncssh.ChannelOpenError:
            if attempt == 39 or conn.is_closed():
                raise
            await asyncio.sleep(min(0.02 * (attempt + 1), 0.25))
    raise AssertionError("unreachable")


def _end_process(proc: asyncssh.SSHClientProcess[Any]) -> None:
    # Ask sshd to signal the remote command, then close the channel (EOF/SIGPIPE).
    with contextlib.suppress(Exception):
        proc.send_signal("TERM")
    with contextlib.suppress(Exception):
        proc.close()


def _decode(data: Any) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return str(data or "")


def _known_hosts_has(files: Sequence[str], host: str, port: int) -> bool:
    """True when any known_hosts file already lists a key for host:port."""
    for file in files:
        try:
            known = asyncssh.read_known_hosts(file)
        except (OSError, ValueError, asyncssh.Error):
            continue
        try:
            addr = socket.gethostbyname(host)
        except OSError:
            addr = host
        trusted = asyncssh.match_known_hosts(known, host, addr, port if port != 22 else None)
        if trusted[0]:
            return True
    return False


def _append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def local_user() -> str:
    return getpass.getuser()
