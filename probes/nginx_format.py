"""Compile an nginx ``log_format`` into a parser (pure, stdlib only; also shipped to the box).

Two parsers come out of one format and agree on every line they both accept:

* ``parse_line``: the reference. Walks the format's literals with ``bytes.find``.
* ``parse_chunk``: the fast path. Splits a whole chunk of lines on ``"`` and on
  spaces (C speed), slices columns out of the flat token list, and checks that
  every line had the shape the format predicts (quote count, token count, every
  literal in place). A chunk that fails any check is parsed line by line.

Values stay ``bytes`` (non-UTF-8 input never raises). Retry lists such as
``0.000, 0.079`` or ``502, 200`` are first folded to ``0.000,0.079`` so that
every value is one token. This module must stay importable on python3 >= 3.7
with nothing but the standard library: ``nginx_remote`` sends its source to the box.
"""

from __future__ import annotations

import re
from typing import Any

COMBINED = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent"'
)

# The variables the aggregates use; everything else is parsed over, never kept.
TIME_VARS = ("msec", "time_iso8601", "time_local")
NEEDED = (
    "status", "request_time", "upstream_response_time", "upstream_connect_time",
    "upstream_header_time", "upstream_status", "bytes_sent", "body_bytes_sent", "request",
    "request_uri", "uri", "request_method", *TIME_VARS,
)
# Spaces inside a value when it sits outside quotes (None: any number, not tokenizable).
_FIXED_SPACES = {"time_local": 1}
_FREE_PREFIXES = ("http_", "sent_http_", "cookie_", "arg_", "sent_trailer_")
_FREE_VARS = frozenset({"request", "uri", "request_body", "args", "query_string",
                        "document_uri", "realpath_root", "request_filename"})
SENT = b"\x01"
_VAR_RE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_MARK_RE = re.compile(r"\x02(\d+)([ab]?)\x03")


class FormatError(ValueError):
    """A log_format string this parser cannot use."""


def _spaces(var: str) -> int | None:
    if var in _FIXED_SPACES:
        return _FIXED_SPACES[var]
    if var in _FREE_VARS or var.startswith(_FREE_PREFIXES):
        return None
    return 0


def split_format(fmt: str) -> tuple[list[str], list[str]]:
    """Literals (one more than variables) and variable names of a format string."""
    lits: list[str] = []
    names: list[str] = []
    pos = 0
    for m in _VAR_RE.finditer(fmt):
        lits.append(fmt[pos:m.start()])
        names.append(m.group(1) or m.group(2))
        pos = m.end()
    lits.append(fmt[pos:])
    return lits, names


