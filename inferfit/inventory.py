"""Where the fleet's targets come from: a list, an ssh config, an Ansible inventory.

Pure parsing, no connections. Every source yields ``FleetTarget`` objects:
a display name (used for the findings file), what to connect to, and the
per-host SSH settings an inventory may carry (port, user, key).

Ansible inventories: INI is parsed here (hosts, ``[group]``, ``[group:vars]``,
``[group:children]``, host ranges such as ``gpu[01:20]``, ``ansible_host``,
``ansible_port``, ``ansible_user``, ``ansible_ssh_private_key_file``,
``ansible_connection=local``); YAML goes through PyYAML (``yaml.safe_load``).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class InventoryError(ValueError):
    """An inventory or ssh config that cannot be used; the message names file and line."""


@dataclass(frozen=True)
class FleetTarget:
    """One box of the fleet."""

    name: str  # display name and findings file stem
    host: str | None  # what SSH connects to (alias or address); None = this machine
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    groups: tuple[str, ...] = ()

    @property
    def target(self) -> str | None:
        """The ``[user@]host[:port]`` text ``make_host`` understands (None: local)."""
        if self.host is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{host}{port}"


# -- plain lists ------------------------------------------------------------

def targets_from_args(texts: Sequence[str]) -> list[FleetTarget]:
    """Targets typed on the command line: ``[user@]host[:port]`` or ssh-config aliases.

    The display name is the host part; when two targets share it (same host,
    other port or user) the whole text is used so files never collide.
    """
    from inferfit.hosts.ssh import SSHTarget  # local import: keeps this module light

    parsed = [(text, SSHTarget.parse(text)) for text in dict.fromkeys(texts)]
    counts: dict[str, int] = {}
    for _text, t in parsed:
        counts[t.host] = counts.get(t.host, 0) + 1
    return [
        FleetTarget(name=t.host if counts[t.host] == 1 else text, host=t.host, port=t.port,
                    user=t.user)
        for text, t in parsed
    ]


# -- ssh config --------------------------------------------------------------

def ssh_pattern_match(patterns: str, name: str) -> bool:
    """ssh_config(5) pattern-list matching: ``*`` and ``?``, commas, ``!`` negation."""
    matched = False
    for raw in patterns.split(","):
        pat = raw.strip()
        if not pat:
            continue
        negate = pat.startswith("!")
        if negate:
            pat = pat[1:]
        if glob_regex(pat).fullmatch(name):
            if negate:
                return False
            matched = True
    return matched


def glob_regex(pattern: str) -> re.Pattern[str]:
    """``*`` any run of characters, ``?`` one character; everything else literal."""
    out = []
    for ch in pattern:
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def ssh_config_aliases(path: str | os.PathLike[str]) -> list[str]:
    """Concrete Host aliases in an ssh client config (and the files it Includes)."""
    aliases: list[str] = []
    for words in _ssh_config_lines(Path(path).expanduser(), depth=0):
        if words[0].lower() == "host":
            for word in words[1:]:
                if not any(c in word for c in "*?!") and word not in aliases:
                    aliases.append(word)
    return aliases


def _ssh_config_lines(path: Path, depth: int) -> Iterator[list[str]]:
    if depth > 8:
        raise InventoryError(f"{path}: Include nested more than 8 deep")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read ssh config: {exc.strerror}") from None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z]+)\s*=?\s*(.*)$", line)
        if not m:
            raise InventoryError(f"{path}:{no}: cannot parse {line!r}")
        key, rest = m.group(1), m.group(2)
        try:
            words = [key, *shlex.split(rest, comments=True)]
        except ValueError as exc:
            raise InventoryError(f"{path}:{no}: {exc}") from None
        if key.lower() == "include":
            for pattern in words[1:]:
                base = Path(os.path.expanduser(pattern))
                if not base.is_absolute():
                    base = Path.home() / ".ssh" / base
                for found in sorted(glob.glob(str(base))):
                    yield from _ssh_config_lines(Path(found), depth + 1)
            continue
        yield words


def hosts_from_ssh_config(path: str | os.PathLike[str], pattern: str) -> list[FleetTarget]:
    """Every concrete Host alias of ``path`` that matches ``pattern`` (ssh pattern list)."""
    return [FleetTarget(name=a, host=a) for a in ssh_config_aliases(path)
            if ssh_pattern_match(pattern, a)]


# -- Ansible inventory -----------------------------------------------------------

_RANGE = re.compile(r"\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::([0-9]+))?\]")


def expand_host_pattern(pattern: str) -> list[str]:
    """Ansible host ranges: ``gpu[01:03]`` -> gpu01 gpu02 gpu03; ``x[a:c]``; ``[0:10:5]``."""
    m = _RANGE.search(pattern)
    if not m:
        return [pattern]
    beg, end, stride_text = m.group(1), m.group(2), m.group(3)
    stride = int(stride_text) if stride_text else 1
    if stride < 1:
        raise InventoryError(f"bad range stride in {pattern!r}")
    head, tail = pattern[: m.start()], pattern[m.end():]
    items: list[str]
    if beg.isdigit() and end.isdigit():
        width = len(beg) if beg.startswith("0") and len(beg) > 1 else 0
        if int(end) < int(beg):
            raise InventoryError(f"range end before start in {pattern!r}")
        items = [str(i).zfill(width) for i in range(int(beg), int(end) + 1, stride)]
    elif len(beg) == 1 and len(end) == 1 and beg.isalpha() and end.isalpha():
        letters = string.ascii_letters
        i, j = letters.index(beg), letters.index(end)
        if j < i:
            raise InventoryError(f"range end before start in {pattern!r}")
        items = list(letters[i: j + 1: stride])
    else:
        raise InventoryError(f"cannot expand host range in {pattern!r}")
    out: list[str] = []
    for item in items:
        out.extend(expand_host_pattern(head + item + tail))
    return out


@dataclass
class _Group:
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@dataclass
class Inventory:
    """Groups with their hosts, vars and children, as Ansible sees them."""

    groups: dict[str, _Group] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # hosts in first-seen order

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())

    def add_host(self, group: str, name: str, hostvars: Mapping[str, Any]) -> None:
        hostvars = dict(hostvars)
        host, sep, port = name.rpartition(":")
        if sep and host and ":" not in host and port.isdigit():  # `box:2222` sets the port
            name = host
            hostvars.setdefault("ansible_port", int(port))
        self.group(group).hosts.setdefault(name, {}).update(hostvars)
        if name not in self.order:
            self.order.append(name)

    def _depths(self) -> dict[str, int]:
        depth = {"all": 0}
        todo = ["all", *[g for g in self.groups if g != "all"]]
        for _ in range(len(self.groups) + 2):  # bounded relaxation over the group DAG
            changed = False
            for g in todo:
                for child in self.group(g).children:
                    d = depth.get(g, 1) + 1
                    if depth.get(child, 0) < d:
                        depth[child] = d
                        changed = True
            if not changed:
                break
        return {g: depth.get(g, 1) for g in self.groups}

    def host_groups(self, host: str) -> list[str]:
        direct = [g for g, grp in self.groups.items() if host in grp.hosts]
        found: list[str] = []
        todo = list(direct)
        while todo:
            g = todo.pop()
            if g in found:
                continue
            found.append(g)
            todo.extend(p for p, grp in self.groups.items() if g in grp.children)
        return found

    def host_vars(self, host: str) -> dict[str, Any]:
        """Vars of ``all``, then groups from parent to child, then the host's own."""
        depths = self._depths()
        groups = sorted(self.host_groups(host), key=lambda g: (depths.get(g, 1), g))
        merged: dict[str, Any] = dict(self.groups["all"].vars) if "all" in self.groups else {}
        for g in groups:
            if g != "all":
                merged.update(self.groups[g].vars)
        for g in groups:
            merged.update(self.groups[g].hosts.get(host, {}))
        return merged

    def targets(self, limit: str | None = None) -> list[FleetTarget]:
        """Hosts in inventory order; ``limit`` as Ansible's --limit: patterns over host
        and group names, comma- or colon-separated, ``!`` excludes, ``&`` intersects."""
        groups = {n: tuple(g for g in self.host_groups(n) if g != "all") for n in self.order}
        chosen = set(self.order) if not limit else self._limit(limit, groups)
        return [target_from_vars(n, self.host_vars(n), groups[n])
                for n in self.order if n in chosen]

    def _limit(self, limit: str, groups: Mapping[str, tuple[str, ...]]) -> set[str]:
        def hits(pattern: str) -> set[str]:
            rx = glob_regex(pattern)
            return {n for n in self.order
                    if rx.fullmatch(n) or pattern == "all"
                    or any(rx.fullmatch(g) for g in groups[n])}

        parts = [p.strip() for p in re.split(r"[,:]", limit) if p.strip()]
        chosen: set[str] = set()
        for p in parts:
            if p[0] not in "!&":
                chosen |= hits(p)
        for p in parts:
            if p.startswith("&"):
                chosen &= hits(p[1:])
            elif p.startswith("!"):
                chosen -= hits(p[1:])
        return chosen


