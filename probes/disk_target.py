"""disk probe, part 1: options, the survey of the target path, and what to measure.

Pure functions (tested on recorded survey output) plus the constant SURVEY
script that collects everything in one round trip; the path travels as "$1".
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NAME = "disk"
GIB = 1 << 30
MIB = 1 << 20
# Job name -> (fio rw, block size, written?)
JOBS: dict[str, tuple[str, str, bool]] = {
    "seq_read": ("read", "1M", False),
    "rand_read": ("randread", "4k", False),
    "seq_write": ("write", "1M", True),
    "rand_write": ("randwrite", "4k", True),
}
ENGINE_PREFERENCE = ("libaio", "io_uring", "psync")
# Paths that are devices or kernel views, never files to measure.
FORBIDDEN_PREFIXES = ("/dev", "/proc", "/sys")
MODEL_SUFFIXES = (".safetensors",)
SURVEY = r"""
p=$1
echo '@@fio'; command -v fio 2>/dev/null && fio --version 2>/dev/null
echo '@@engines'; fio --enghelp 2>/dev/null
echo '@@os-release'; cat /etc/os-release 2>/dev/null
echo '@@meminfo'; grep -E '^(MemTotal|MemAvailable):' /proc/meminfo 2>/dev/null
echo '@@kind'
if [ -b "$p" ]; then echo block; elif [ -c "$p" ]; then echo char
elif [ -d "$p" ]; then echo dir; elif [ -f "$p" ]; then echo file
elif [ -e "$p" ] || [ -L "$p" ]; then echo other; else echo missing; fi
echo '@@realpath'; readlink -f -- "$p" 2>/dev/null
echo '@@access'; [ -r "$p" ] && echo read; [ -w "$p" ] && echo write
echo '@@findmnt'; findmnt -n -r -o SOURCE,FSTYPE,TARGET -T "$p" 2>/dev/null
echo '@@fstype'; stat -f -c %T -- "$p" 2>/dev/null
echo '@@df'; df -P -k -- "$p" 2>/dev/null
echo '@@files'
if [ -d "$p" ]; then
  find -L "$p" -maxdepth 3 -type f -exec stat -L -c '%s %n' -- {} + 2>/dev/null | head -n 5000
elif [ -f "$p" ]; then stat -L -c '%s %n' -- "$p" 2>/dev/null; fi
echo '@@end'
"""
class OptionError(ValueError):
    def __init__(self, message: str, fix: str, kind: str = "bad_config") -> None:
        super().__init__(message)
        self.message, self.fix, self.kind = message, fix, kind


@dataclass(frozen=True)
class DiskOptions:
    directory: str = ""
    model_path: str = ""
    runtime_s: float = 10.0
    size_bytes: int = GIB
    allow_write: bool = False
    jobs: tuple[str, ...] = ("seq_read", "rand_read")
    iodepth: int = 16
    numjobs: int = 1
    ioengine: str = "auto"
    latency_bins: bool = False
    free_margin_gib: float = 5.0
    free_margin_pct: float = 5.0
    model_size_gib: float = 0.0
    model_load_warn_s: float = 60.0
    model_load_fail_s: float = 300.0


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.I)


def parse_size(text: str | int | float) -> int:
    """fio-style size ("1G", "512MiB", "4096") -> bytes; binary units as fio uses them."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return int(text)
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size like '1G', '512M' or '4096'")
    power = " kmgt".index(m.group(2).lower() or " ")
    return int(float(m.group(1)) * (1024 ** power))


def _path_refusal(key: str, path: str) -> OptionError | None:
    if not path.startswith("/"):
        return OptionError(f"probes.disk.{key} = {path!r} is not an absolute path",
                           f"set probes.disk.{key} to an absolute path on the box")
    if any(c in path for c in "\0\n"):
        return OptionError(f"probes.disk.{key} contains a control character",
                           f"fix probes.disk.{key}")
    norm = posixpath.normpath(path)
    if any(norm == p or norm.startswith(p + "/") for p in FORBIDDEN_PREFIXES):
        return OptionError(
            f"refusing probes.disk.{key} = {path!r}: the disk probe never reads or writes "
            "devices or kernel files (/dev, /proc, /sys), only regular files",
            f"point probes.disk.{key} at a directory or model files on the filesystem "
            "you want measured", kind="refused_device")
    return None


