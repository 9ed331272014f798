"""Find access logs and their log_format in ``nginx -T`` output (pure; tested on recordings).

``nginx -T`` prints every file of the effective configuration, includes
followed, each after a ``# configuration file PATH:`` line. Contexts do not
matter here: ``log_format`` lives in ``http`` and every ``access_log`` (http,
server, location) names a file and a format. nginx predefines ``combined``.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from inferfit.probes.nginx_format import COMBINED

DEFAULT_ACCESS_LOG = "logs/access.log"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r"}


@dataclass(frozen=True)
class LogFormatDef:
    name: str
    text: str
    escape: str = "default"


@dataclass(frozen=True)
class AccessLog:
    path: str
    format: str  # the log_format name
    note: str = ""  # why it cannot be read (syslog, variables in the path)


@dataclass
class NginxConf:
    formats: dict[str, LogFormatDef] = field(default_factory=dict)
    access_logs: list[AccessLog] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    off: bool = False  # an `access_log off;` was seen
    default_log: str = ""  # nginx -V --http-log-path: used when no access_log is configured

    def readable_logs(self) -> list[AccessLog]:
        logs = [a for a in self.access_logs if not a.note]
        if not self.access_logs and not self.off and self.default_log:
            logs.append(AccessLog(self.default_log, "combined", ""))
        return logs


def tokenize(text: str) -> list[tuple[str, bool]]:
    """nginx config tokens as (text, quoted); ``;``, ``{``, ``}`` are tokens of their own."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif c in ";{}":
            out.append((c, False))
            i += 1
        elif c in "\"'":
            buf = []
            i += 1
            while i < n and text[i] != c:
                if text[i] == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    buf.append(_ESCAPES.get(nxt, nxt) if nxt in _ESCAPES or nxt in "\"'\\"
                               else "\\" + nxt)
                    i += 2
                    continue
                buf.append(text[i])
                i += 1
            out.append(("".join(buf), True))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in ";{}" and not (
                text[i] == "#" and i == start
            ):
                if text[i] == "\\" and i + 1 < n:
                    i += 2
                    continue
                i += 1
            out.append((text[start:i], False))
    return out


def directives(text: str) -> list[list[str]]:
    """Every simple directive (words up to ``;``); block openers are skipped over."""
    out: list[list[str]] = []
    words: list[str] = []
    for tok, quoted in tokenize(text):
        if not quoted and tok == ";":
            if words:
                out.append(words)
            words = []
        elif not quoted and tok in "{}":
            words = []
        else:
            words.append(tok)
    return out


def parse_nginx_t(text: str, prefix: str = "/etc/nginx/") -> NginxConf:
    """Formats and access logs of an ``nginx -T`` dump; paths made absolute against ``prefix``."""
    conf = NginxConf(formats={"combined": LogFormatDef("combined", COMBINED)})
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("# configuration file ") and line.rstrip().endswith(":"):
            conf.files.append(line[len("# configuration file "):].rstrip()[:-1])
            body.append("\n")  # a file boundary ends any comment
            continue
        body.append(line + "\n")
    seen: set[tuple[str, str]] = set()
    for words in directives("".join(body)):
        name, args = words[0], words[1:]
        if name == "log_format" and len(args) >= 2:
            escape = "default"
            rest = args[1:]
            if rest and rest[0].startswith("escape="):
                escape = rest[0].split("=", 1)[1]
                rest = rest[1:]
            conf.formats[args[0]] = LogFormatDef(args[0], "".join(rest), escape)
        elif name == "access_log" and args:
            if args[0] == "off":
                conf.off = True
                continue
            path = args[0]
            fmt = args[1] if len(args) > 1 and "=" not in args[1] else "combined"
            note = ""
            if path.startswith("syslog:"):
                note = "sent to syslog, not a file"
            elif "$" in path:
                note = "the path contains variables"
            elif not path.startswith("/"):
                path = os.path.join(prefix, path)
            if (path, fmt) not in seen:
                seen.add((path, fmt))
                conf.access_logs.append(AccessLog(path, fmt, note))
    return conf


@dataclass(frozen=True)
class Master:
    """A running nginx master process, from its process title."""

    binary: str
    conf: str = ""
    prefix: str = ""


def parse_masters(ps_lines: list[str]) -> list[Master]:
    """``nginx: master process /usr/sbin/nginx -c /etc/x.conf -p /srv/`` -> Master(...)."""
    out: list[Master] = []
    for line in ps_lines:
        line = line.strip()
        if not line.startswith("nginx: master process"):
            continue
        rest = line[len("nginx: master process"):].strip()
        try:
            argv = shlex.split(rest)
        except ValueError:
            argv = rest.split()
        if not argv:
            continue
        conf = prefix = ""
        i = 1
        while i < len(argv):
            if argv[i] in ("-c", "-p") and i + 1 < len(argv):
                if argv[i] == "-c":
                    conf = argv[i + 1]
                else:
                    prefix = argv[i + 1]
                i += 2
                continue
            i += 1
        m = Master(argv[0], conf, prefix)
        if m not in out:
            out.append(m)
    return out


def unreadable_reason(output: str) -> str:
    """The line of failed ``nginx -T`` output that says why (permission, syntax)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for key in ("Permission denied", "[emerg]", "[alert]", "failed"):
        for ln in lines:
            if key in ln:
                return ln[:300]
    return lines[-1][:300] if lines else "no output"
