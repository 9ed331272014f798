"""Fixtures for the GPU probe: recorded nvidia-smi output and a fake nvidia-smi that replays it.

The fake is a POSIX sh script placed first on the remote PATH of a private sshd. It maps
its arguments to a mode (``qx`` for ``-q -x``, ``list`` for ``-L``, ``topo`` for
``topo -m``, ``query`` for ``--query-gpu=...``, ``stream`` for the live ``-lms`` query,
``table`` for no arguments) and prints ``<mode>.stdout`` / ``<mode>.stderr`` from its data
directory, exiting with ``<mode>.rc`` (0 if absent). ``all.*`` files answer every mode (a
broken driver fails every call the same way). A mode without a capture exits 2 with
"no capture" on stderr, as nvidia-smi does for an argument it does not support.
A fake ``dmesg`` next to it replays ``dmesg.stdout`` / ``dmesg.rc``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"

FAKE_SMI = r"""#!/bin/sh
d="$(dirname "$0")/smi-data"
case "$*" in
  "-q -x") mode=qx ;;
  "-L") mode=list ;;
  "topo -m") mode=topo ;;
  --query-gpu=index,utilization.gpu,*-lms*) mode=stream ;;
  --query-gpu=*) mode=query ;;
  "") mode=table ;;
  *) mode=other ;;
esac
echo "$*" >> "$d/calls.log"
if [ -f "$d/all.rc" ]; then mode=all; fi
if [ "$mode" = stream ] && [ -f "$d/stream.stdout" ]; then
  echo $$ > "$d/stream.pid"
  i=0
  while [ "$i" -lt 300 ]; do
    cat "$d/stream.stdout" || exit 1
    sleep 0.2
    i=$((i + 1))
  done
  exit 0
fi
if [ ! -f "$d/$mode.stdout" ] && [ ! -f "$d/$mode.stderr" ] && [ ! -f "$d/$mode.rc" ]; then
  echo "fake nvidia-smi: no capture for: $*" >&2
  exit 2
fi
[ -f "$d/$mode.stdout" ] && cat "$d/$mode.stdout"
[ -f "$d/$mode.stderr" ] && cat "$d/$mode.stderr" >&2
if [ -f "$d/$mode.rc" ]; then exit "$(cat "$d/$mode.rc")"; fi
exit 0
"""

FAKE_DMESG = r"""#!/bin/sh
d="$(dirname "$0")/smi-data"
[ -f "$d/dmesg.stdout" ] && cat "$d/dmesg.stdout"
if [ -f "$d/dmesg.rc" ]; then exit "$(cat "$d/dmesg.rc")"; fi
exit 0
"""


@dataclass
class FakeBox:
    bin_dir: Path
    data: Path

    def set(self, mode: str, stdout: str | None = None, stderr: str | None = None,
            rc: int | None = None) -> None:
        if stdout is not None:
            (self.data / f"{mode}.stdout").write_text(stdout, encoding="utf-8")
        if stderr is not None:
            (self.data / f"{mode}.stderr").write_text(stderr, encoding="utf-8")
        if rc is not None:
            (self.data / f"{mode}.rc").write_text(f"{rc}\n")

    def calls(self) -> list[str]:
        log = self.data / "calls.log"
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def fake_box(tmp_path: Path) -> Callable[..., FakeBox]:
    """Build a directory with a fake nvidia-smi (and dmesg) for ``sshd_factory(path_prepend=)``."""
    made: list[FakeBox] = []

    def make(*, with_smi: bool = True) -> FakeBox:
        bin_dir = tmp_path / f"fakebin{len(made)}"
        data = bin_dir / "smi-data"
        data.mkdir(parents=True)
        scripts = {"dmesg": FAKE_DMESG}
        if with_smi:
            scripts["nvidia-smi"] = FAKE_SMI
        for name, body in scripts.items():
            path = bin_dir / name
            path.write_text(body)
            os.chmod(path, 0o755)
        box = FakeBox(bin_dir, data)
        made.append(box)
        return box

    return make