def read_options(raw: Mapping[str, Any]) -> DiskOptions:
    """The [probes.disk] table -> DiskOptions; OptionError says which key is wrong."""
    d = DiskOptions()
    try:
        size = parse_size(raw.get("size", "1G"))
    except ValueError as exc:
        raise OptionError(f"probes.disk.size: {exc}", "set probes.disk.size like '1G'") from None
    jobs = tuple(str(j) for j in raw.get("jobs", d.jobs))
    unknown = [j for j in jobs if j not in JOBS]
    if unknown or not jobs:
        raise OptionError(f"probes.disk.jobs: unknown job(s) {unknown or '(none given)'}",
                          f"use some of {', '.join(JOBS)}")
    engine = str(raw.get("ioengine", "auto"))
    if not re.fullmatch(r"[a-z0-9_]+", engine):
        raise OptionError(f"probes.disk.ioengine = {engine!r} is not an engine name",
                          "use auto, libaio, io_uring or psync")
    opts = DiskOptions(
        directory=str(raw.get("directory", "")).strip(),
        model_path=str(raw.get("model_path", "")).strip(),
        runtime_s=float(raw.get("runtime_s", d.runtime_s)),
        size_bytes=size,
        allow_write=bool(raw.get("allow_write", False)),
        jobs=tuple(dict.fromkeys(jobs)),
        iodepth=int(raw.get("iodepth", d.iodepth)),
        numjobs=int(raw.get("numjobs", d.numjobs)),
        ioengine=engine,
        latency_bins=bool(raw.get("latency_bins", False)),
        free_margin_gib=float(raw.get("free_margin_gib", d.free_margin_gib)),
        free_margin_pct=float(raw.get("free_margin_pct", d.free_margin_pct)),
        model_size_gib=float(raw.get("model_size_gib", 0.0)),
        model_load_warn_s=float(raw.get("model_load_warn_s", d.model_load_warn_s)),
        model_load_fail_s=float(raw.get("model_load_fail_s", d.model_load_fail_s)),
    )
    if not 0 < opts.runtime_s <= 3600:
        raise OptionError("probes.disk.runtime_s must be above 0 and at most 3600",
                          "set probes.disk.runtime_s to e.g. 10")
    if not 1 <= opts.iodepth <= 1024 or not 1 <= opts.numjobs <= 64:
        raise OptionError("probes.disk.iodepth must be 1-1024 and numjobs 1-64",
                          "use iodepth 16-32 and numjobs 1-4")
    if opts.size_bytes < MIB:
        raise OptionError("probes.disk.size must be at least 1M", "set probes.disk.size = '1G'")
    for key in ("model_path", "directory"):
        value = getattr(opts, key)
        refusal = _path_refusal(key, value) if value else None
        if refusal:
            raise refusal
    writes = [j for j in opts.jobs if JOBS[j][2]]
    if writes and not opts.allow_write:
        raise OptionError(
            f"refusing the write test(s) {', '.join(writes)}: writes are off by default "
            "(probes.disk.allow_write = false)",
            "set probes.disk.allow_write = true to allow writing to the probe's own test file, "
            "or remove the write jobs from probes.disk.jobs", kind="write_not_allowed")
    if writes and opts.model_path:
        raise OptionError(
            "write tests run only on the probe's own test file in probes.disk.directory; "
            "model files are never written",
            "unset probes.disk.model_path to run write tests on a test file", kind="write_refused")
    return opts


# -- what the box said -----------------------------------------------------------


