"""Shared fixtures: a real OpenSSH sshd on 127.0.0.1, and running the real CLI.

The sshd gets its own config, host key and client key in a temp dir; nothing
outside that dir is touched. Tests reach it through an ssh config alias
(``box``) that sets Port, IdentityFile and UserKnownHostsFile, like a user would.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sshd_support import DEFAULT_PATH, descendants, stop, write_client_files, write_server_files

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    """A running sshd and the client-side files that reach it."""

    dir: Path
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    ssh_config: Path
    host_key_line: str
    proc: subprocess.Popen[bytes] | None = None
    alias: str = "box"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def cli(self) -> list[str]:
        """Arguments that make `inferfit <cmd>` reach this sshd through the alias."""
        return ["-F", str(self.ssh_config), self.alias]

    def stop(self) -> None:
        stop(self.proc)

    def kill(self) -> None:
        """SIGKILL the listener and every session child it forked (by our PIDs only)."""
        if self.proc is None:
            return
        for pid in descendants(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(5)


def start_sshd(
    base: Path,
    *,
    path_prepend: Sequence[str | os.PathLike[str]] = (),
    setenv: dict[str, str] | None = None,
) -> Sshd:
    port = free_port()
    env = {"PATH": ":".join([*(str(p) for p in path_prepend), DEFAULT_PATH]), **(setenv or {})}
    host_pub, config = write_server_files(
        base, address="127.0.0.1", port=port, setenv=env,
        extra=["MaxSessions 10", "MaxStartups 100:30:200"],
    )
    known_hosts, ssh_config = write_client_files(
        base, address="127.0.0.1", port=port, host_pub=host_pub
    )
    host_key_line = known_hosts.read_text().strip()
    log = (base / "sshd.log").open("wb")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(base / 'sshd.log').read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("sshd did not start listening within 10 s")
    return Sshd(base, port, getpass.getuser(), base / "id_ed25519", known_hosts, ssh_config,
                host_key_line, proc)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One sshd for the session (default PATH). Do not kill it; use sshd_factory."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def sshd_factory(tmp_path: Path) -> Iterator[Callable[..., Sshd]]:
    """Start private sshd instances (e.g. with fake binaries first on PATH)."""
    started: list[Sshd] = []

    def start(**kwargs: object) -> Sshd:
        server = start_sshd(tmp_path / f"sshd{len(started)}", **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME and user config dir, so the developer's ~/.ssh never leaks in."""
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("INFERFIT_CONFIG_DIR", str(h / ".config" / "inferfit"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    # CI machines are busy running this very suite: the system probe's load
    # warning is about the box's state, not what these tests check.
    user_config = h / ".config" / "inferfit" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("[probes.system]\nload_per_core_warn = 1000.0\n")
    return h


@dataclass
class CLIResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def inferfit_cli(home: Path, tmp_path: Path) -> Callable[..., CLIResult]:
    """Run the installed `inferfit` console script as a user would (a real process)."""
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent)) or "inferfit"

    def run(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> CLIResult:
        full_env = {**os.environ, **(env or {})}
        done = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=timeout, env=full_env,
            cwd=cwd or tmp_path,
        )
        return CLIResult(done.returncode, done.stdout, done.stderr)

    return run
