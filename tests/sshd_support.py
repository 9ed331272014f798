"""Pieces for running a real OpenSSH sshd in tests and benchmarks.

Shared by tests/conftest.py (sshd on 127.0.0.1), tests/latency/conftest.py
(sshd inside a network namespace) and benchmarks/fanout.py. pytest finds this
module through ``pythonpath = ["tests"]``; benchmarks put tests/ on sys.path.
"""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def keygen(path: Path, comment: str = "inferfit-test") -> str:
    """A fresh passphrase-less ed25519 key at ``path``; returns the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def write_server_files(
    base: Path,
    *,
    address: str,
    port: int,
    setenv: Mapping[str, str],
    extra: Sequence[str] = (),
) -> tuple[str, Path]:
    """Host key, client key, authorized_keys and sshd_config under ``base``.

    Returns the host's public key line and the sshd_config path. The remote
    HOME is an empty directory: bash sources ~/.bashrc for sshd commands, and a
    heavy one (pyenv init) costs seconds per command on a loaded machine.
    """
    base.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    (base / "home").mkdir(exist_ok=True)
    host_pub = keygen(base / "ssh_host_ed25519_key", "inferfit-test-host")
    client_pub = keygen(base / "id_ed25519", "inferfit-test-client")
    (base / "authorized_keys").write_text(client_pub + "\n")
    env = {"PATH": DEFAULT_PATH, "HOME": str(base / "home"), **setenv}
    lines = [
        f"Port {port}",
        f"ListenAddress {address}",
        f"HostKey {base / 'ssh_host_ed25519_key'}",
        f"PidFile {base / 'sshd.pid'}",
        f"AuthorizedKeysFile {base / 'authorized_keys'}",
        "UsePAM no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes",
        "PermitRootLogin prohibit-password",
        "StrictModes no",
        "LogLevel ERROR",
        "SetEnv " + " ".join(f'{k}="{v}"' for k, v in env.items()),
        *extra,
    ]
    config = base / "sshd_config"
    config.write_text("\n".join(lines) + "\n")
    return host_pub, config


def write_client_files(
    base: Path, *, address: str, port: int, host_pub: str, alias: str = "box"
) -> tuple[Path, Path]:
    """known_hosts and an ssh config whose ``alias`` reaches the server; returns both paths."""
    known = base / "known_hosts"
    known.write_text(f"[{address}]:{port} {' '.join(host_pub.split()[:2])}\n")
    ssh_config = base / "ssh_config"
    ssh_config.write_text(
        f"Host {alias}\n"
        f"    HostName {address}\n"
        f"    Port {port}\n"
        f"    User {getpass.getuser()}\n"
        f"    IdentityFile {base / 'id_ed25519'}\n"
        "    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known}\n"
        "    StrictHostKeyChecking yes\n"
    )
    return known, ssh_config


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """Terminate a process we started, killing it if it does not go within 5 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def descendants(pid: int) -> list[int]:
    """Descendants of ``pid`` from /proc (e.g. the sshd session processes we started)."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
