"""Fixtures for mixed mode: real batch workers, real cgroups, a lease dir, hosts over sshd.

Every worker is started here and killed here by PID. The teardown fails the test
if any worker is still stopped (state T) or a test cgroup is still frozen: the
one thing mixed mode must never do is leave batch work frozen.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from inferfit.hosts import SSHHost, SSHOptions, SSHTarget

WORKER = """\
import sys, time
hb = sys.argv[1]
n = 0
while True:
    n += 1
    with open(hb, "w") as fh:
        fh.write(str(n))
    time.sleep(0.05)
"""

BUSY = "import sys\nwhile True:\n    pass\n"


def proc_state(pid: int) -> str:
    """Field 3 of /proc/PID/stat ('' when the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def wait_for(pred: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    heartbeat: Path
    argv: list[str]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def cmdline(self) -> str:
        return " ".join(self.argv)

    def state(self) -> str:
        return proc_state(self.pid)

    def beats(self) -> int:
        try:
            return int(self.heartbeat.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def progressing(self, window: float = 0.6) -> bool:
        """True when the heartbeat advances within ``window`` seconds (it is running)."""
        before = self.beats()
        return wait_for(lambda: self.beats() > before, window, 0.05)


@dataclass
class Workers:
    dir: Path
    started: list[Worker] = field(default_factory=list)
    cgroups: list[Path] = field(default_factory=list)

    def start(self, marker: str, n: int = 1, *, busy: bool = False,
              cgroup: Path | None = None) -> list[Worker]:
        script = self.dir / ("busy.py" if busy else "worker.py")
        if not script.exists():
            script.write_text(BUSY if busy else WORKER)
        out = []
        for _ in range(n):
            hb = self.dir / f"hb-{uuid.uuid4().hex[:8]}"
            argv = [sys.executable, str(script), str(hb), marker]
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
            if cgroup is not None:
                (cgroup / "cgroup.procs").write_text(str(proc.pid))
            worker = Worker(proc, hb, argv)
            self.started.append(worker)
            out.append(worker)
        if not busy:
            for w in out:
                assert wait_for(lambda w=w: w.beats() > 0, 10), "worker did not start"
        return out

    def pattern(self, marker: str, *, busy: bool = False) -> str:
        """The exact `pgrep -f -x` regex of the workers started with ``marker``."""
        script = self.dir / ("busy.py" if busy else "worker.py")
        return " ".join([ere_escape(sys.executable), ere_escape(str(script)),
                         ere_escape(str(self.dir)) + "/hb-[0-9a-f]+", ere_escape(marker)])

    def pidfile(self, name: str, ws: list[Worker]) -> Path:
        path = self.dir / name
        path.write_text("\n".join(str(w.pid) for w in ws) + "\n")
        return path


def ere_escape(text: str) -> str:
    """Escape POSIX extended-regex metacharacters."""
    return "".join("\\" + c if c in ".[]()*+?{}|^$\\" else c for c in text)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    d = tmp_path / "workers"
    d.mkdir()
    ws = Workers(d)
    yield ws
    stopped = [w.pid for w in ws.started if w.state() == "T"]
    for w in ws.started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(w.pid, signal.SIGCONT)
            os.kill(w.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            w.proc.wait(5)
    assert not stopped, f"test left workers stopped: {stopped}"


def _make_cgroup(base: Path) -> Iterator[Path]:
    path = base / f"inferfit-test-{uuid.uuid4().hex[:10]}"
    path.mkdir()
    yield path
    frozen = False
    if (path / "cgroup.freeze").exists():
        frozen = (path / "cgroup.freeze").read_text().strip() == "1"
        (path / "cgroup.freeze").write_text("0")
    elif (path / "freezer.state").exists():
        frozen = (path / "freezer.state").read_text().strip() != "THAWED"
        (path / "freezer.state").write_text("THAWED")
    for pid in (path / "cgroup.procs").read_text().split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    wait_for(lambda: not (path / "cgroup.procs").read_text().strip(), 5)
    path.rmdir()
    assert not frozen, f"test left cgroup {path} frozen"


@pytest.fixture
def cgroup_v2() -> Iterator[Path]:
    """A fresh cgroup v2 directory (the unified hierarchy on this machine)."""
    base = Path("/sys/fs/cgroup/unified")
    if not (base / "cgroup.procs").exists():
        base = Path("/sys/fs/cgroup")
    assert (base / "cgroup.procs").exists(), "no cgroup v2 hierarchy mounted"
    yield from _make_cgroup(base)


@pytest.fixture
def cgroup_v1() -> Iterator[Path]:
    """A fresh cgroup in the v1 freezer hierarchy."""
    base = Path("/sys/fs/cgroup/freezer")
    assert (base / "freezer.state").exists() or (base / "cgroup.procs").exists(), \
        "no v1 freezer hierarchy mounted"
    yield from _make_cgroup(base)


@pytest.fixture
def lease_dir(tmp_path: Path) -> Iterator[Path]:
    """Where the box (this machine, through sshd) keeps lease files for the test.

    Teardown ends any watchdog still running for it (by the pid it recorded).
    """
    d = tmp_path / "leases"
    yield d
    if not d.exists():
        return
    for wd in d.glob("*.wd"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(wd.read_text().strip())
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"inferfit-batch-lease" in cmd and str(d).encode() in cmd:
                os.kill(pid, signal.SIGKILL)


class Mixed:
    """Helpers the tests reach through the ``mx`` fixture."""

    proc_state = staticmethod(proc_state)
    wait_for = staticmethod(wait_for)
    ere_escape = staticmethod(ere_escape)

    @staticmethod
    def host(server: object) -> SSHHost:
        config = server.ssh_config  # type: ignore[attr-defined]
        return SSHHost(SSHTarget.parse("box"), SSHOptions(config_file=str(config)))

    @staticmethod
    def config(path: Path, **batch: object) -> Path:
        """A config file with a [batch] table (strings quoted, numbers as they are)."""
        lines = ["[batch]"]
        for key, value in batch.items():
            if isinstance(value, str):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'{key} = "{escaped}"')
            else:
                lines.append(f"{key} = {value}")
        path.write_text("\n".join(lines) + "\n")
        return path


@pytest.fixture
def mx() -> type[Mixed]:
    return Mixed


@pytest.fixture
def private_sshd(sshd_factory: Callable[..., object], tmp_path: Path) -> Callable[..., object]:
    """A private sshd whose sessions get an empty HOME.

    Tests that SIGKILL an sshd and its sessions must not catch a login shell halfway
    through its rc files (on this machine ~/.bashrc runs `pyenv init`, whose lock file a
    killed shell would leave behind for every later SSH session).
    """

    def start(**kwargs: object) -> object:
        home = tmp_path / f"session-home-{uuid.uuid4().hex[:6]}"
        home.mkdir()
        setenv = {"HOME": str(home), **dict(kwargs.pop("setenv", {}) or {})}  # type: ignore[call-overload]
        return sshd_factory(setenv=setenv, **kwargs)

    return start


@pytest.fixture
def box(private_sshd: Callable[..., object]) -> object:
    """The box the tests drive: a real OpenSSH sshd on 127.0.0.1 (see private_sshd)."""
    return private_sshd()
