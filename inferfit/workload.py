"""Workload profiles: what the box must serve (model, realtime targets, batch volume, costs).

A workload is a TOML file (examples in ``configs/workloads/``; layout in
docs/sizing.md). Loading validates every key: an error names the file, the
key and the expected type. The sizing plugin receives a :class:`Workload`
through the ``inferfit_recommend(findings, workload)`` hook.

The model is given either by its fields (``params``, ``num_hidden_layers``,
``num_attention_heads``, ``num_key_value_heads``, ``hidden_size``, optional
``head_dim``) or by ``hf_config``, the path of a Hugging Face ``config.json``
on the box. ``inferfit check --workload`` reads that file over SSH
(:func:`read_hf_config_remote`); offline ``inferfit size`` reads it locally when
the path exists (:func:`read_hf_config_local`) and otherwise says it could not.
Fields written in the workload win over the ones in ``config.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferfit.hosts.base import Host, HostError

DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "awq", "gptq")
KV_DTYPES = ("auto", "fp32", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8")


class WorkloadError(ValueError):
    """An invalid workload file; the message names the file, the key and the expectation."""


@dataclass(frozen=True)
class ModelSpec:
    name: str = ""
    params: float | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    hidden_size: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    tie_word_embeddings: bool = False
    num_experts: int = 1
    hf_config: str | None = None
    weights_dtype: str | None = None  # None: from config.json, else bf16
    kv_cache_dtype: str = "auto"  # auto: the weights dtype (BF16 for 4/8-bit weights)
    tensor_parallel: int = 1
    max_context: int | None = None
    # Provenance of fields filled from config.json, and why it could not be read.
    from_hf_config: tuple[str, ...] = ()
    hf_config_error: str | None = None

    @property
    def weights_dtype_effective(self) -> str:
        return self.weights_dtype or "bf16"

    @property
    def kv_dtype_effective(self) -> str:
        if self.kv_cache_dtype != "auto":
            return self.kv_cache_dtype
        w = self.weights_dtype_effective
        return w if w in ("fp32", "bf16", "fp16") else "bf16"


@dataclass(frozen=True)
class RealtimeTargets:
    qps_mean: float | None = None
    qps_peak: float | None = None
    input_tokens: int = 512
    output_tokens: int = 256
    ttft_ms_p95: float | None = None
    e2e_ms_p95: float | None = None
    e2e_ms_p99: float | None = None
    response_bytes: float | None = None
    streaming: bool = True
    tpot_ms: float | None = None  # measured time per output token, if known
    api_keys: int | None = None  # clients sharing the rate limit
    regions: tuple[str, ...] = ()  # where the users are (latency probe region names)


@dataclass(frozen=True)
class BatchTargets:
    tasks_per_day: float
    window_hours: float = 24.0
    tokens_per_task: int = 1000
    output_tokens_per_task: int | None = None  # the rest is prefill (input)
    retry_rate: float = 0.0
    bytes_per_task: float | None = None  # data moved per task (transfer cost)
    tokens_per_s: float | None = None  # measured box throughput, if known


@dataclass(frozen=True)
class CostSpec:
    server_per_month: float | None = None
    storage_per_month: float = 0.0
    transfer_per_gb: float = 0.0
    currency: str = "USD"


@dataclass(frozen=True)
class SizingPolicy:
    """Engine and policy settings (vLLM-like defaults); the `[sizing]` table of a workload."""

    gpu_memory_utilization: float = 0.9
    headroom: float = 0.7
    non_torch_gib: float = 0.5
    activation_gib: float = 1.25
    bandwidth_redundancy: float = 1.5
    link_mbit: float | None = None
    loader_mib_s: float | None = None
    cold_start_warn_s: float = 120.0
    interference_split_pct: float = 20.0
    decode_efficiency: float = 0.6
    prefill_mfu: float = 0.4
    min_concurrency_at_max_context: float = 4.0
    max_num_seqs: int = 256  # the engine's cap on running sequences (vLLM default)


@dataclass(frozen=True)
class Workload:
    name: str
    model: ModelSpec
    realtime: RealtimeTargets | None = None
    batch: BatchTargets | None = None
    cost: CostSpec | None = None
    sizing: SizingPolicy = field(default_factory=SizingPolicy)
    path: str = ""


# -- validation ---------------------------------------------------------------

_Check = Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _pos_int(v: Any) -> bool:
    return _is_int(v) and v > 0


def _pos_num(v: Any) -> bool:
    return _is_num(v) and v > 0


def _nonneg_num(v: Any) -> bool:
    return _is_num(v) and v >= 0


def _fraction(v: Any) -> bool:
    return _is_num(v) and 0 < v <= 1


def _rate(v: Any) -> bool:
    return _is_num(v) and 0 <= v < 1


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _one_of(choices: tuple[str, ...]) -> _Check:
    return lambda v: isinstance(v, str) and v.lower() in choices


_POS_INT = (_pos_int, "a positive integer")
_POS_NUM = (_pos_num, "a positive number")
_NONNEG = (_nonneg_num, "a number ≥ 0")
_TEXT = (_text, "a string")
_BOOL = (_bool, "a boolean (true/false)")

SCHEMA: dict[str, dict[str, tuple[_Check, str]]] = {
    "model": {
        "name": _TEXT, "params": _POS_NUM, "num_hidden_layers": _POS_INT,
        "num_attention_heads": _POS_INT, "num_key_value_heads": _POS_INT,
        "hidden_size": _POS_INT, "head_dim": _POS_INT, "intermediate_size": _POS_INT,
        "vocab_size": _POS_INT, "tie_word_embeddings": _BOOL, "num_experts": _POS_INT,
        "hf_config": _TEXT,
        "weights_dtype": (_one_of(DTYPES), "one of " + ", ".join(DTYPES)),
        "kv_cache_dtype": (_one_of(KV_DTYPES), "one of " + ", ".join(KV_DTYPES)),
        "tensor_parallel": _POS_INT, "max_context": _POS_INT,
    },
    "realtime": {
        "qps_mean": _POS_NUM, "qps_peak": _POS_NUM, "input_tokens": _POS_INT,
        "output_tokens": _POS_INT, "ttft_ms_p95": _POS_NUM, "e2e_ms_p95": _POS_NUM,
        "e2e_ms_p99": _POS_NUM, "response_bytes": _POS_NUM, "streaming": _BOOL,
        "tpot_ms": _POS_NUM, "api_keys": _POS_INT,
        "regions": (_str_list, "an array of region names (strings)"),
    },
    "batch": {
        "tasks_per_day": _POS_NUM, "window_hours": (lambda v: _pos_num(v) and v <= 24,
                                                    "a number of hours in (0, 24]"),
        "tokens_per_task": _POS_INT, "output_tokens_per_task": _POS_INT,
        "retry_rate": (_rate, "a fraction in [0, 1)"), "bytes_per_task": _NONNEG,
        "tokens_per_s": _POS_NUM,
    },
    "cost": {
        "server_per_month": _NONNEG, "storage_per_month": _NONNEG, "transfer_per_gb": _NONNEG,
        "currency": _TEXT,
    },
    "sizing": {
        "gpu_memory_utilization": (_fraction, "a fraction in (0, 1]"),
        "headroom": (_fraction, "a fraction in (0, 1]"),
        "non_torch_gib": _NONNEG, "activation_gib": _NONNEG,
        "bandwidth_redundancy": _POS_NUM, "link_mbit": _POS_NUM, "loader_mib_s": _POS_NUM,
        "cold_start_warn_s": _POS_NUM, "interference_split_pct": _NONNEG,
        "decode_efficiency": (_fraction, "a fraction in (0, 1]"),
        "prefill_mfu": (_fraction, "a fraction in (0, 1]"),
        "min_concurrency_at_max_context": _POS_NUM, "max_num_seqs": _POS_INT,
    },
}
TOP_KEYS = ("name", "description", *SCHEMA)


def _type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, Mapping):
        return "a table"
    return type(v).__name__


def _table(doc: Mapping[str, Any], name: str, where: str) -> dict[str, Any] | None:
    if name not in doc:
        return None
    table = doc[name]
    if not isinstance(table, Mapping):
        raise WorkloadError(f"{where}: [{name}] must be a table, got {_type_name(table)}")
    schema = SCHEMA[name]
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in schema:
            raise WorkloadError(
                f"{where}: unknown key {name}.{key}; known keys: {', '.join(sorted(schema))}"
            )
        check, expected = schema[key]
        if not check(value):
            raise WorkloadError(
                f"{where}: {name}.{key} must be {expected}, got {_type_name(value)}"
            )
        out[key] = value.lower() if key.endswith("dtype") else value
    return out


def parse_workload(doc: Mapping[str, Any], where: str = "workload") -> Workload:
    """Validate a parsed TOML document and build a Workload (WorkloadError on any bad key)."""
    for key in doc:
        if key not in TOP_KEYS:
            raise WorkloadError(
                f"{where}: unknown key {key!r}; a workload has {', '.join(TOP_KEYS)}"
            )
    for key in ("name", "description"):
        if key in doc and not isinstance(doc[key], str):
            raise WorkloadError(f"{where}: {key} must be a string, got {_type_name(doc[key])}")
    model_t = _table(doc, "model", where)
    if model_t is None:
        raise WorkloadError(f"{where}: missing [model] table (fields or hf_config)")
    if "params" in model_t:
        model_t["params"] = float(model_t["params"])
    if not model_t.get("hf_config") and "params" not in model_t:
        raise WorkloadError(
            f"{where}: model.params is required (a positive number) unless model.hf_config is set"
        )
    realtime_t, batch_t = _table(doc, "realtime", where), _table(doc, "batch", where)
    if realtime_t is None and batch_t is None:
        raise WorkloadError(f"{where}: a workload needs [realtime], [batch] or both")
    if realtime_t is not None:
        if "qps_mean" not in realtime_t and "qps_peak" not in realtime_t:
            raise WorkloadError(f"{where}: realtime.qps_peak (or qps_mean) is required")
        realtime_t.setdefault("qps_peak", realtime_t.get("qps_mean"))
        realtime_t.setdefault("qps_mean", realtime_t["qps_peak"])
        if realtime_t["qps_peak"] < realtime_t["qps_mean"]:
            raise WorkloadError(f"{where}: realtime.qps_peak must be ≥ realtime.qps_mean")
        realtime_t["regions"] = tuple(realtime_t.get("regions", ()))
    if batch_t is not None and "tasks_per_day" not in batch_t:
        raise WorkloadError(f"{where}: batch.tasks_per_day is required (a positive number)")
    if (batch_t is not None and "output_tokens_per_task" in batch_t
            and batch_t["output_tokens_per_task"] > batch_t.get("tokens_per_task", 1000)):
        raise WorkloadError(f"{where}: batch.output_tokens_per_task exceeds batch.tokens_per_task")
    cost_t, sizing_t = _table(doc, "cost", where), _table(doc, "sizing", where)
    return Workload(
        name=str(doc.get("name") or model_t.get("name") or Path(where).stem),
        model=ModelSpec(**model_t),
        realtime=RealtimeTargets(**realtime_t) if realtime_t is not None else None,
        batch=BatchTargets(**batch_t) if batch_t is not None else None,
        cost=CostSpec(**cost_t) if cost_t is not None else None,
        sizing=SizingPolicy(**(sizing_t or {})),
        path=where,
    )


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """Read and validate a workload TOML file; WorkloadError names the file and the key."""
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{p}: cannot read workload: {exc.strerror}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{p}: not valid TOML: {exc}") from None
    return parse_workload(doc, str(p))


# -- Hugging Face config.json ------------------------------------------------

_HF_FIELDS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
              "head_dim", "intermediate_size", "vocab_size")


def parse_hf_config(text: str, where: str) -> dict[str, Any]:
    """Model fields from a Hugging Face config.json (pure).

    Reads ``text_config`` for multimodal models; ``num_key_value_heads``
    defaults to the attention heads (no GQA); ``torch_dtype`` and
    ``quantization_config`` give the weights dtype; ``max_position_embeddings``
    the context; ``num_local_experts`` / ``num_experts`` the MoE expert count.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{where}: config.json is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise WorkloadError(f"{where}: config.json is not a JSON object")
    text_config = doc.get("text_config")
    cfg: dict[str, Any] = text_config if isinstance(text_config, dict) else doc
    out: dict[str, Any] = {}
    for key in _HF_FIELDS:
        value = cfg.get(key)
        if _pos_int(value):
            out[key] = value
    if "num_hidden_layers" not in out or "num_attention_heads" not in out:
        raise WorkloadError(
            f"{where}: config.json lacks num_hidden_layers/num_attention_heads "
            "(not a decoder-only transformer config?)"
        )
    out.setdefault("num_key_value_heads", out["num_attention_heads"])
    if isinstance(cfg.get("tie_word_embeddings"), bool):
        out["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    if _pos_int(experts):
        out["num_experts"] = experts
    if _pos_int(cfg.get("max_position_embeddings")):
        out["max_context"] = cfg["max_position_embeddings"]
    quant = doc.get("quantization_config")
    dtype = str(cfg.get("torch_dtype") or doc.get("torch_dtype") or "").lower()
    if isinstance(quant, dict):
        method = str(quant.get("quant_method", "")).lower()
        if quant.get("bits") == 4 or method in ("awq", "gptq"):
            out["weights_dtype"] = "int4"
        elif method == "fp8" or quant.get("bits") == 8:
            out["weights_dtype"] = "fp8"
    elif dtype in ("bfloat16", "float16", "float32"):
        out["weights_dtype"] = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[dtype]
    return out


def with_hf_config(workload: Workload, fields: Mapping[str, Any]) -> Workload:
    """Fill model fields the workload left out from parsed config.json fields."""
    model = workload.model
    filled: dict[str, Any] = {}
    defaults = ModelSpec()
    for key, value in fields.items():
        if getattr(model, key) == getattr(defaults, key):
            filled[key] = value
    new_model = dataclasses.replace(
        model, **filled, from_hf_config=tuple(sorted(filled)), hf_config_error=None
    )
    return dataclasses.replace(workload, model=new_model)


def with_hf_config_error(workload: Workload, message: str) -> Workload:
    return dataclasses.replace(
        workload, model=dataclasses.replace(workload.model, hf_config_error=message)
    )


def read_hf_config_local(workload: Workload) -> Workload:
    """Offline (``inferfit size``): read ``hf_config`` from this machine if the path exists."""
    path = workload.model.hf_config
    if not path:
        return workload
    p = Path(path).expanduser()
    try:
        text = p.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        return with_hf_config_error(
            workload, f"could not read hf_config {path} on this machine ({reason}); "
            "it is read over SSH with `inferfit check --workload`"
        )
    try:
        return with_hf_config(workload, parse_hf_config(text, path))
    except WorkloadError as exc:
        return with_hf_config_error(workload, str(exc))


async def read_hf_config_remote(workload: Workload, host: Host, timeout: float = 30.0) -> Workload:
    """``inferfit check --workload``: read ``hf_config`` on the box (``cat PATH`` as argv)."""
    path = workload.model.hf_config
    if not path:
        return workload
    try:
        done = await host.run(["cat", "--", path], timeout=timeout)
    except HostError as exc:
        return with_hf_config_error(workload, f"could not read hf_config {path} on "
                                    f"{host.name}: {exc.message}")
    if not done.ok:
        return with_hf_config_error(
            workload, f"could not read hf_config {path} on {host.name}: {done.describe()}"
        )
    try:
        return with_hf_config(workload, parse_hf_config(done.stdout, f"{host.name}:{path}"))
    except WorkloadError as exc:
        return with_hf_config_error(workload, str(exc))
