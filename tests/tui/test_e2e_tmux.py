"""End to end: the real `inferfit` binary in tmux against a real sshd.

A fake nvidia-smi first on the remote PATH replays the A100 capture (and streams
readings for the live sparklines); the disk probe runs real fio on a small test
file. Textual draws on stderr, so nothing is redirected. The tmux server runs on
its own socket and is killed in teardown.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inferfit.findings import Findings

GPU_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"

FAKE_SMI = r"""#!/bin/sh
# Replays a recorded A100 `nvidia-smi -q -x`; streams readings for --query-gpu ... -lms.
d="$(dirname "$0")"
case "$*" in
  "-q -x") cat "$d/a100.xml" ;;
  "-L") cat "$d/a100.list" ;;
  --query-gpu=*-lms*)
    i=0
    while [ "$i" -lt 600 ]; do
      echo "0, $(( (i * 37) % 100 )), $(( 40000 + i * 100 )), 81920, $(( 90 + (i * 53) % 300 )).5"
      sleep 0.5
      i=$((i + 1))
    done ;;
  *) echo "fake nvidia-smi: no capture for: $*" >&2; exit 2 ;;
esac
"""
FAKE_DMESG = "#!/bin/sh\nexit 0\n"


class Tmux:
    """One tmux server on a private socket, one session in it."""

    def __init__(self, socket: str, session: str) -> None:
        self.base = ["tmux", "-L", socket]
        self.session = session

    def run(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=20)
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.run("send-keys", "-t", self.session, key)
            time.sleep(0.3)

    def wait_for(self, check: Callable[[str], bool], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; screen:\n{screen}")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = f"inferfit-e2e-{os.getpid()}"
    t = Tmux(f"inferfit-test-{os.getpid()}-{tmp_path.name}", session)
    yield t
    t.run("kill-session", "-t", session)
    t.run("kill-server")


def _fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    shutil.copy(GPU_FIXTURES / "influxdata__telegraf__a100-sxm4-v12.xml", bin_dir / "a100.xml")
    (bin_dir / "a100.list").write_text(
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)\n")
    for name, body in (("nvidia-smi", FAKE_SMI), ("dmesg", FAKE_DMESG)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_console_against_real_sshd_fills_panels_exports_and_quits(
    sshd_factory: Callable[..., Any], home: Path, tmp_path: Path, tmux: Tmux
) -> None:
    server = sshd_factory(path_prepend=[_fake_bin(tmp_path)])
    # The first command on a fresh sshd runs the login shell's rc files cold; on a loaded
    # machine that alone can take tens of seconds. Take that hit here, not in the probes.
    subprocess.run(["ssh", "-F", str(server.ssh_config), "box", "true"], timeout=120,
                   check=True, capture_output=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    config = tmp_path / "console.toml"
    config.write_text(
        '[check]\nprobes = ["system", "gpu", "disk"]\n\n'
        f'[probes.disk]\ndirectory = "{scratch}"\nsize = "32M"\nruntime_s = 1.0\n'
        'free_margin_gib = 0.0\nfree_margin_pct = 0.0\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent))
    assert exe is not None
    command = shlex.join([exe, "--config", str(config), *server.cli()])
    tmux.run("new-session", "-d", "-s", tmux.session, "-x", "120", "-y", "40", "-c", str(work),
             f"{command}; echo \"inferfit exited $?\"; sleep 60")

    # System panel first (panel 1), with values from the box.
    screen = tmux.wait_for(lambda s: "System" in s and "cores" in s and "GiB RAM" in s, 90,
                           "the system panel")
    assert "● connected" in screen
    assert "box" in screen

    # GPU panel (2): the replayed A100, then live readings from the streamed query.
    tmux.keys("2")
    gpu = ("NVIDIA A100-SXM4-80GB", "% mean", "535.54.03", "G4 x16")
    tmux.wait_for(lambda s: all(x in s for x in gpu), 60, "GPU values and a live reading")

    # Disk panel (3): real fio through SSH, bandwidth in MiB/s.
    tmux.keys("3")
    screen = tmux.wait_for(lambda s: "seq read" in s and "rand 4k" in s and "IOPS" in s, 120,
                           "disk results")
    assert "fail" not in screen.split("Disk")[1].splitlines()[0]

    # Export: the prompt's default name, written in the working directory.
    tmux.keys("e")
    tmux.wait_for(lambda s: "Export findings of" in s, 20, "the export prompt")
    tmux.keys("Enter")
    screen = tmux.wait_for(lambda s: "findings written to" in s, 20, "the export notice")
    written = list(work.glob("findings-*.toml"))
    assert len(written) == 1, written
    findings = Findings.load(written[0])
    assert set(findings.probes) >= {"system", "gpu", "disk"}
    assert findings.probes["system"].values["cpu_cores"] >= 1
    assert findings.probes["gpu"].values["devices"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert findings.probes["disk"].values["seq_read_mib_s"] > 0
    assert findings.target.transport == "ssh"

    # Quit: nothing runs any more, so q leaves at once and the process exits 0.
    tmux.keys("q")
    tmux.wait_for(lambda s: "inferfit exited 0" in s, 30, "a clean exit")


def test_show_replays_saved_findings_and_quits(home: Path, tmp_path: Path, tmux: Tmux) -> None:
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "tui"
    exe = shutil.which("inferfit", path=str(Path(sys.executable).parent))
    assert exe is not None
    command = shlex.join([exe, "show", str(fixtures / "a100-box.toml"),
                          str(fixtures / "t4-box.toml")])
    tmux.run("new-session", "-d", "-s", tmux.session, "-x", "80", "-y", "24", "-c",
             str(tmp_path), f"{command}; echo \"inferfit exited $?\"; sleep 60")
    tmux.wait_for(lambda s: "gpu-a100" in s and "recorded 2026-11-30 04:42Z" in s
                  and "Debian GNU/Linux 12" in s, 30, "the first target's panels")
    tmux.keys("[")
    tmux.wait_for(lambda s: "Overview" in s and "gpu-t4" in s and "error" in s, 20,
                  "the overview table")
    tmux.keys("q")
    tmux.wait_for(lambda s: "inferfit exited 0" in s, 30, "a clean exit")


def test_show_names_a_bad_file_and_exits_3(inferfit_cli: Callable[..., Any],
                                           tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = 1\ntool = "x"\n')
    done = inferfit_cli("show", str(bad))
    assert done.returncode == 3
    assert f"{bad}: missing [target] table" in done.stderr
    done = inferfit_cli("show", str(tmp_path / "missing.toml"))
    assert done.returncode == 3
    assert "cannot read" in done.stderr
