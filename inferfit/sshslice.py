"""Per-host slices of an ssh client config, so a fleet does not re-read it N times.

asyncssh reads the whole config file once per connection, and a config with a
``Host`` block per box is exactly what fleets have: 100 boxes meant 100 reads
of an 800-line file (O(N²), about a second of CPU per 100 boxes). A slice keeps
the global lines, the ``Host`` blocks that match the host, and every ``Match``
block (asyncssh still evaluates those), in file order, so each option's first
value wins exactly as in the full file. ``Include`` in the global section is
inlined; where slicing could change the meaning (an ``Include`` inside a block,
``CanonicalizeHostname``, ``Match canonical``/``final``) we keep the full file.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import tempfile
from pathlib import Path

from inferfit.inventory import ssh_pattern_match

_KEY = re.compile(r"([A-Za-z]+)\s*=?\s*(.*)$")


class _Unsliceable(Exception):
    pass


def _lines(path: Path, depth: int, in_block: bool) -> list[tuple[str, str, str]]:
    """(keyword lowercased, arguments, original line) with global Includes inlined."""
    if depth > 8:
        raise _Unsliceable
    out: list[tuple[str, str, str]] = []
    block = in_block
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _KEY.match(line)
        if not m:
            raise _Unsliceable
        key, rest = m.group(1).lower(), m.group(2)
        if key in ("host", "match"):
            block = True
        if key == "canonicalizehostname" or (
                key == "match" and re.search(r"\b(canonical|final)\b", rest.lower())):
            raise _Unsliceable
        if key == "include":
            if block:
                raise _Unsliceable
            for pattern in shlex.split(rest):
                base = Path(os.path.expanduser(pattern))
                if not base.is_absolute():
                    base = Path.home() / ".ssh" / base
                for found in sorted(glob.glob(str(base))):
                    if Path(found).is_file():
                        sub = _lines(Path(found), depth + 1, in_block=False)
                        out.extend(sub)
                        # asyncssh starts each included file matching; later global
                        # lines of this file would then follow the included blocks.
                        if any(k in ("host", "match") for k, _r, _l in sub):
                            block = True
            continue
        out.append((key, rest, line))
    return out


def slice_for(lines: list[tuple[str, str, str]], host: str) -> str:
    out: list[str] = []
    keep = True
    for key, rest, line in lines:
        if key == "host":
            keep = ssh_pattern_match(",".join(shlex.split(rest)), host)
        elif key == "match":
            keep = True
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


class ConfigSlicer:
    """Writes one small config per host into a private temp dir; ``close()`` removes it."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path).expanduser() if path else None
        self._lines: list[tuple[str, str, str]] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._cache: dict[str, str] = {}
        if self.path is not None and self.path.is_file():
            try:
                self._lines = _lines(self.path, 0, in_block=False)
            except (_Unsliceable, OSError, ValueError, UnicodeDecodeError):
                self._lines = None  # the full file is used as is

    def config_for(self, host: str | None) -> str | None:
        """The config file to use for ``host``: a slice, or the full file."""
        if self.path is None:
            return None
        if self._lines is None or host is None:
            return str(self.path)
        cached = self._cache.get(host)
        if cached is None:
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="inferfit-ssh-")
            name = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:80]
            target = Path(self._dir.name) / f"{len(self._cache):05d}-{name}.conf"
            target.write_text(slice_for(self._lines, host), encoding="utf-8")
            cached = self._cache[host] = str(target)
        return cached

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        self._cache.clear()
