"""Layered TOML configuration with provenance.

Layers, lowest first: shipped defaults (``configs/defaults.toml``), the user
config (``<user config dir>/inferfit/config.toml``), ``./inferfit.toml`` in the
working directory, ``--config FILE``, then CLI flags. Every value remembers
where it came from (``inferfit config show``).
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import platformdirs

DEFAULTS_SOURCE = "defaults (configs/defaults.toml)"
# Top-level keys whose content is free-form (validated by the plugin that reads it).
OPEN_KEYS = frozenset({"regions"})
# Tables whose keys are free-form below the listed prefix (per-probe extras from plugins).
OPEN_TABLES = frozenset({"plugins"})
USER_CONFIG_ENV = "INFERFIT_CONFIG_DIR"
# Keys every [probes.NAME] table accepts, with an example of their type.
GENERIC_PROBE_KEYS: dict[str, Any] = {"timeout_s": 120.0}


class ConfigError(ValueError):
    """An invalid config file or key; the message names the file, key and expectation."""


def user_config_path() -> Path:
    base = os.environ.get(USER_CONFIG_ENV) or platformdirs.user_config_dir("inferfit")
    return Path(base) / "config.toml"


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean (true/false)"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int | float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


@dataclass
class Config:
    data: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    # -- reading ---------------------------------------------------------
    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    def probe_options(self, name: str) -> dict[str, Any]:
        table = self.get(f"probes.{name}", {})
        return dict(table) if isinstance(table, Mapping) else {}

    def origin(self, dotted: str) -> str:
        return self.origins.get(dotted, "unset")

    def explain(self) -> Iterator[tuple[str, Any, str]]:
        """(dotted key, value, source) for every leaf, sorted by key."""
        for key, value in sorted(_leaves(self.data)):
            yield key, value, self.origin(key)

    # -- building --------------------------------------------------------
    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        *,
        include_user: bool = True,
        include_project: bool = True,
    ) -> Config:
        cfg = cls()
        defaults = _read_defaults()
        cfg._merge(defaults, DEFAULTS_SOURCE, schema=None)
        schema = copy.deepcopy(defaults)
        layers: list[Path] = []
        if include_user:
            layers.append(user_config_path())
        if include_project:
            layers.append(Path.cwd() / "inferfit.toml")
        for path in layers:
            if path.is_file():
                cfg._merge(_read_file(path), str(path), schema=schema)
        if config_file is not None:
            path = Path(config_file).expanduser()
            if not path.is_file():
                raise ConfigError(f"{path}: no such config file (from --config)")
            cfg._merge(_read_file(path), str(path), schema=schema)
        if overrides:
            nested: dict[str, Any] = {}
            for dotted, value in overrides.items():
                if value is None:
                    continue
                node = nested
                *parents, leaf = dotted.split(".")
                for part in parents:
                    node = node.setdefault(part, {})
                node[leaf] = value
            cfg._merge(nested, "command line", schema=schema)
        return cfg

    def _merge(
        self, layer: Mapping[str, Any], source: str, schema: Mapping[str, Any] | None
    ) -> None:
        if schema is not None:
            _validate(layer, schema, source, prefix="")
        self.files.append(source)
        _deep_merge(self.data, layer)
        for key, _ in _leaves(layer):
            self.origins[key] = source
        # An array of tables (e.g. [[regions]]) is replaced whole by the layer.
        for key, value in layer.items():
            if isinstance(value, list):
                self.origins[key] = source


def _read_defaults() -> dict[str, Any]:
    text = resources.files("inferfit.configs").joinpath("defaults.toml").read_text("utf-8")
    return tomllib.loads(text)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def _validate(
    layer: Mapping[str, Any], schema: Mapping[str, Any], source: str, prefix: str
) -> None:
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        if not prefix and key in OPEN_KEYS:
            continue
        if dotted.split(".")[0] in OPEN_TABLES:
            continue
        if key not in schema and prefix.startswith("probes.") and prefix.count(".") == 2:
            schema = {**schema, **{k: v for k, v in GENERIC_PROBE_KEYS.items() if k == key}}
        if key not in schema:
            known = ", ".join(sorted(schema)) or "none"
            raise ConfigError(f"{source}: unknown key '{dotted}' (known here: {known})")
        expected = schema[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{source}: '{dotted}' must be a table, got {_type_name(value)}"
                )
            _validate(value, expected, source, prefix=f"{dotted}.")
        elif not _same_kind(expected, value):
            raise ConfigError(
                f"{source}: '{dotted}' must be {_type_name(expected)} "
                f"(like {expected!r}), got {_type_name(value)} {value!r}"
            )


def _deep_merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def _leaves(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, f"{dotted}.")
        else:
            yield dotted, value
