"""Helpers for the disk tests: configs, the CLI as a background process, a small tmpfs."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import tomli_w

FIO = shutil.which("fio") or "/usr/bin/fio"
TEST_FILE_GLOB = ".inferfit-fio-*.tmp"
# This machine's root ~/.bashrc runs `pyenv init -`, whose rehash waits up to 60 s
# for a lock when many SSH sessions start at once (other test suites run in
# parallel): every remote command then stalls. The box under test is the same
# real OpenSSH sshd; this only tells pyenv not to wait for that lock.
QUIET_SHELL_ENV = {"PYENV_REHASH_TIMEOUT": "0"}


def write_config(path: Path, **disk: Any) -> Path:
    """A --config file with a [probes.disk] table (short runs, small files by default)."""
    table = {"runtime_s": 1.0, "size": "16M", "free_margin_gib": 0.5, **disk}
    path.write_text(tomli_w.dumps({"probes": {"disk": table}}))
    return path


def leftover_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(TEST_FILE_GLOB))


def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    """Poll predicate until true or timeout (bounded); returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def fio_processes_on(directory: Path) -> list[int]:
    """PIDs of fio processes whose command line names a file in directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            continue
        if cmd and cmd[0].endswith(b"fio") and any(str(directory).encode() in a for a in cmd):
            found.append(int(entry.name))
    return found


@pytest.fixture
def cli_process(home: Path, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start the real `inferfit` console script in the background (to cancel or cut it)."""
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent)) or "inferfit"
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ), cwd=tmp_path,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:  # only the processes this fixture started, by PID
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=10)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs mounted for this test only (unmounted in teardown)."""
    mnt = tmp_path / "small-fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "inferfit-test", str(mnt)],
                   check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def odirect_refusing_fio(tmp_path: Path) -> Path:
    """A bin dir whose `fio` behaves like fio on a filesystem that refuses O_DIRECT.

    With --direct=1 it prints what fio 3.33 prints there (a zero-filled JSON,
    the O_DIRECT message on stderr, exit 1); otherwise it runs the real fio.
    """
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    zero = (Path(__file__).resolve().parent.parent / "fixtures" / "fio" / "fio-error.txt"
            ).read_text().split("# ---- stdout ----\n", 1)[1].split("# ---- stderr ----")[0]
    (bindir / "zero.json").write_text(zero)
    script = bindir / "fio"
    script.write_text(f"""#!/bin/sh
for a in "$@"; do
  if [ "$a" = "--direct=1" ]; then
    cat '{bindir / "zero.json"}'
    echo 'fio: looks like your file system does not support direct=1/buffered=0' >&2
    echo 'fio: pid=0, err=22/file:filesetup.c:805, func=open(), error=Invalid argument' >&2
    exit 1
  fi
done
exec {FIO} "$@"
""")
    script.chmod(0o755)
    return bindir


@pytest.fixture
def path_without_fio(tmp_path: Path) -> str:
    """A PATH holding the tools the probe's shell scripts use, but no fio."""
    bindir = tmp_path / "nofio"
    bindir.mkdir()
    for tool in ("sh", "bash", "cat", "grep", "readlink", "findmnt", "stat", "df", "find", "head",
                 "sed", "mktemp", "rm", "sleep", "setsid", "cut", "env"):
        real = shutil.which(tool)
        if real:
            (bindir / tool).symlink_to(real)
    return str(bindir)


class DiskHelpers:
    """Helper functions handed to tests as a fixture (tests cannot import conftest)."""

    write_config = staticmethod(write_config)
    leftover_files = staticmethod(leftover_files)
    wait_for = staticmethod(wait_for)
    fio_processes_on = staticmethod(fio_processes_on)
    fio = FIO
    quiet_env: ClassVar[dict[str, str]] = QUIET_SHELL_ENV


@pytest.fixture
def dh() -> type[DiskHelpers]:
    return DiskHelpers


@pytest.fixture
def box(sshd_factory: Callable[..., Any]) -> Any:
    """A private real sshd for one test (see QUIET_SHELL_ENV)."""
    return sshd_factory(setenv=QUIET_SHELL_ENV)