def target_from_vars(
    name: str, hostvars: Mapping[str, Any], groups: tuple[str, ...]
) -> FleetTarget:
    def pick(*keys: str) -> Any:
        for k in keys:
            if hostvars.get(k) not in (None, ""):
                return hostvars[k]
        return None

    if str(pick("ansible_connection") or "") == "local":
        return FleetTarget(name=name, host=None, groups=groups)
    port = pick("ansible_port", "ansible_ssh_port")
    try:
        port_num = int(port) if port is not None else None
    except (TypeError, ValueError):
        raise InventoryError(f"host {name!r}: ansible_port {port!r} is not a number") from None
    if port_num is not None and not 0 < port_num < 65536:
        raise InventoryError(f"host {name!r}: ansible_port {port_num} is out of range")
    user = pick("ansible_user", "ansible_ssh_user")
    key = pick("ansible_ssh_private_key_file", "ansible_private_key_file")
    return FleetTarget(
        name=name,
        host=str(pick("ansible_host", "ansible_ssh_host") or name),
        port=port_num,
        user=str(user) if user is not None else None,
        identity_file=os.path.expanduser(str(key)) if key is not None else None,
        groups=groups,
    )


def _ini_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _kv_pairs(words: Iterable[str], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise InventoryError(f"{where}: expected key=value, got {word!r}")
        out[key] = _ini_value(value)
    return out


def parse_ini_inventory(text: str, where: str = "inventory") -> Inventory:
    inv = Inventory()
    inv.group("all")
    section, kind = "ungrouped", "hosts"
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        at = f"{where}:{no}"
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise InventoryError(f"{at}: unclosed section header {line!r}")
            head = line[1:-1].strip()
            section, _, kind = head.partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children") or not section:
                raise InventoryError(f"{at}: unknown section [{head}]; "
                                     "expected [group], [group:vars] or [group:children]")
            inv.group(section)
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventoryError(f"{at}: {exc}") from None
        if not words:
            continue
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise InventoryError(f"{at}: expected key=value in [{section}:vars]")
            inv.group(section).vars[key.strip()] = _ini_value(value.strip().strip("'\""))
        elif kind == "children":
            inv.group(section).children.append(words[0])
            inv.group(words[0])
        else:
            hostvars = _kv_pairs(words[1:], at)
            try:
                names = expand_host_pattern(words[0])
            except InventoryError as exc:
                raise InventoryError(f"{at}: {exc}") from None
            for name in names:
                inv.add_host(section, name, hostvars)
    _link_top_groups(inv)
    return inv


def _link_top_groups(inv: Inventory) -> None:
    children = {c for g in inv.groups.values() for c in g.children}
    for name in list(inv.groups):
        if name != "all" and name not in children and name not in inv.group("all").children:
            inv.group("all").children.append(name)


def parse_yaml_inventory(text: str, where: str = "inventory") -> Inventory:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InventoryError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(doc, Mapping):
        raise InventoryError(f"{where}: expected a mapping of groups (e.g. `all:`) at the top")
    inv = Inventory()
    inv.group("all")

    def walk(name: str, body: Any, path: str, depth: int) -> None:
        if depth > 32:
            raise InventoryError(f"{where}: groups nested more than 32 deep at {path}")
        grp = inv.group(name)
        if body is None:
            return
        if not isinstance(body, Mapping):
            raise InventoryError(f"{where}: {path} must be a mapping with hosts/vars/children")
        hosts = body.get("hosts") or {}
        if not isinstance(hosts, Mapping):
            raise InventoryError(f"{where}: {path}.hosts must be a mapping of host names")
        for pattern, hostvars in hosts.items():
            if hostvars is not None and not isinstance(hostvars, Mapping):
                raise InventoryError(f"{where}: {path}.hosts.{pattern} must be a mapping or empty")
            for host in expand_host_pattern(str(pattern)):
                inv.add_host(name, host, dict(hostvars or {}))
        gvars = body.get("vars") or {}
        if not isinstance(gvars, Mapping):
            raise InventoryError(f"{where}: {path}.vars must be a mapping")
        grp.vars.update(gvars)
        children = body.get("children") or {}
        if not isinstance(children, Mapping):
            raise InventoryError(f"{where}: {path}.children must be a mapping of groups")
        for child, child_body in children.items():
            if str(child) not in grp.children:
                grp.children.append(str(child))
            walk(str(child), child_body, f"{path}.children.{child}", depth + 1)

    for top, body in doc.items():
        walk(str(top), body, str(top), 0)
    _link_top_groups(inv)
    return inv


def load_inventory(path: str | os.PathLike[str], limit: str | None = None) -> list[FleetTarget]:
    """Targets of an Ansible inventory file (INI, or YAML by suffix or content)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"{p}: cannot read inventory: {exc.strerror}") from None
    first = next((ln.strip() for ln in text.splitlines()
                  if ln.strip() and ln.strip()[0] not in "#;"), "")
    yaml_like = p.suffix in (".yml", ".yaml", ".json") or first == "---" or (
        first.endswith(":") and not first.startswith("[")) or first.startswith("{")
    inv = parse_yaml_inventory(text, str(p)) if yaml_like else parse_ini_inventory(text, str(p))
    return inv.targets(limit)
