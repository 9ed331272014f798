"""The findings model: the one contract probes, panels, exporters and sizing share.

A findings document is versioned TOML (see docs/findings.md). TOML has no
null, so unknown values are omitted (never written as None) and the probe says
why in ``summary`` or ``notes``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import tomli_w

from inferfit import TOOL

SCHEMA_VERSION = 1

Status = Literal["ok", "warn", "fail", "error", "skipped"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "error", "skipped")
# Worst first when folding several statuses into one (error = could not check).
_SEVERITY: dict[str, int] = {"skipped": 0, "ok": 1, "warn": 2, "fail": 3, "error": 4}

# Keys of a [probes.NAME] table that belong to the envelope, not to the values.
_ENVELOPE_KEYS = ("status", "summary", "duration_s", "notes", "error_kind", "fix")


class FindingsError(ValueError):
    """A findings file that cannot be read; the message names the file and key."""


def worst(statuses: list[Status] | tuple[Status, ...]) -> Status:
    if not statuses:
        return "skipped"
    return max(statuses, key=lambda s: _SEVERITY[s])


@dataclass
class ProbeResult:
    """What one probe found on one host.

    ``values`` holds the probe's own figures with units in their key names
    (``seq_read_mib_s``); nested tables and arrays of tables are allowed.
    """

    name: str
    status: Status
    summary: str
    duration_s: float = 0.0
    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error_kind: str | None = None
    fix: str | None = None

    @classmethod
    def error(
        cls, name: str, summary: str, *, kind: str, fix: str = "", duration_s: float = 0.0
    ) -> ProbeResult:
        return cls(name, "error", summary, duration_s, error_kind=kind, fix=fix or None)

    @classmethod
    def skipped(cls, name: str, summary: str, *, kind: str | None = None) -> ProbeResult:
        return cls(name, "skipped", summary, error_kind=kind)

    def to_table(self) -> dict[str, Any]:
        table: dict[str, Any] = {
            "status": self.status,
            "summary": self.summary,
            "duration_s": round(self.duration_s, 3),
        }
        if self.error_kind:
            table["error_kind"] = self.error_kind
        if self.fix:
            table["fix"] = self.fix
        if self.notes:
            table["notes"] = list(self.notes)
        clash = set(self.values) & set(_ENVELOPE_KEYS)
        if clash:
            raise ValueError(f"probe {self.name!r} uses reserved keys {sorted(clash)}")
        table.update(self.values)
        return table

    @classmethod
    def from_table(cls, name: str, table: Mapping[str, Any], where: str) -> ProbeResult:
        values = dict(table)
        status = values.pop("status", None)
        if status not in STATUSES:
            raise FindingsError(
                f"{where}: probes.{name}.status is {status!r}; "
                f"expected one of {', '.join(STATUSES)}"
            )
        summary = values.pop("summary", "")
        duration = values.pop("duration_s", 0.0)
        notes = values.pop("notes", [])
        if not isinstance(summary, str) or not isinstance(duration, int | float):
            raise FindingsError(
                f"{where}: probes.{name}: summary must be text, duration_s a number"
            )
        if not isinstance(notes, list):
            raise FindingsError(f"{where}: probes.{name}.notes must be a list of strings")
        error_kind = values.pop("error_kind", None)
        fix = values.pop("fix", None)
        return cls(
            name=name,
            status=cast(Status, status),
            summary=summary,
            duration_s=float(duration),
            values=values,
            notes=[str(n) for n in notes],
            error_kind=error_kind,
            fix=fix,
        )


@dataclass
class Target:
    """The box the findings describe. Hardware facts come from the system probe."""

    name: str
    address: str
    transport: Literal["ssh", "local"]
    facts: dict[str, Any] = field(default_factory=dict)

    def to_table(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "transport": self.transport,
                **self.facts}

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> Target:
        facts = dict(table)
        try:
            name = str(facts.pop("name"))
            address = str(facts.pop("address"))
            transport = facts.pop("transport")
        except KeyError as exc:
            raise FindingsError(f"{where}: [target] lacks the key {exc.args[0]!r}") from None
        if transport not in ("ssh", "local"):
            raise FindingsError(
                f"{where}: target.transport is {transport!r}; expected 'ssh' or 'local'"
            )
        return cls(name, address, transport, facts)


@dataclass
class Findings:
    target: Target
    probes: dict[str, ProbeResult] = field(default_factory=dict)
    created: dt.datetime = field(
        default_factory=lambda: dt.datetime.now(dt.UTC).replace(microsecond=0)
    )
    tool: str = TOOL
    schema_version: int = SCHEMA_VERSION
    # Sections owned by plugins ([sizing], [mixed], ...): plain TOML tables.
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        return worst([p.status for p in self.probes.values()])

    @property
    def sizing(self) -> dict[str, Any] | None:
        return self.sections.get("sizing")

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema_version": self.schema_version,
            "tool": self.tool,
            "created": self.created,
            "target": self.target.to_table(),
            "probes": {name: r.to_table() for name, r in sorted(self.probes.items())},
        }
        for key, table in self.sections.items():
            if key in doc:
                raise ValueError(f"section {key!r} clashes with a top-level findings key")
            doc[key] = table
        cleaned: dict[str, Any] = clean(doc)
        return cleaned

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], where: str = "findings") -> Findings:
        version = doc.get("schema_version")
        if not isinstance(version, int):
            raise FindingsError(f"{where}: no integer schema_version; is this an inferfit file?")
        if version > SCHEMA_VERSION:
            raise FindingsError(
                f"{where}: schema_version {version} is newer than this inferfit reads "
                f"({SCHEMA_VERSION}); upgrade inferfit"
            )
        target = doc.get("target")
        if not isinstance(target, Mapping):
            raise FindingsError(f"{where}: missing [target] table")
        probes = doc.get("probes", {})
        if not isinstance(probes, Mapping):
            raise FindingsError(f"{where}: [probes] must be a table")
        created = doc.get("created")
        if not isinstance(created, dt.datetime):
            raise FindingsError(f"{where}: 'created' must be a TOML date-time")
        sections = {
            k: dict(v) for k, v in doc.items()
            if k not in {"schema_version", "tool", "created", "target", "probes"}
            and isinstance(v, Mapping)
        }
        return cls(
            target=Target.from_table(target, where),
            probes={
                name: ProbeResult.from_table(name, table, where)
                for name, table in probes.items()
                if isinstance(table, Mapping)
            },
            created=created,
            tool=str(doc.get("tool", "")),
            schema_version=version,
            sections=sections,
        )

    # -- files -----------------------------------------------------------
    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=_json_default, sort_keys=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write TOML (or JSON for a .json name) atomically; returns the path."""
        target = Path(path)
        text = self.to_json() if target.suffix == ".json" else self.to_toml()
        write_atomic(target, text)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Findings:
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise FindingsError(f"{p}: cannot read: {exc.strerror}") from None
        try:
            if p.suffix == ".json":
                doc = json.loads(raw)
                if isinstance(doc.get("created"), str):
                    doc["created"] = dt.datetime.fromisoformat(doc["created"])
            else:
                doc = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            kind = "JSON" if p.suffix == ".json" else "TOML"
            raise FindingsError(f"{p}: not valid {kind}: {exc}") from None
        return cls.from_dict(cast(dict[str, Any], doc), where=str(p))


def write_atomic(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename: never a partial file."""
    path = path.expanduser()
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def clean(value: Any) -> Any:
    """Drop None and non-finite floats recursively (TOML has neither)."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items() if _present(v)}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value if _present(v)]
    return value


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and not math.isfinite(v))


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} in findings")