class LogFormat:
    """A compiled log_format: ``parse_line`` for one line, ``parse_chunk`` for many."""

    def __init__(self, fmt: str, escape: str = "default", name: str = "") -> None:
        if escape not in ("default", "json", "none"):
            raise FormatError(f"unknown escape={escape!r} (nginx knows default, json, none)")
        lits, names = split_format(fmt)
        if not names:
            raise FormatError("the log_format has no $variables")
        self.text = fmt
        self.name = name
        self.escape = escape
        self.lits = [s.encode("utf-8", "surrogateescape") for s in lits]
        self.names = names
        self.needed: list[str] = []
        self.slots: list[int] = []
        for var in names:
            if var in NEEDED and var not in self.needed:
                self.needed.append(var)
                self.slots.append(len(self.needed) - 1)
            else:
                self.slots.append(-1)
        # Retry lists ("0.000, 0.079") only come from $upstream_* variables.
        self.fold = any(v.startswith("upstream_") for v in names)
        self.time_var = next((t for t in TIME_VARS if t in self.needed), "")
        # pre/suf literals glued to a needed value's token (parse_chunk keeps them on)
        self.affix: dict[str, tuple[bytes, bytes]] = {}
        self.plan = self._plan()
        if self.plan is None:
            self.affix = {}

    @property
    def fast(self) -> bool:
        return self.plan is not None

    # -- the reference, line by line ----------------------------------------
    def _find(self, line: bytes, lit: bytes, pos: int) -> int:
        end = line.find(lit, pos)
        if self.escape == "json" and lit[:1] == b'"':
            while end > 0:
                back = 0
                while end - back - 1 >= pos and line[end - back - 1] == 0x5C:  # backslash
                    back += 1
                if back % 2 == 0:
                    break
                end = line.find(lit, end + 1)
        return end

    def parse_line(self, line: bytes) -> list[bytes | None] | None:
        """The needed values of one line (None where absent), or None when it does not fit."""
        return self.parse_folded(line.replace(b", ", b",") if self.fold else line)

    def parse_folded(self, line: bytes) -> list[bytes | None] | None:
        """``parse_line`` for a line whose retry lists are already folded."""
        lits = self.lits
        if not line.startswith(lits[0]):
            return None
        out: list[bytes | None] = [None] * len(self.needed)
        pos = len(lits[0])
        last = len(self.names) - 1
        for i in range(len(self.names)):
            lit = lits[i + 1]
            if i == last:
                end = len(line) - len(lit)
                if end < pos or not line.endswith(lit):
                    return None
            elif lit:
                end = self._find(line, lit, pos)
                if end < 0:
                    return None
            else:  # two variables back to back: the first ends at a space
                end = line.find(b" ", pos)
                if end < 0:
                    end = len(line)
            slot = self.slots[i]
            if slot >= 0:
                out[slot] = line[pos:end]
            pos = end + len(lit)
        return out

    # -- the fast path, a chunk at a time -----------------------------------
    def _plan(self) -> list[Any] | None:
        """How to cut a chunk into columns, or None when this format needs the slow path."""
        rendered = ""
        for i, var in enumerate(self.names):
            rendered += self.lits[i].decode("utf-8", "surrogateescape")
            rendered += f"\x02{i}a\x03 \x02{i}b\x03" if var == "time_local" else f"\x02{i}\x03"
        rendered += self.lits[-1].decode("utf-8", "surrogateescape")
        if "\n" in rendered or "\x01" in rendered or "\t" in rendered:
            return None
        parts = rendered.split('"')
        q = len(parts) - 1
        # Segment 0 is the line's head joined to its tail (they meet around the newline).
        segments = [parts[0] + parts[-1], *parts[1:-1]] if q else [rendered]
        plan: list[Any] = []
        for s, seg in enumerate(segments):
            marks = _MARK_RE.findall(seg)
            inside = q > 0 and s % 2 == 1
            if inside and len(marks) == 1 and _MARK_RE.fullmatch(seg):
                plan.append(("raw", int(marks[0][0])))
                continue
            if s and not marks:  # only literals between two quotes: compare, don't split
                plan.append(("lit", seg.encode("utf-8", "surrogateescape")))
                continue
            for idx, _part in marks:
                var = self.names[int(idx)]
                if _spaces(var) is None or (self.escape == "none" and inside):
                    return None
            tokens: list[tuple[bytes, int, str, bytes]] = []
            for tok in seg.split(" "):
                found = list(_MARK_RE.finditer(tok))
                if len(found) > 1:
                    return None
                if not found:
                    tokens.append((tok.encode("utf-8", "surrogateescape"), -1, "", b""))
                    continue
                m = found[0]
                slot = self.slots[int(m.group(1))]
                if slot >= 0 and m.group(2) != "b":
                    self.affix.setdefault(self.needed[slot], (
                        tok[:m.start()].encode("utf-8", "surrogateescape"),
                        tok[m.end():].encode("utf-8", "surrogateescape")))
                tokens.append((tok[:m.start()].encode("utf-8", "surrogateescape"),
                               int(m.group(1)), m.group(2),
                               tok[m.end():].encode("utf-8", "surrogateescape")))
            plan.append(("tok", tokens))
        return [q, plan]

    def parse_chunk(self, chunk: bytes, n: int) -> dict[str, Any] | None:
        """Columns of the needed values for ``n`` lines joined by newlines, or None.

        ``chunk`` has no trailing newline and already has ``", "`` folded to ``","``
        (when ``fold``). Values come as raw tokens, literals glued on: see ``strip``.
        """
        got = self.parse_block(chunk, n)
        return got[0] if got is not None else None

    def parse_block(self, chunk: bytes, n: int | None = None) -> tuple[dict[str, Any], int] | None:
        """``parse_chunk`` that also counts the lines (``n`` None), and returns the count."""
        if self.plan is None or SENT in chunk:
            return None
        q, plan = self.plan
        # One pass marks every line end with a sentinel token; the growth counts the lines.
        marked = chunk.replace(b"\n", b" \x01 ")
        lines = (len(marked) - len(chunk)) // 2 + 1
        if n is None:
            n = lines
        elif n != lines:
            return None
        if q:
            parts = marked.split(b'"')
            if len(parts) != q * n + 1:
                return None
            # All n - 1 sentinels must land in segment 0, at the places _cut checks.
            pieces: list[Any] = [b"".join(parts[0::q])]
            pieces.extend(parts[i::q] for i in range(1, q))
        else:
            pieces = [marked]
        cols: dict[str, Any] = {}
        for (kind, what), piece in zip(plan, pieces):  # noqa: B905 (python3.7 on the box)
            if kind == "raw":
                slot = self.slots[what]
                if slot >= 0:
                    cols[self.needed[slot]] = piece
                continue
            if kind == "lit":
                if piece.count(what) != n:
                    return None
                continue
            text = piece if isinstance(piece, bytes) else b" \x01 ".join(piece)
            if not self._cut(text, what, n, cols):
                return None
        return cols, n

    def _cut(self, text: bytes, tokens: list[tuple[bytes, int, str, bytes]], n: int,
             cols: dict[str, Any]) -> bool:
        k = len(tokens)
        flat = text.split(b" ")
        if len(flat) != (k + 1) * n - 1 or flat[k::k + 1].count(SENT) != n - 1:
            return False
        for j, (pre, idx, part, suf) in enumerate(tokens):
            col = flat[j::k + 1]
            if idx < 0:
                if col.count(pre) != n:
                    return False
                continue
            slot = self.slots[idx]
            var = self.names[idx]
            if part == "b":  # the zone of $time_local: one value for the whole chunk
                zones = set(col)
                if len(zones) != 1:
                    return False
                zone = zones.pop()
                short = len(zone) < len(pre) + len(suf)
                if short or not (zone.startswith(pre) and zone.endswith(suf)):
                    return False
                cols["_tz"] = zone[len(pre):len(zone) - len(suf)]
                continue
            if slot >= 0:  # kept raw: the consumer strips (and checks) pre/suf per distinct
                cols[var] = col
                continue
            if not pre and not suf:
                continue
            joined = b"\n".join(col)
            if pre and (not joined.startswith(pre) or joined.count(b"\n" + pre) != n - 1):
                return False
            if suf and (not joined.endswith(suf) or joined.count(suf + b"\n") != n - 1):
                return False
        return True

    def strip(self, var: str, raw: bytes) -> bytes | None:
        """A value from ``parse_chunk``'s raw token (None when its literals are not there)."""
        pre, suf = self.affix.get(var, (b"", b""))
        if not pre and not suf:
            return raw
        if len(raw) < len(pre) + len(suf) or not raw.startswith(pre) or not raw.endswith(suf):
            return None
        return raw[len(pre):len(raw) - len(suf)]

    def unstrip(self, var: str, value: bytes) -> bytes:
        """The raw token ``parse_chunk`` would give for a value from ``parse_line``."""
        pre, suf = self.affix.get(var, (b"", b""))
        return pre + value + suf


def compile_format(fmt: str, escape: str = "default", name: str = "") -> LogFormat:
    return LogFormat(fmt, escape, name)
