"""Workload files: the examples load; every mistake names the file, the key and the type."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from inferfit.hosts import SSHOptions, make_host
from inferfit.workload import (
    Workload,
    WorkloadError,
    load_workload,
    parse_hf_config,
    parse_workload,
    read_hf_config_local,
    read_hf_config_remote,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "configs" / "workloads").glob("*.toml"))
HF_CONFIG = REPO / "tests" / "fixtures" / "sizing" / "llama-3-8b-config.json"
MINIMAL: dict[str, Any] = {"model": {"params": 8e9}, "realtime": {"qps_peak": 5}}


def test_there_are_four_examples() -> None:
    assert [p.stem for p in EXAMPLES] == [
        "long-context-70b", "mixed-deployment", "nightly-batch", "realtime-chat-8b"]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_load(path: Path) -> None:
    w = load_workload(path)
    assert w.name
    assert w.model.params
    assert w.realtime or w.batch


def test_defaults_and_derived_values() -> None:
    w = parse_workload(MINIMAL, "w.toml")
    assert w.realtime is not None
    assert w.realtime.qps_mean == 5  # mean defaults to the peak
    assert w.model.weights_dtype_effective == "bf16"
    assert w.model.kv_dtype_effective == "bf16"
    assert w.sizing.gpu_memory_utilization == 0.9
    assert w.sizing.headroom == 0.7
    int4 = parse_workload({**MINIMAL, "model": {"params": 8e9, "weights_dtype": "INT4"}}, "w")
    assert int4.model.weights_dtype == "int4"
    assert int4.model.kv_dtype_effective == "bf16"  # 4-bit weights keep a BF16 KV cache


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"realtime": {"qps_peak": 1}}, "w.toml: missing [model] table"),
        ({"model": {"name": "x"}, "realtime": {"qps_peak": 1}},
         "w.toml: model.params is required (a positive number) unless model.hf_config is set"),
        ({**MINIMAL, "model": {"params": 8e9, "num_hidden_layers": "32"}},
         "w.toml: model.num_hidden_layers must be a positive integer, got the string '32'"),
        ({**MINIMAL, "model": {"params": 8e9, "num_hidden_layers": 32.0}},
         "w.toml: model.num_hidden_layers must be a positive integer, got the number 32.0"),
        ({**MINIMAL, "model": {"params": 8e9, "weights_dtype": "bf17"}},
         "w.toml: model.weights_dtype must be one of fp32, bf16, fp16, fp8, int8, int4, awq, gptq"
         ", got the string 'bf17'"),
        ({**MINIMAL, "model": {"params": 8e9, "layers": 32}},
         "w.toml: unknown key model.layers; known keys:"),
        ({**MINIMAL, "realtime": {"qps_peak": 5, "streaming": "yes"}},
         "w.toml: realtime.streaming must be a boolean (true/false), got the string 'yes'"),
        ({**MINIMAL, "realtime": {"qps_peak": 5, "qps_mean": 6}},
         "w.toml: realtime.qps_peak must be ≥ realtime.qps_mean"),
        ({**MINIMAL, "realtime": {"ttft_ms_p95": 300}}, "w.toml: realtime.qps_peak (or qps_mean)"),
        ({"model": {"params": 8e9}}, "w.toml: a workload needs [realtime], [batch] or both"),
        ({"model": {"params": 8e9}, "batch": {"window_hours": 6}},
         "w.toml: batch.tasks_per_day is required"),
        ({"model": {"params": 8e9}, "batch": {"tasks_per_day": 1, "window_hours": 30}},
         "w.toml: batch.window_hours must be a number of hours in (0, 24], got the number 30"),
        ({"model": {"params": 8e9}, "batch": {"tasks_per_day": 1, "retry_rate": 1.5}},
         "w.toml: batch.retry_rate must be a fraction in [0, 1), got the number 1.5"),
        ({**MINIMAL, "sizing": {"headroom": 1.2}},
         "w.toml: sizing.headroom must be a fraction in (0, 1], got the number 1.2"),
        ({**MINIMAL, "cost": [1, 2]}, "w.toml: [cost] must be a table, got an array"),
        ({**MINIMAL, "regions": []}, "w.toml: unknown key 'regions'; a workload has"),
    ],
)
def test_validation_errors_name_file_key_and_type(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError) as err:
        parse_workload(doc, "w.toml")
    assert str(err.value).startswith(message)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"missing\.toml: cannot read workload"):
        load_workload(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\nparams = 1\n")
    with pytest.raises(WorkloadError, match=r"bad\.toml: not valid TOML"):
        load_workload(bad)


def test_parse_hf_config_of_llama3_8b() -> None:
    fields = parse_hf_config(HF_CONFIG.read_text(), "config.json")
    assert fields == {
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 128256,
        "tie_word_embeddings": False, "max_context": 8192, "weights_dtype": "bf16",
    }


@pytest.mark.parametrize(
    ("doc", "expect"),
    [
        ({"text_config": {"num_hidden_layers": 48, "num_attention_heads": 16,
                          "hidden_size": 5120}, "torch_dtype": "bfloat16"},
         {"num_hidden_layers": 48, "num_key_value_heads": 16, "weights_dtype": "bf16"}),
        ({"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
          "quantization_config": {"quant_method": "awq", "bits": 4}},
         {"weights_dtype": "int4"}),
        ({"num_hidden_layers": 32, "num_attention_heads": 32, "num_local_experts": 8,
          "quantization_config": {"quant_method": "fp8"}},
         {"num_experts": 8, "weights_dtype": "fp8"}),
    ],
)
def test_parse_hf_config_variants(doc: dict[str, Any], expect: dict[str, Any]) -> None:
    fields = parse_hf_config(json.dumps(doc), "c")
    assert {k: fields.get(k) for k in expect} == expect


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"model_type": "bert"}'])
def test_parse_hf_config_refuses_what_it_cannot_use(text: str) -> None:
    with pytest.raises(WorkloadError, match=r"^/m/config\.json: "):
        parse_hf_config(text, "/m/config.json")


def _hf_workload(path: str, **model: Any) -> Workload:
    return parse_workload({"model": {"hf_config": path, **model},
                           "realtime": {"qps_peak": 5}}, "w.toml")


def test_hf_config_read_locally_fills_the_model_and_workload_fields_win() -> None:
    w = read_hf_config_local(_hf_workload(str(HF_CONFIG), num_key_value_heads=4))
    assert w.model.hf_config_error is None
    assert w.model.num_hidden_layers == 32
    assert w.model.num_key_value_heads == 4  # written in the workload: wins
    assert "num_key_value_heads" not in w.model.from_hf_config
    assert "num_hidden_layers" in w.model.from_hf_config


def test_hf_config_missing_locally_says_it_could_not(tmp_path: Path) -> None:
    w = read_hf_config_local(_hf_workload(str(tmp_path / "nope" / "config.json")))
    assert w.model.hf_config_error is not None
    assert "could not read hf_config" in w.model.hf_config_error
    assert "inferfit check --workload" in w.model.hf_config_error
    assert w.model.num_hidden_layers is None


def test_hf_config_read_over_real_ssh(sshd: Any, home: Path, tmp_path: Path) -> None:
    # A directory name a shell would choke on: it travels as one argv element.
    odd = tmp_path / "models dir; touch pwned" / "$(id)"
    odd.mkdir(parents=True)
    (odd / "config.json").write_text(HF_CONFIG.read_text())
    missing = tmp_path / "absent" / "config.json"

    async def go() -> tuple[Workload, Workload]:
        host = make_host("box", SSHOptions(config_file=str(sshd.ssh_config)))
        try:
            good = await read_hf_config_remote(_hf_workload(str(odd / "config.json")), host)
            bad = await read_hf_config_remote(_hf_workload(str(missing)), host)
        finally:
            await host.close()
        return good, bad

    good, bad = asyncio.run(go())
    assert good.model.hf_config_error is None
    assert good.model.num_key_value_heads == 8
    assert good.model.vocab_size == 128256
    assert not (tmp_path / "pwned").exists()
    assert not Path("pwned").exists()
    assert bad.model.hf_config_error is not None
    assert "No such file" in bad.model.hf_config_error