@dataclass
class Survey:
    fio_path: str = ""
    fio_version: str = ""
    engines: tuple[str, ...] = ()
    os_release: dict[str, str] = field(default_factory=dict)
    mem_total_bytes: int | None = None
    kind: str = "missing"  # block | char | dir | file | other | missing
    realpath: str = ""
    readable: bool = False
    writable: bool = False
    device: str = ""
    fstype: str = ""
    mount: str = ""
    fs_size_bytes: int | None = None
    fs_avail_bytes: int | None = None
    files: list[tuple[int, str]] = field(default_factory=list)


def _unescape_findmnt(text: str) -> str:
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def parse_survey(text: str) -> Survey:
    """The SURVEY script's output -> Survey (pure; tested on recordings)."""
    sec: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = sec.setdefault(line[2:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.rstrip("\n"))
    s = Survey()
    fio = [ln.strip() for ln in sec.get("fio", [])]
    if fio:
        s.fio_path = fio[0]
        s.fio_version = next((ln for ln in fio[1:] if ln.startswith("fio")), "")
    s.engines = tuple(ln.strip() for ln in sec.get("engines", []) if ln[:1] in ("\t", " "))
    for line in sec.get("os-release", []):
        key, sep, value = line.partition("=")
        if sep:
            s.os_release[key.strip()] = value.strip().strip('"')
    for line in sec.get("meminfo", []):
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name == "MemTotal" and parts and parts[0].isdigit():
            s.mem_total_bytes = int(parts[0]) * 1024
    kind = sec.get("kind", [])
    s.kind = kind[0].strip() if kind else "missing"
    s.realpath = sec.get("realpath", [""])[0].strip() if sec.get("realpath") else ""
    access = {ln.strip() for ln in sec.get("access", [])}
    s.readable, s.writable = "read" in access, "write" in access
    if sec.get("findmnt"):
        parts = sec["findmnt"][0].split()
        if len(parts) >= 3:
            s.device, s.fstype, s.mount = (_unescape_findmnt(p) for p in parts[:3])
    if not s.fstype and sec.get("fstype"):
        s.fstype = sec["fstype"][0].strip()
    for line in sec.get("df", [])[1:]:
        parts = line.split()
        if len(parts) >= 6 and parts[1].isdigit() and parts[3].isdigit():
            s.fs_size_bytes, s.fs_avail_bytes = int(parts[1]) * 1024, int(parts[3]) * 1024
            s.device = s.device or parts[0]
            s.mount = s.mount or " ".join(parts[5:])
            break
    for line in sec.get("files", []):
        size, _, name = line.partition(" ")
        if size.isdigit() and name:
            s.files.append((int(size), name))
    return s


def install_hint(os_release: Mapping[str, str]) -> str:
    """The command that installs fio on this distro (from /etc/os-release)."""
    ids = [os_release.get("ID", "").lower(), *os_release.get("ID_LIKE", "").lower().split()]
    version = os_release.get("VERSION_ID", "")
    for i in ids:
        if i in ("debian", "ubuntu", "raspbian", "linuxmint", "pop"):
            return "sudo apt-get install -y fio"
        if i == "amzn":
            return "sudo yum install -y fio" if version == "2" else "sudo dnf install -y fio"
        if i in ("rhel", "centos", "rocky", "almalinux", "ol", "fedora"):
            tool = "yum" if version.startswith("7") else "dnf"
            return f"sudo {tool} install -y fio"
        if i in ("sles", "suse", "opensuse", "opensuse-leap", "opensuse-tumbleweed"):
            return "sudo zypper install -y fio"
        if i == "alpine":
            return "sudo apk add fio"
        if i in ("arch", "manjaro"):
            return "sudo pacman -S --noconfirm fio"
    return "install the fio package with the box's package manager"


# -- what to measure ---------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    mode: str  # "model" | "test_file"
    target_path: str
    files: tuple[str, ...]  # what fio opens
    test_file: str = ""  # the file the probe creates and removes ("" in model mode)
    size_bytes: int = 0  # test file size
    model_bytes: int | None = None
    jobs: tuple[str, ...] = ("seq_read", "rand_read")


def gib_text(n: float) -> str:
    """Bytes as GiB (or MiB below 1 GiB) for messages."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def _refuse(kind: str, message: str, fix: str) -> OptionError:
    return OptionError(message, fix, kind=kind)


def plan_target(opts: DiskOptions, s: Survey, test_name: str) -> Plan | OptionError:
    """Decide what fio reads, or refuse (device, missing, unreadable, too little free space)."""
    key = "model_path" if opts.model_path else "directory"
    path = opts.model_path or opts.directory
    if s.kind in ("block", "char", "other"):
        return _refuse("refused_device", f"refusing {key} {path!r}: it is a {s.kind} "
                       "device or special file; the disk probe only reads regular files",
                       f"point probes.disk.{key} at files on the filesystem to measure")
    if s.realpath and _path_refusal(key, s.realpath):
        return _refuse("refused_device", f"refusing {key} {path!r}: it resolves to "
                       f"{s.realpath}", f"point probes.disk.{key} at a regular file or directory")
    if s.kind == "missing":
        return _refuse("target_missing", f"{key} {path!r} does not exist on the box",
                       f"create it or fix probes.disk.{key}")
    if not s.readable:
        return _refuse("permission_denied", f"{key} {path!r} is not readable by the SSH user",
                       "connect as a user who can read it")
    if opts.model_path:
        files = s.files
        if s.kind == "dir":
            weights = [f for f in files if f[1].endswith(MODEL_SUFFIXES)]
            files = weights or [f for f in files if f[0] >= MIB]
        model_bytes = sum(size for size, _ in files)
        readable = tuple(name for size, name in files if size >= MIB)  # fio needs >= 1 block
        if not readable:
            return _refuse("no_model_files", f"model_path {path!r} holds no model file of "
                           "1 MiB or more to read", "point probes.disk.model_path at the weights "
                           "(a .safetensors file or the directory holding them)")
        return Plan("model", path, readable, model_bytes=model_bytes, jobs=opts.jobs)
    if s.kind != "dir":
        return _refuse("not_a_directory", f"directory {path!r} is a {s.kind}, not a directory",
                       "set probes.disk.directory to a directory on the filesystem to measure")
    if not s.writable:
        return _refuse("permission_denied", f"directory {path!r} is not writable by the SSH "
                       "user, so no test file can be created there",
                       "pick a writable directory or set probes.disk.model_path instead")
    if s.fs_avail_bytes is None:
        return _refuse("free_space_unknown", f"cannot tell the free space under {path!r} "
                       "(df printed nothing), so no test file is created",
                       "check that df works on the box, or use probes.disk.model_path")
    margin = max(opts.free_margin_gib * GIB, opts.free_margin_pct / 100 * (s.fs_size_bytes or 0))
    left = s.fs_avail_bytes - opts.size_bytes
    if left < margin:
        where = f"{s.mount or path} ({s.device})" if s.device else (s.mount or path)
        return _refuse(
            "insufficient_free_space",
            f"refusing to create a {gib_text(opts.size_bytes)} test file in {path}: it would "
            f"leave {gib_text(max(left, 0))} free on {where}, below the safety margin of "
            f"{gib_text(margin)}",
            "free space there, lower probes.disk.size or probes.disk.free_margin_gib, or point "
            "probes.disk.directory at another filesystem")
    test_file = posixpath.join(path, test_name)
    assumed = int(opts.model_size_gib * GIB) if opts.model_size_gib > 0 else None
    return Plan("test_file", path, (test_file,), test_file, opts.size_bytes, assumed,
                opts.jobs)


def pick_engine(wanted: str, available: tuple[str, ...]) -> str:
    if wanted != "auto":
        return wanted
    for engine in ENGINE_PREFERENCE:
        if engine in available:
            return engine
    return "psync"


